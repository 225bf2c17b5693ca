"""A Snapshot keeps each network parameter and its gradient from the forward/backward it
shows: the values the gradients were computed at (before that step's update), bounded to a
leading block of PARAM_SIDE rows and columns, and paired with the spec's Linear layers."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch.nn.functional as F

from gradviz.core.lab.distances import pairwise_distances
from gradviz.core.lab.fit import DistanceFitRun
from gradviz.core.lab.snapshot import PARAM_SIDE
from gradviz.core.nets.layer_matrix import layer_matrix
from gradviz.core.nets.networks import NetworkSpec
from gradviz.core.settings.config import FitConfig


def config(**changes) -> FitConfig:
    base = dict(target="helix", n=16, dim=3, method="masked", net="3-6:tanh-3", seed=2, lr=0.05)
    return FitConfig(**(base | changes))


def test_a_captured_step_keeps_the_weights_its_gradients_were_computed_at():
    run = DistanceFitRun(config())
    before = [p.detach().clone() for p in run.model.parameters()]
    # The gradients of step 0, by a float64 forward/backward of the test's own.
    model = DistanceFitRun(config()).model.double()
    coords = model(run.features.double())
    loss = F.mse_loss(pairwise_distances(coords, "masked").distances, run.target_distances.double())
    loss.backward()
    run.step(capture=True)
    snapshot = run.snapshot()
    assert [p.name for p in snapshot.param_values] == [n for n, _ in snapshot.param_health]
    for kept, start, now, reference in zip(
        snapshot.param_values, before, run.model.parameters(), model.parameters(), strict=True
    ):
        assert np.array_equal(kept.values, start.numpy())  # before the update, exactly
        assert not np.array_equal(kept.values, now.detach().numpy())  # the optimizer moved it
        # atol: the last bias's gradient is 0 in exact arithmetic (a shift moves no distance)
        assert np.allclose(kept.grads, reference.grad.numpy(), rtol=1e-4, atol=1e-6)
        assert not kept.values.flags.writeable and not kept.elided


def test_a_wide_layer_is_kept_in_part_and_says_so():
    run = DistanceFitRun(config(net=f"3-{PARAM_SIDE + 16}:tanh-3"))
    snapshot = run.snapshot()
    kept = {p.name: p for p in snapshot.param_values}
    assert kept["0.weight"].shape == (PARAM_SIDE + 16, 3)
    assert kept["0.weight"].values.shape == (PARAM_SIDE, 3) and kept["0.weight"].elided
    assert kept["2.weight"].values.shape == (3, PARAM_SIDE) and kept["0.bias"].elided
    weight = run.model[0].weight.detach().numpy()
    assert np.array_equal(kept["0.weight"].values, weight[:PARAM_SIDE])
    matrix = layer_matrix(NetworkSpec.parse(run.config.net), snapshot.param_values, 1)
    assert matrix.weights.shape == (3, PARAM_SIDE + 1)  # 64 of 80 inputs, then the bias
    assert matrix.elided and "first 64 of 80 inputs" in matrix.elision_words()


def test_free_coordinates_and_another_network_have_no_layer_matrix():
    free = DistanceFitRun(config(net=None)).snapshot()
    assert free.param_values == ()
    snapshot = DistanceFitRun(config()).snapshot()
    other = NetworkSpec.parse("3-7:tanh-3")
    assert layer_matrix(other, snapshot.param_values, 0) is None
    assert layer_matrix(NetworkSpec.parse("3-6:tanh-3"), snapshot.param_values, 2) is None


def test_a_subnormal_gradient_is_named_so_in_the_readout():
    snapshot = DistanceFitRun(config()).snapshot()
    matrix = layer_matrix(NetworkSpec.parse("3-6:tanh-3"), snapshot.param_values, 0)
    grads = matrix.grads.copy()
    grads[1, 2] = float(np.finfo(np.float32).smallest_subnormal) * 8
    odd = dataclasses.replace(matrix, grads=grads)
    assert odd.entry_words(1, 2).endswith("(finite, subnormal)")
    assert matrix.entry_words(1, 1).endswith("(finite)")
