"""The distance-fit run: the classic loop step for step, NaN bookkeeping, snapshots, networks
and the classical-MDS reference."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.common.health import Health
from gradviz.core.lab import mds
from gradviz.core.lab.fit import DistanceFitRun
from gradviz.core.lab.pointsets import generate, save_points
from gradviz.core.settings.config import FitConfig as _FitConfig

#: The small run these tests were written for (the shared defaults are the app's
#: teaching experiment, 200 points for 2000 steps); a test's own values win.
FitConfig = partial(_FitConfig, target="gaussian", n=10, method="safe", lr=1e-3, steps=500)


def _run(**changes) -> DistanceFitRun:
    return DistanceFitRun(FitConfig(**{"steps": 20, **changes}))


def test_naive_method_gives_nan_gradient_at_step_0_and_nan_loss_at_step_1():
    run = _run(method="naive", steps=5)
    run.run()
    assert run.first_nonfinite_grad_step == 0
    assert run.first_nonfinite_loss_step == 1
    assert math.isfinite(run.initial_loss)
    assert math.isnan(run.final_loss())
    assert run.completed_steps == 5 and run.done and not run.stopped_on_nan


def test_snapshot_of_naive_step_0_shows_the_nan_born_on_the_diagonal():
    run = _run(method="naive")
    run.step(capture=True)
    snap = run.snapshot()
    diagonal = np.eye(run.n_points, dtype=bool)
    assert (snap.entry_health[diagonal] == Health.NAN).all()
    assert (snap.entry_health[~diagonal] == Health.FINITE).all()
    assert (snap.coord_health == Health.NAN).all()
    # The picture is of the step that made the NaN: its coordinates were still finite.
    assert np.isfinite(snap.coords).all() and math.isfinite(snap.loss)
    assert snap.param_health == (("coords", Health.NAN),)
    assert snap.first_nonfinite_grad_step == 0 and snap.step == 1


@pytest.mark.parametrize("method", ["masked", "clamp", "safe", "cdist"])
def test_fixed_methods_run_500_steps_with_finite_decreasing_loss(method):
    run = _run(method=method, steps=500)
    run.run()
    history = run.loss_history
    assert len(history) == 500 and np.isfinite(history).all()
    assert np.all(np.diff(history) < 0)
    assert run.final_loss() < history[-1] < 0.5 * run.initial_loss
    assert run.first_nonfinite_grad_step is None and run.first_nonfinite_loss_step is None


def _plain_classic_fix_loop(target: np.ndarray, init: np.ndarray, steps: int, lr: float):
    """The classic fix as people write it, independent of gradviz: each step's loss, the
    final coordinates and each step's gradient norm (of float64 copies of the gradient)."""
    target_t = torch.tensor(target, dtype=torch.float64)
    diff = target_t[:, None, :] - target_t[None, :, :]
    target_d = torch.sqrt((diff**2).sum(-1)).to(torch.float32)
    x = torch.tensor(init, dtype=torch.float32, requires_grad=True)
    optimizer = torch.optim.Adam([x], lr=lr)
    criterion = torch.nn.MSELoss()
    n = len(x)
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    losses, grad_norms = [], []
    for _ in range(steps):
        optimizer.zero_grad()
        gram = x @ x.T
        norms = torch.diagonal(gram)
        sq = norms[:, None] + norms[None, :] - 2 * gram
        d = torch.zeros(n, n)
        d[off_diagonal] = torch.sqrt(sq[off_diagonal])
        loss = criterion(d, target_d)
        losses.append(loss.item())
        loss.backward()
        grad_norms.append(np.linalg.norm(x.grad.numpy().astype(np.float64)))
        optimizer.step()
    return np.array(losses), x.detach().numpy(), np.array(grad_norms)


def test_masked_method_reproduces_a_plain_classic_fix_loop_step_for_step(tmp_path):
    target = generate("gaussian", 12, 3, seed=10)
    init = generate("gaussian", 12, 3, seed=11)
    save_points(tmp_path / "target.csv", target)
    save_points(tmp_path / "init.npy", init)
    run = _run(
        method="masked",
        target=f"file:{tmp_path / 'target.csv'}",
        init=f"file:{tmp_path / 'init.npy'}",
        steps=60,
        lr=1e-2,
    )
    run.run()
    losses, coords, grad_norms = _plain_classic_fix_loop(target, init, steps=60, lr=1e-2)
    np.testing.assert_array_equal(run.loss_history, losses)
    np.testing.assert_array_equal(run.evaluate()[0], coords)
    # Step k's gradient norm sits beside step k's loss (same backward, before its update).
    assert run.grad_norm_names == ("coords",) and run.grad_norm_history.shape == (1, 60)
    np.testing.assert_allclose(run.grad_norm_history[0], grad_norms, rtol=1e-5)


def test_stop_on_nan_keeps_the_last_finite_state():
    settings = {"method": "masked", "optimizer": "sgd", "lr": 1e3, "steps": 50}
    stopped = _run(stop_on_nan=True, **settings)
    stopped.run()
    k = stopped.first_nonfinite_grad_step
    assert k is not None and k > 0 and stopped.stopped_on_nan and stopped.done
    assert stopped.completed_steps == k and len(stopped.loss_history) == k

    classic = _run(**settings)
    for _ in range(k):
        classic.step()
    kept, _, kept_loss = stopped.evaluate()
    np.testing.assert_array_equal(kept, classic.evaluate()[0])
    assert np.isfinite(kept).all()
    classic.run()  # without stop-on-NaN the same step spoils the coordinates
    assert classic.first_nonfinite_grad_step == k
    assert not np.isfinite(classic.evaluate()[0]).all()
    with pytest.raises(GradvizError, match="finished"):
        stopped.step()


def test_stop_on_nan_with_naive_method_keeps_the_initial_coordinates():
    run = _run(method="naive", stop_on_nan=True)
    start = run.evaluate()[0]
    run.run()
    assert run.completed_steps == 0 and run.stopped_on_nan
    np.testing.assert_array_equal(run.evaluate()[0], start)
    assert run.final_loss() == run.initial_loss
    snap = run.snapshot()
    assert snap.done and snap.step == 0
    assert (snap.entry_health[np.eye(run.n_points, dtype=bool)] == Health.NAN).all()


def test_stop_on_nan_can_be_switched_on_while_running():
    run = _run(method="naive")
    run.stop_on_nan = True
    run.step()
    assert run.stopped_on_nan and run.done and run.completed_steps == 0


def test_learning_rate_change_takes_effect_at_the_next_step():
    run = _run(method="safe", optimizer="sgd", lr=1e-3, dtype="float64")
    for _ in range(3):
        run.step()
    run.set_lr(0.25)
    assert run.lr == 0.25
    run.step(capture=True)
    snap = run.snapshot()
    before = snap.coords.astype(np.float64)
    grads = run.coords_param.grad.detach().numpy()
    np.testing.assert_allclose(run.evaluate()[0], before - 0.25 * grads, rtol=1e-6, atol=1e-6)
    with pytest.raises(GradvizError, match="positive"):
        run.set_lr(0.0)


def test_network_produces_the_coordinates_and_fits():
    run = _run(net="5-16-3:tanh", steps=40, lr=1e-2)
    assert run.coords_param is None
    run.run()
    assert run.loss_history[-1] < run.loss_history[0]
    names = [name for name, _ in run.snapshot().param_health]
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_snapshot_parameter_gradient_norms_are_those_of_the_gradients_it_shows():
    import copy

    from gradviz.core.lab.distances import pairwise_distances

    run = _run(net="3-6:tanh-3", method="masked")
    snap = run.snapshot()  # step 0: a forward/backward of the initial weights
    names = [name for name, _ in snap.param_norms]
    assert names == [name for name, _ in snap.param_health] == list(run.grad_norm_names)
    # Independently, in float64: the same weights, features and loss, norms by numpy.
    model = copy.deepcopy(run.model).double()
    coords = model(run.features.double())
    distances = pairwise_distances(coords, "masked").distances
    torch.nn.functional.mse_loss(distances, run.target_distances.double()).backward()
    expected = [np.linalg.norm(p.grad.numpy()) for p in model.parameters()]
    # (The output bias gets none: distances do not change when every point moves alike.)
    np.testing.assert_allclose([v for _, v in snap.param_norms], expected, rtol=1e-4, atol=1e-5)
    # A captured step's picture: the norms the step itself kept in its history.
    run.step(capture=True)
    snap = run.snapshot()
    np.testing.assert_array_equal([v for _, v in snap.param_norms], snap.grad_norm_history[:, -1])


def test_snapshot_parameter_gradient_norms_of_naive_step_0_are_nan():
    run = _run(net="3-6:tanh-3", method="naive")
    run.step(capture=True)
    snap = run.snapshot()
    assert all(math.isnan(value) for _, value in snap.param_norms)
    assert all(code == Health.NAN for _, code in snap.param_health)


def _independent_jacobians(model, features):
    return torch.stack(
        [torch.autograd.functional.jacobian(model, features[i]) for i in range(len(features))]
    )


def test_network_snapshot_gives_per_point_jacobians_matching_autograd():
    run = _run(net="4-16-16-3:tanh", n=7, dtype="float64")
    snap = run.snapshot()  # before any step: the current weights
    assert snap.jacobians.shape == (7, 3, 4)
    expected = _independent_jacobians(run.model, run.features).numpy()
    np.testing.assert_allclose(snap.jacobians, expected, rtol=1e-5, atol=1e-6)


def test_captured_step_jacobians_belong_to_the_weights_of_that_step():
    run = _run(net="4-8-3:sigmoid", n=6, dtype="float64", lr=0.1)
    run.step()
    weights = {k: v.clone() for k, v in run.model.state_dict().items()}
    expected = _independent_jacobians(run.model, run.features).numpy()
    run.step(capture=True)  # updates the weights after computing the Jacobians
    assert not torch.equal(weights["0.weight"], run.model.state_dict()["0.weight"])
    np.testing.assert_allclose(run.snapshot().jacobians, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("net", [None, "4-8-3:tanh"])
def test_capturing_every_step_does_not_change_the_run(net):
    plain = _run(net=net, method="masked", steps=15, lr=1e-2)
    captured = _run(net=net, method="masked", steps=15, lr=1e-2)
    plain.run()
    while not captured.done:
        captured.step(capture=True)
        captured.snapshot()
    np.testing.assert_array_equal(captured.loss_history, plain.loss_history)


def test_linear_network_jacobian_is_the_same_weight_product_for_every_point():
    run = _run(net="3-5-3", n=8, dtype="float64")
    w = run.model[1].weight @ run.model[0].weight
    jac = run.snapshot().jacobians
    np.testing.assert_allclose(jac, np.broadcast_to(w.detach().numpy(), jac.shape), rtol=1e-6)


def test_network_output_width_must_match_the_dimension():
    with pytest.raises(GradvizError, match="output width is 2 but the points have D = 3"):
        _run(net="8-2")


def test_init_does_not_combine_with_a_network():
    with pytest.raises(GradvizError, match=r"initial coords \(init\) do not apply when a network"):
        _run(net="8-3", init="grid")


def test_snapshot_arrays_are_read_only_copies():
    run = _run(method="safe", net=None)
    run.step(capture=True)
    snap = run.snapshot()
    kept = {name: getattr(snap, name).copy() for name in ("coords", "distances", "coord_grads")}
    for _ in range(5):
        run.step(capture=True)
    with torch.no_grad():
        run.coords_param.add_(100.0)
    for name, value in kept.items():
        np.testing.assert_array_equal(getattr(snap, name), value)
        assert not getattr(snap, name).flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        snap.coords[0, 0] = 1.0
    assert all(not v.flags.writeable for v in (snap.loss_history, snap.entry_health, snap.error))


def test_snapshot_fields_are_consistent():
    run = _run(method="masked", n=9, dim=2, target="circle")
    snap = run.snapshot()
    assert snap.step == 0 and snap.loss == pytest.approx(run.initial_loss)
    for _ in range(4):
        run.step()
    run.step(capture=True)
    snap = run.snapshot(generation=7)
    assert snap.generation == 7 and snap.step == 5 and len(snap.loss_history) == 5
    assert snap.loss == snap.loss_history[-1]
    assert snap.distances.dtype == np.float32 and snap.distances.shape == (9, 9)
    np.testing.assert_allclose(snap.error, snap.distances - snap.target_distances)
    assert snap.squared.shape == (9, 9) and snap.entry_grads.shape == (9, 9)
    assert snap.coord_grads.shape == (9, 2) and snap.jacobians is None
    np.testing.assert_allclose(snap.target_coords, generate("circle", 9, 2, seed=0), atol=1e-7)
    assert snap.method == "masked" and snap.device == "cpu" and not snap.done


def test_snapshot_without_a_captured_step_evaluates_the_current_state_without_stepping():
    run = _run(method="safe")
    run.step()
    run.step()
    snap = run.snapshot()
    assert snap.step == 2 and run.completed_steps == 2
    coords, _, loss = run.evaluate()
    np.testing.assert_array_equal(snap.coords, coords)
    assert snap.loss == pytest.approx(loss)
    run.step()
    assert len(run.loss_history) == 3 and run.loss_history[-1] == pytest.approx(loss)


def test_method_without_squared_distances_reports_distance_gradients():
    run = _run(method="cdist")
    run.step(capture=True)
    snap = run.snapshot()
    assert snap.squared is None
    # dMSE/dd_ij = 2 (d_ij - t_ij) / N^2, against the snapshot's own matrices.
    n = run.n_points
    np.testing.assert_allclose(snap.entry_grads, 2 * snap.error / n**2, rtol=1e-4, atol=1e-9)


def test_loss_history_holds_every_step_loss_in_order():
    run = _run(n=3, steps=1500)  # longer than the history buffer's first size
    returned = [run.step() for _ in range(1500)]
    np.testing.assert_array_equal(run.loss_history, returned)
    assert run.loss_history[0] == run.initial_loss
    # The gradient norms grow with it, column for step.
    assert run.grad_norm_history.shape == (1, 1500)
    assert np.isfinite(run.grad_norm_history).all() and (run.grad_norm_history > 0).all()


def test_gradient_norms_keep_nan_and_are_carried_in_the_snapshot():
    run = _run(method="naive", steps=4)
    run.step(capture=True)
    snap = run.snapshot()
    # The naive method's NaN gradient at step 0 is a NaN norm, not a dropped step.
    assert snap.grad_norm_names == ("coords",) and snap.grad_norm_history.shape == (1, 1)
    assert np.isnan(snap.grad_norm_history[0, 0])
    assert not snap.grad_norm_history.flags.writeable
    net = _run(net="4-8-3:tanh", steps=3)
    net.step(capture=True)
    snap = net.snapshot()
    named = list(net.model.named_parameters())
    assert snap.grad_norm_names == tuple(name for name, _ in named)
    # Each norm is that of the gradient step 0 used (left in .grad after its update).
    expected = [np.linalg.norm(p.grad.detach().double().numpy()) for _, p in named]
    np.testing.assert_allclose(snap.grad_norm_history[:, 0], expected, rtol=1e-5)
    net.step()  # step 1's gradients differ: the history keeps step 0's column
    np.testing.assert_array_equal(net.grad_norm_history[:, 0], snap.grad_norm_history[:, 0])
    assert net.grad_norm_history.shape == (len(named), 2)


def test_a_finite_gradient_whose_norm_overflows_is_still_finite():
    """Finiteness is read from the norms where they are finite; an infinite norm of finite
    entries (float32 overflows past 3.4e38) must not be taken for an Inf gradient."""
    run = _run(steps=3)
    loss = torch.tensor(1.0)
    run.coords_param.grad = torch.full_like(run.coords_param, 1e30)
    _, ok, norms = run._pass.read_step(loss)
    assert ok and np.isinf(norms).all()
    run.coords_param.grad[0, 0] = float("nan")
    _, ok, norms = run._pass.read_step(loss)
    assert not ok and np.isnan(norms).all()


def test_steps_per_second_leaves_out_the_first_step():
    run = _run(steps=3)
    run.step()
    assert math.isnan(run.steps_per_second)
    run.run()
    assert run.steps_per_second > 0


def test_same_seed_gives_the_same_run_and_target_differs_from_init():
    a, b = _run(seed=4), _run(seed=4)
    a.run()
    b.run()
    np.testing.assert_array_equal(a.loss_history, b.loss_history)
    assert not np.array_equal(a.evaluate()[0], a.target_points)
    assert _run(seed=5).initial_loss != a.initial_loss


def test_init_file_must_match_the_target_file_shape(tmp_path):
    save_points(tmp_path / "init.csv", generate("gaussian", 5, 2, seed=0))
    save_points(tmp_path / "target.csv", generate("gaussian", 10, 3, seed=0))
    with pytest.raises(GradvizError, match=r"shape \(5, 2\) but the target has \(10, 3\)"):
        _run(init=f"file:{tmp_path / 'init.csv'}", target=f"file:{tmp_path / 'target.csv'}")


def test_an_init_file_sets_n_and_d_of_a_generated_target(tmp_path):
    save_points(tmp_path / "init.csv", generate("gaussian", 5, 2, seed=0))
    run = _run(init=f"file:{tmp_path / 'init.csv'}", target="moons", n=10, dim=3)
    np.testing.assert_array_equal(run.target_points, generate("moons", 5, 2, seed=0))


def test_a_file_sets_n_and_d(tmp_path):
    save_points(tmp_path / "t.npy", generate("helix", 14, 4, seed=0))
    run = _run(target=f"file:{tmp_path / 't.npy'}", n=3, dim=2)
    assert (run.n_points, run.dim) == (14, 4)
    assert run.evaluate()[0].shape == (14, 4)


def test_unknown_device_is_a_clear_error():
    with pytest.raises(GradvizError, match="not available on this machine"):
        _run(device="cuda:7")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_fit_on_cuda_matches_the_cpu_run_and_snapshots_land_on_the_host():
    settings = {"method": "safe", "dtype": "float64", "steps": 50, "net": "4-8-3:tanh"}
    gpu, cpu = _run(device="cuda", **settings), _run(device="cpu", **settings)
    gpu.run()
    cpu.run()
    assert gpu.device.type == "cuda"
    np.testing.assert_allclose(gpu.loss_history, cpu.loss_history, rtol=1e-9)
    # The norms come back in the loss's own transfer, one per parameter tensor and step.
    np.testing.assert_allclose(gpu.grad_norm_history, cpu.grad_norm_history, rtol=1e-9)
    snap = gpu.snapshot()
    assert isinstance(snap.distances, np.ndarray) and snap.jacobians.shape == (10, 3, 4)
    naive = _run(device="cuda", method="naive", steps=3)
    naive.run()
    assert (naive.first_nonfinite_grad_step, naive.first_nonfinite_loss_step) == (0, 1)


def test_zero_steps_is_a_finished_run():
    run = _run(steps=0)
    assert run.done and run.completed_steps == 0
    assert run.initial_loss == run.final_loss()


# ---- the classical-MDS reference -----------------------------------------------------------
def test_reference_loss_matches_the_loss_of_fitting_to_the_mds_solution(tmp_path):
    target = generate("chain", 25, 3, seed=2)
    embedding = mds.classical_mds_from_points(target, 3)
    save_points(tmp_path / "target.npy", target)
    save_points(tmp_path / "mds.npy", embedding)
    run = _run(
        target=f"file:{tmp_path / 'target.npy'}",
        init=f"file:{tmp_path / 'mds.npy'}",
        dtype="float64",
    )
    # A target in D dimensions is reachable exactly: the reference is zero up to rounding,
    # and a run started at the MDS solution starts there.
    assert run.reference_loss == 0.0
    assert run.initial_loss == pytest.approx(run.reference_loss, abs=1e-24)
    assert mds.distance_mse(embedding, target) < 1e-24


def test_mds_from_points_equals_the_eigendecomposition_of_the_double_centred_matrix():
    points = generate("gaussian", 30, 5, seed=1) * np.array([5.0, 3, 1, 0.5, 0.1])
    diff = points[:, None, :] - points[None, :, :]
    sq = (diff**2).sum(-1)
    for dim in (1, 2, 3):
        by_eigh = mds.classical_mds(sq, dim)
        by_svd = mds.classical_mds_from_points(points, dim)
        np.testing.assert_allclose(np.abs(by_eigh), np.abs(by_svd), atol=1e-9)


def test_reference_loss_of_a_lower_dimensional_embedding_matches_a_brute_computation():
    points = generate("gaussian", 40, 4, seed=3) * np.array([4.0, 2, 1, 0.5])
    embedding = mds.classical_mds_from_points(points, 2)
    brute = torch.nn.functional.mse_loss(
        torch.cdist(torch.tensor(embedding), torch.tensor(embedding)),
        torch.cdist(torch.tensor(points), torch.tensor(points)),
    ).item()
    assert mds.distance_mse(embedding, points) == pytest.approx(brute, rel=1e-9)
    assert mds.reference_loss(points, 2) == pytest.approx(brute, rel=1e-9)
    assert mds.reference_loss(points, 4) == 0.0
    # MDS of points is their projection on the two main axes of the covariance.
    centred = points - points.mean(0)
    _, axes = np.linalg.eigh(centred.T @ centred)
    projection = centred @ axes[:, -2:]
    assert mds.distance_mse(projection, points) == pytest.approx(brute, rel=1e-9)
