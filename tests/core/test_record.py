"""gradviz.watch and recordings in one process: what a recording holds, exactly."""

from __future__ import annotations

import importlib.util
import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import gradviz
from gradviz.core.common.errors import GradvizError
from gradviz.core.record import layout as L
from gradviz.core.record.reader import Reader, is_recording
from gradviz.core.record.recorder import DEFAULT_EVERY
from gradviz.core.record.writer import STEP_CHUNK, RankWriter

EXAMPLES = Path(__file__).resolve().parents[2] / "resources" / "examples"


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def log_gradient(path, grad: torch.Tensor, **watch_args) -> Reader:
    """A recording of one step whose only watched tensor has gradient ``grad``."""
    x = torch.zeros_like(grad, requires_grad=True)
    with gradviz.watch({"x": x}, path, **watch_args) as rec:
        x.grad = grad.clone()
        rec.log(loss=1.5)
    return Reader(path)


def test_classic_nan_loop_names_step_0_and_pred_coordinates(tmp_path):
    losses = load_example("classic_nan_distances").train(tmp_path / "naive", steps=5)
    summary = Reader(tmp_path / "naive").describe()
    assert summary["first_nonfinite"]["step"] == 0
    assert summary["first_nonfinite"]["tensor"] == "pred_coordinates"
    assert summary["first_nonfinite"]["kind"] == "nan"
    assert summary["complete"] and summary["source"] == "watch" and summary["steps"] == 5
    assert math.isfinite(losses[0]) and math.isnan(losses[-1])


def test_the_same_loop_with_pairwise_distances_trains_finite_and_decreasing(tmp_path):
    losses = load_example("classic_nan_distances").train(tmp_path / "safe", safe=True, steps=60)
    assert all(math.isfinite(v) for v in losses) and losses[-1] < 0.5 * losses[0]
    reader = Reader(tmp_path / "safe")
    assert reader.first_nonfinite() is None
    stream = reader.rank(0)
    # Recorded every DEFAULT_EVERY steps; the recorded losses are the loop's own.
    assert list(stream.step_numbers()) == list(range(0, 60, DEFAULT_EVERY))
    np.testing.assert_allclose(stream.losses(), [losses[s] for s in stream.step_numbers()])


def test_histogram_counts_nan_infinities_and_zeros_exactly(tmp_path):
    values = [0.0, 0.0, 0.0, math.nan, math.nan, math.inf, -math.inf, -math.inf]
    values += [-250.0, 1e-7, 3.0, 0.5, -0.02]
    reader = log_gradient(tmp_path / "r", torch.tensor(values, dtype=torch.float64))
    series = reader.rank(0).tensor("x")
    # finite non-zero, zero, NaN, +Inf, -Inf
    assert series.counts.tolist() == [[5, 3, 2, 1, 2]]
    hist = series.histogram[0]
    decades = np.floor(np.log10([250.0, 1e-7, 3.0, 0.5, 0.02])).astype(int)
    expected = np.zeros(L.BINS, dtype=np.int64)
    expected[[L.ZERO_BIN, L.NAN_BIN, L.POS_INF_BIN, L.NEG_INF_BIN]] = [3, 2, 1, 2]
    for value, decade in zip([-250.0, 1e-7, 3.0, 0.5, -0.02], decades):
        if value > 0:
            expected[L.FIRST_POSITIVE_BIN + decade - L.LOWEST_DECADE] += 1
        else:
            expected[L.FIRST_NEGATIVE_BIN + L.HIGHEST_DECADE - 1 - decade] += 1
    assert hist.tolist() == expected.tolist()
    finite = np.array([v for v in values if math.isfinite(v)])
    assert series.grad_norm[0] == pytest.approx(np.linalg.norm(finite))
    assert series.max_abs[0] == 250.0
    first = reader.first_nonfinite()
    assert (first["step"], first["tensor"], first["index"], first["kind"]) == (0, "x", 3, "nan")


def test_an_infinite_gradient_is_reported_with_its_sign_and_flat_index(tmp_path):
    grad = torch.zeros(3, 4)
    grad[2, 1] = -math.inf
    first = log_gradient(tmp_path / "r", grad).first_nonfinite()
    assert (first["index"], first["kind"]) == (9, "-inf")


@pytest.mark.parametrize("every", [1, 100])
@pytest.mark.parametrize("bad", [None, math.inf])
def test_a_half_precision_gradient_whose_sum_overflows_is_not_called_infinite(tmp_path, every, bad):
    # Every entry of the first layer's float16 gradient is finite but their sum is past
    # 65,504; the second layer gets no gradient, so the tensors are tested one by one.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(400, 400), nn.Linear(3, 3)).half()
    rec = gradviz.watch(model, tmp_path / "r", every=every)
    x = torch.randn(64, 400).half()
    for step in range(3):
        model.zero_grad()
        model[0](x).float().sum().backward()
        if bad is not None and step == 1:
            model[0].bias.grad[7] = bad
        rec.log()
    rec.close()
    first = Reader(tmp_path / "r").describe()["first_nonfinite"]
    if bad is None:
        assert first is None
    else:
        assert (first["step"], first["tensor"], first["kind"]) == (1, "0.bias", "+inf")


def mlp_run(steps: int, path=None, every: int = 1) -> list[torch.Tensor]:
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(32, 6), torch.randn(32, 2)
    rec = gradviz.watch(model, path, every=every) if path else None
    grads = []
    for _ in range(steps):
        opt.zero_grad()
        hidden = model[1](model[0](x))
        if rec:
            hidden = rec.tensor("hidden", hidden)
        loss = ((model[2](hidden) - y) ** 2).mean()
        loss.backward()
        if rec:
            rec.log(loss=loss)
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]).clone())
        opt.step()
    if rec:
        rec.close()
    return grads + [torch.cat([p.detach().flatten() for p in model.parameters()])]


def test_watching_leaves_gradients_and_parameters_bitwise_unchanged_over_50_steps(tmp_path):
    plain = mlp_run(50)
    watched = mlp_run(50, tmp_path / "w", every=5)
    assert all(torch.equal(a, b) for a, b in zip(plain, watched))
    stream = Reader(tmp_path / "w").rank(0)
    assert stream.steps == 10 and stream.tensors == [
        "0.weight",
        "0.bias",
        "2.weight",
        "2.bias",
        "hidden",
    ]
    assert stream.image_names() == ["hidden"] and stream.image("hidden", 0)[1].shape == (32, 16)


def test_update_norm_is_the_step_the_optimizer_took(tmp_path):
    w = torch.ones(4, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    with gradviz.watch({"w": w}, tmp_path / "r", every=1) as rec:
        for _ in range(3):
            opt.zero_grad()
            (w * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
            rec.log()
            opt.step()
    series = Reader(tmp_path / "r").rank(0).tensor("w")
    # The last step's update is seen when the recorder closes after opt.step().
    np.testing.assert_allclose(series.update_norm, 0.1 * math.sqrt(30))
    np.testing.assert_allclose(series.param_norm[0], 2.0)


def test_optimizer_mode_records_without_log_and_log_adds_the_loss(tmp_path):
    w = torch.ones(2, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    with gradviz.watch({"w": w}, tmp_path / "r", every=1, optimizer=opt) as rec:
        for i in range(4):
            opt.zero_grad()
            loss = (w * w).sum()
            loss.backward()
            opt.step()
            if i % 2 == 0:
                rec.log(loss=loss)
    stream = Reader(tmp_path / "r").rank(0)
    assert list(stream.step_numbers()) == [0, 1, 2, 3]
    assert stream.losses()[0] == 2.0 and math.isnan(stream.losses()[1])


def test_user_step_numbers_are_kept(tmp_path):
    w = torch.ones(2, requires_grad=True)
    with gradviz.watch({"w": w}, tmp_path / "r", every=1) as rec:
        for step in (100, 200):
            w.grad = torch.ones(2)
            rec.log(step=step)
    assert list(Reader(tmp_path / "r").rank(0).step_numbers()) == [100, 200]


def test_steps_written_in_batches_across_chunks_read_back_exactly(tmp_path):
    writer = RankWriter(tmp_path / "r", source="watch", tensors=["a", "b"])
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(3 * STEP_CHUNK + 5, 2, L.ROW_WIDTH))
    step = 0
    reader = None
    for size in (1, STEP_CHUNK - 2, 1, STEP_CHUNK + 3, 2, STEP_CHUNK):  # across chunk ends
        numbers = range(step, step + size)
        writer.append_many([(10 * k, float(k), rows[k], None, None) for k in numbers])
        step += size
        reader = reader or Reader(tmp_path / "r")
        reader.refresh()
        stream = reader.rank(0)  # each batch is readable once written
        assert list(stream.step_numbers()) == [10 * k for k in range(step)]
        np.testing.assert_array_equal(stream.losses(), np.arange(step, dtype=float))
        assert np.array_equal(stream.tensor("b").grad_norm, rows[:step, 1, 0])
    writer.close()
    stream = Reader(tmp_path / "r").rank(0)
    assert stream.steps == len(rows) and stream.complete
    for t, name in enumerate(["a", "b"]):
        series = stream.tensor(name)
        assert np.array_equal(series.max_abs, rows[:, t, 1])
        assert np.array_equal(series.histogram, rows[:, t, len(L.STAT_COLUMNS) :].astype(np.int64))


def test_every_step_statistics_of_a_model_match_per_tensor_references(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    expected = []
    with gradviz.watch(net, tmp_path / "r", every=1) as rec:
        for step in range(20):  # more steps than a chunk of the stats array holds
            opt.zero_grad()
            net(torch.randn(4, 6)).pow(2).sum().backward()
            if step == 7:
                net[2].bias.grad[1] = math.nan
            grads = {n: p.grad.clone().double().numpy().ravel() for n, p in net.named_parameters()}
            expected.append(grads)
            rec.log()
            opt.step()
    stream = Reader(tmp_path / "r").rank(0)
    assert stream.steps == 20
    for name in stream.tensors:
        series = stream.tensor(name)
        for s, grads in enumerate(expected):
            g = grads[name]
            finite = g[np.isfinite(g)]
            assert series.grad_norm[s] == pytest.approx(np.linalg.norm(finite), rel=1e-5)
            assert series.max_abs[s] == np.abs(finite).max(initial=0.0)
            nan = int(np.isnan(g).sum())
            counts = [np.count_nonzero(finite), int((finite == 0).sum()), nan, 0, 0]
            assert list(series.counts[s]) == counts
    first = stream.first_nonfinite
    # The NaN was written into a gradient after the backward: the watch's module-level
    # origin, running the step again, finds it came from outside the model, and says so.
    unknown = first.pop("origin_unknown")
    assert first == {"step": 7, "tensor": "2.bias", "index": 1, "kind": "nan"}
    assert unknown.startswith("run again, the step made no NaN or Inf")


def test_thinning_keeps_the_recording_in_budget_and_keeps_the_first_nonfinite_step(tmp_path):
    w = torch.zeros(1000, requires_grad=True)
    row = L.ROW_WIDTH * 8 + 16
    with gradviz.watch({"w": w}, tmp_path / "r", every=1, budget_bytes=40 * row) as rec:
        for step in range(400):
            w.grad = torch.full((1000,), math.nan if step == 301 else 1.0)
            rec.log()
        assert rec.interval > 1  # the interval doubled as the budget filled
    stream = Reader(tmp_path / "r").rank(0)
    recorded = list(stream.step_numbers())
    assert stream.steps <= 41 and 301 in recorded and recorded[:2] == [0, 1]
    assert 302 not in recorded
    assert stream.first_nonfinite["step"] == 301


def test_health_image_of_a_large_matrix_is_downsampled_and_keeps_a_single_nan(tmp_path):
    grad = torch.ones(1100, 700)
    grad[613, 5] = math.nan
    x = torch.zeros(1100, 700, requires_grad=True)
    with gradviz.watch({}, tmp_path / "r", every=1) as rec:
        y = rec.tensor("d", x * 1.0)
        y.backward(grad)
        rec.log()
    stream = Reader(tmp_path / "r").rank(0)
    step, image = stream.image("d", 0)
    assert image.shape == (367, 350) and step == 0
    assert np.count_nonzero(image == 5) == 1 and image[613 // 3, 5 // 2] == 5  # Health.NAN


def test_a_recording_is_never_overwritten_and_a_file_is_refused(tmp_path):
    w = torch.ones(2, requires_grad=True)
    gradviz.watch({"w": w}, tmp_path / "r").close()
    with pytest.raises(GradvizError, match="already holds a recording"):
        gradviz.watch({"w": w}, tmp_path / "r")
    (tmp_path / "f").write_text("x")
    with pytest.raises(GradvizError, match="it is a file"):
        gradviz.watch({"w": w}, tmp_path / "f")
    assert is_recording(tmp_path / "r") and not is_recording(tmp_path)


def test_reader_refuses_a_directory_that_is_not_a_recording(tmp_path):
    with pytest.raises(GradvizError, match="is not a gradviz recording"):
        Reader(tmp_path)


def test_probe_batch_records_the_per_input_jacobians_of_each_recorded_step(tmp_path):
    losses = load_example("jacobian_probe").train(tmp_path / "r", steps=6, every=5)
    assert losses[-1] < losses[0]
    stream = Reader(tmp_path / "r").rank(0)
    assert list(stream.image_steps("probe_jacobians")) == [0, 5]
    step, jac = stream.image("probe_jacobians", 1)
    assert step == 5 and jac.shape == (16, 4 * 2)
    assert np.isfinite(jac).all() and np.abs(jac).max() > 0
    # Step 0 is the freshly built net: its Jacobians by direct autograd, sample by sample.
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(2, 20), nn.Tanh(), nn.Linear(20, 20), nn.Tanh(), nn.Linear(20, 4))
    probe = torch.linspace(-2, 2, 16)[:, None].repeat(1, 2)
    direct = torch.stack([torch.autograd.functional.jacobian(net, p) for p in probe])
    np.testing.assert_allclose(
        stream.image("probe_jacobians", 0)[1], direct.reshape(16, 8), rtol=1e-5, atol=1e-6
    )


def test_a_later_larger_matrix_is_downsampled_into_the_first_ones_picture(tmp_path):
    x = torch.zeros(4, 4, requires_grad=True)
    y = torch.zeros(10, 9, requires_grad=True)
    grad = torch.ones(10, 9)
    grad[9, 8] = math.inf
    with gradviz.watch({}, tmp_path / "r", every=1) as rec:
        rec.tensor("d", x * 1.0).backward(torch.ones(4, 4))
        rec.log()
        rec.tensor("d", y * 1.0).backward(grad)
        rec.log()
    stream = Reader(tmp_path / "r").rank(0)
    assert stream.image("d", 0)[1].shape == (4, 4)
    step, image = stream.image("d", 1)
    assert step == 1 and image.shape == (4, 3)
    assert image[3, 2] == 4 and np.count_nonzero(image == 4) == 1  # Health.POS_INF kept


def test_fused_statistics_equal_the_tensor_by_tensor_ones_bitwise(monkeypatch):
    from gradviz.core.record import stats

    torch.manual_seed(0)
    cpu = torch.device("cpu")
    grads = [torch.randn(s) * 10.0 ** torch.randint(-40, 30, s) for s in [(40, 30), (7,), (300,)]]
    grads[0].view(-1)[[3, 17, 18]] = torch.tensor([math.nan, math.inf, 0.0])
    grads[2][5] = -math.inf
    params = [torch.randn(g.shape) if t != 1 else None for t, g in enumerate(grads)]
    for dtype in (torch.float32, torch.float64, torch.float16):
        gs = [g.to(dtype) for g in grads]
        ps = [None if p is None else p.to(dtype) for p in params]
        finite = [bool(torch.isfinite(g.sum())) for g in gs]
        for known in (None, finite):
            fused = stats.gradient_rows(gs, ps, cpu, known, stats.Workspace())
            monkeypatch.setattr(stats, "FUSED_ENTRIES_LIMIT", 0)
            separate = stats.gradient_rows(gs, ps, cpu, known, stats.Workspace())
            monkeypatch.undo()
            assert torch.equal(fused.nan_to_num(-1.0), separate.nan_to_num(-1.0))
            clean = [g.double().nan_to_num(0.0, 0.0, 0.0) for g in gs]
            assert fused[:, 1].tolist() == [c.abs().max().item() for c in clean]
            if dtype != torch.float16:  # (where 1e30 is Inf already)
                assert fused[:, 4].tolist() == [3.0, 0.0, 5.0]  # first NaN or Inf entry


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, None])
def test_the_every_step_finiteness_test_in_one_pass_sees_any_single_bad_entry(dtype, bad):
    from gradviz.core.record import stats

    cpu, workspace = torch.device("cpu"), stats.Workspace()
    torch.manual_seed(1)
    # Large finite values: their float16 sum overflows (not known finite, never "finite"
    # for a tensor with a NaN); summed in float32 the clean case is known finite.
    grads = [torch.randn(s).mul(100).to(dtype) for s in [(40, 30), (7,), (300,), (1,)]]
    for t, g in enumerate(grads):
        for index in (0, g.numel() - 1):
            gs = [h.clone() for h in grads]
            if bad is not None:
                gs[t].view(-1)[index] = bad
            assert stats.gradients_known_finite(gs, cpu, workspace) is (bad is None)
    # A tensor without a gradient: not laid end to end, so not known (tested one by one).
    assert not stats.gradients_known_finite([grads[0], None], cpu, workspace)


def _bits(t: torch.Tensor) -> list[int]:
    return t.view({torch.float32: torch.int32, torch.float64: torch.int64}[t.dtype]).tolist()


@pytest.mark.parametrize("flush_denormal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_every_step_finiteness_test_leaves_every_gradient_bit_as_it_was(dtype, flush_denormal):
    """On the CPU the test runs in place over the gradients: it must write back exactly
    what it read (NaN payloads, signed zeros, subnormals even where the CPU flushes them)."""
    from gradviz.core.record import stats

    ints = {torch.float32: np.int32, torch.float64: np.int64}[dtype]
    odd = {  # a NaN with a payload, a signalling NaN, the smallest subnormal, -0.0
        torch.float32: [0x7FC01234, 0x7F800001, 0x00000001, -0x80000000],
        torch.float64: [0x7FF8000000001234, 0x7FF0000000000001, 1, -0x8000000000000000],
    }[dtype]
    special = torch.from_numpy(np.array(odd, dtype=ints)).view(dtype)
    torch.manual_seed(2)
    clean = [torch.randn(33, dtype=dtype), torch.randn(4, 5, dtype=dtype)]
    clean[1][0, 0] = 1e-39 if dtype == torch.float32 else 1e-310  # subnormal
    cases = [clean, [*clean, torch.cat([torch.randn(40, dtype=dtype), special])]]
    if not torch.set_flush_denormal(flush_denormal):
        pytest.skip("this CPU has no flush-to-zero mode")
    try:
        for grads in cases:
            before = [_bits(g) for g in grads]
            known = stats.gradients_known_finite(grads, torch.device("cpu"), stats.Workspace())
            assert known is (grads is cases[0])
            assert [_bits(g) for g in grads] == before
    finally:
        torch.set_flush_denormal(False)  # torch's default


def test_the_every_step_finiteness_test_is_exact_where_a_sum_would_overflow():
    from gradviz.core.record import stats

    cpu = torch.device("cpu")
    huge = [torch.full((10,), 3e38), torch.full((3,), 1e308, dtype=torch.float64)]
    for g in huge:  # finite entries whose sum is Inf: known finite all the same
        grads = [g, torch.ones(2, dtype=g.dtype)]
        assert stats.gradients_known_finite(grads, cpu, stats.Workspace())


def test_the_finiteness_test_does_not_touch_a_gradient_that_is_part_of_a_graph():
    """A gradient made with create_graph=True may be saved for a later backward (a gradient
    penalty): it is tested without writing to it, so that backward still runs."""
    from gradviz.core.record import stats

    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(x.pow(3).sum(), x, create_graph=True)
    penalty = grad.square().sum()  # saves grad for its backward
    version = grad._version
    assert stats.gradients_known_finite([grad], torch.device("cpu"), stats.Workspace())
    assert grad._version == version
    penalty.backward()
    torch.testing.assert_close(x.grad, 36 * x.detach() ** 3)  # d/dx sum((3x^2)^2)


def test_the_finiteness_test_of_a_gradient_whose_entries_share_memory():
    from gradviz.core.record import stats

    cpu = torch.device("cpu")
    shared = torch.tensor([1.0]).expand(4, 3)  # one float seen 12 times
    assert stats.gradients_known_finite([shared, torch.ones(2)], cpu, stats.Workspace())
    bad = torch.tensor([math.nan]).expand(4, 3)
    assert not stats.gradients_known_finite([bad, torch.ones(2)], cpu, stats.Workspace())


def test_a_step_written_before_the_next_one_gets_its_update_norm_from_it(tmp_path):
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    rec = gradviz.watch(model, tmp_path / "run", every=1)
    updates = []
    for step in range(2):
        opt.zero_grad()
        model(torch.ones(4, 3)).pow(2).mean().backward()
        before = [p.detach().clone() for p in model.parameters()]
        rec.log(loss=float(step))
        opt.step()
        updates.append([float((b - p.detach()).norm()) for b, p in zip(before, model.parameters())])
        if step == 0:  # no further log: the idle writer writes step 0 by itself
            reader = Reader(tmp_path / "run")
            while not reader.rank(0).steps:
                time.sleep(0.02)
                reader.refresh()
            assert math.isnan(reader.rank(0).tensor("weight").update_norm[0])
    rec.close()
    stream = Reader(tmp_path / "run").rank(0)
    for t, name in enumerate(["weight", "bias"]):
        np.testing.assert_allclose(stream.tensor(name).update_norm, [u[t] for u in updates])
    assert stream.meta["ended"] == "close"


def test_a_loss_logged_after_the_step_was_written_by_itself_is_still_recorded(tmp_path):
    w = torch.zeros(3, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    rec = gradviz.watch({"w": w}, tmp_path / "run", every=1, optimizer=opt)
    w.grad = torch.ones(3)
    opt.step()  # recorded here, from the optimizer's step
    reader = Reader(tmp_path / "run")
    while not reader.rank(0).steps:  # written by itself: no further step came
        time.sleep(0.02)
        reader.refresh()
    rec.log(loss=2.5)  # a loss given late
    rec.close()
    assert list(Reader(tmp_path / "run").rank(0).losses()) == [2.5]


def test_a_sparse_embeddings_gradient_is_recorded_as_the_dense_one_it_stands_for(tmp_path):
    # nn.Embedding(sparse=True) gives a sparse COO gradient; rec.log failed on it
    # ("reshape is not implemented for sparse tensors").
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 4, sparse=True), nn.Linear(4, 1))
    expected = []
    with gradviz.watch(model, tmp_path / "r", every=1) as rec:
        for _ in range(3):
            model.zero_grad()
            model(torch.randint(0, 10, (8,))).sum().backward()
            dense = model[0].weight.grad.to_dense().double()
            expected.append((float(dense.norm()), int((dense == 0).sum())))
            rec.log()
    series = Reader(tmp_path / "r").rank(0).tensor("0.weight")
    for s, (norm, zeros) in enumerate(expected):
        assert series.grad_norm[s] == pytest.approx(norm, rel=1e-6)
        assert series.counts[s][1] == zeros  # the rows no index touched count as zeros
