"""Parameter-gradient histograms: gradients against numpy float64 references, binning against
numpy.histogram, and NaN / +Inf / -Inf / zero counted in bins of their own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.histograms import (
    gradient_histogram,
    parameter_gradient_histograms,
    parameter_gradients,
)
from gradviz.core.nets.networks import NetworkSpec


def linear_model(weight: np.ndarray, bias: np.ndarray) -> torch.nn.Sequential:
    """A one-layer float64 network with the given (m, n) weight and (m,) bias."""
    model = torch.nn.Sequential(torch.nn.Linear(weight.shape[1], weight.shape[0]))
    model = model.to(torch.float64)
    with torch.no_grad():
        model[0].weight.copy_(torch.from_numpy(weight))
        model[0].bias.copy_(torch.from_numpy(bias))
    return model


@pytest.fixture
def problem():
    rng = np.random.default_rng(3)
    weight, bias = rng.standard_normal((4, 5)), rng.standard_normal(4)
    x = rng.standard_normal((7, 5))
    return linear_model(weight, bias), weight, bias, x


def test_sum_loss_gradients_match_numpy(problem):
    model, weight, bias, x = problem
    grads = parameter_gradients(model, x, "sum")
    # d sum(x W^T + b) / dW = ones(m, B) @ x; / db = B
    np.testing.assert_allclose(grads["0.weight"].numpy(), np.ones((4, 7)) @ x, rtol=1e-12)
    np.testing.assert_allclose(grads["0.bias"].numpy(), np.full(4, 7.0), rtol=1e-12)


def test_sum_of_squares_loss_gradients_match_numpy(problem):
    model, weight, bias, x = problem
    y = x @ weight.T + bias
    grads = parameter_gradients(model, x, "sumsq")
    np.testing.assert_allclose(grads["0.weight"].numpy(), 2 * y.T @ x, rtol=1e-12)
    np.testing.assert_allclose(grads["0.bias"].numpy(), 2 * y.sum(axis=0), rtol=1e-12)


def test_mse_to_a_target_gradients_match_numpy(problem):
    model, weight, bias, x = problem
    target = np.random.default_rng(4).standard_normal((7, 4))
    residual = x @ weight.T + bias - target
    grads = parameter_gradients(model, x, "mse", target=target)
    scale = 2 / residual.size  # mean over every output entry, as torch.nn.MSELoss does
    np.testing.assert_allclose(grads["0.weight"].numpy(), scale * residual.T @ x, rtol=1e-12)
    np.testing.assert_allclose(grads["0.bias"].numpy(), scale * residual.sum(0), rtol=1e-12)


def test_histograms_bin_finite_values_like_numpy(problem):
    model, _, _, x = problem
    grads = parameter_gradients(model, x, "sumsq")
    hists = parameter_gradient_histograms(model, x, "sumsq", bins=6)
    assert [h.name for h in hists] == ["0.weight", "0.bias"]
    for h in hists:
        counts, edges = np.histogram(grads[h.name].numpy(), bins=6)
        np.testing.assert_array_equal(h.counts, counts)
        np.testing.assert_array_equal(h.edges, edges)
        assert h.layer == "0" and h.shape == tuple(grads[h.name].shape)
        assert (h.nan, h.pos_inf, h.neg_inf, h.zero) == (0, 0, 0, 0)


def test_nan_inf_and_zero_gradients_are_counted_in_their_own_bins():
    # With the sum loss, column k of dL/dW is the sum of input column k over the batch:
    # inject a NaN, a +Inf, a -Inf and an all-zero column into the inputs.
    x = np.random.default_rng(5).standard_normal((6, 5))
    x[2, 1] = np.nan
    x[0, 2] = np.inf
    x[4, 3] = -np.inf
    x[:, 4] = 0.0
    model = linear_model(np.ones((3, 5)), np.zeros(3))
    weight, bias = parameter_gradient_histograms(model, x, "sum", bins=4)
    assert (weight.nan, weight.pos_inf, weight.neg_inf, weight.zero) == (3, 3, 3, 3)
    expected_counts, expected_edges = np.histogram(np.repeat(x[:, 0].sum(), 3), bins=4)
    np.testing.assert_array_equal(weight.counts, expected_counts)
    np.testing.assert_array_equal(weight.edges, expected_edges)
    assert weight.counts.sum() + weight.zero + weight.nonfinite == weight.size == 15
    assert (bias.nonfinite, bias.zero, int(bias.counts.sum())) == (0, 0, 3)


def test_nan_weights_give_nan_gradients_in_the_nan_bin_of_later_layers_only():
    model = NetworkSpec.parse("2-3-1:tanh").build(seed=0, dtype=torch.float64)
    with torch.no_grad():
        model[0].weight[0, 0] = float("nan")
    hists = {h.name: h for h in parameter_gradient_histograms(model, np.ones((4, 2)), "sum")}
    assert hists["2.weight"].nan == 1  # the hidden unit fed by the NaN weight
    assert hists["2.bias"].nan == 0  # d sum / d bias = B, whatever the weights
    assert hists["0.weight"].nan >= 2


def test_gradient_histogram_of_a_tensor_matches_numpy_and_counts_everything():
    values = np.array([[0.5, -1.0, np.nan], [np.inf, 0.0, -np.inf], [2.0, 0.0, 3.5]])
    h = gradient_histogram("layer.weight", torch.from_numpy(values), bins=3)
    counts, edges = np.histogram([0.5, -1.0, 2.0, 3.5], bins=3)
    np.testing.assert_array_equal(h.counts, counts)
    np.testing.assert_array_equal(h.edges, edges)
    assert (h.nan, h.pos_inf, h.neg_inf, h.zero, h.size) == (1, 1, 1, 2, 9)
    assert h.layer == "layer" and h.shape == (3, 3)


def test_parameter_without_gradient_is_reported_as_such():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))

    class FirstOnly(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = model

        def forward(self, x):
            return self.net[0](x)

    hists = parameter_gradient_histograms(FirstOnly(), np.ones((3, 2)), "sum")
    unused = [h for h in hists if h.name.startswith("net.1.")]
    assert [h.has_gradient for h in unused] == [False, False]
    assert unused[0].shape == (2, 2) and unused[0].counts.sum() == 0


def test_parameters_grad_attributes_are_left_untouched(problem):
    model, _, _, x = problem
    parameter_gradient_histograms(model, x, "sum")
    assert all(p.grad is None for p in model.parameters())


def test_mse_target_of_the_wrong_shape_is_a_clear_error(problem):
    model, _, _, x = problem
    with pytest.raises(GradvizError, match=r"target has shape \(7, 3\).*outputs have shape"):
        parameter_gradient_histograms(model, x, "mse", target=np.zeros((7, 3)))


def test_mse_without_a_target_and_a_target_with_another_loss_are_errors(problem):
    model, _, _, x = problem
    with pytest.raises(GradvizError, match="needs a target"):
        parameter_gradient_histograms(model, x, "mse")
    with pytest.raises(GradvizError, match="only to the loss 'mse'"):
        parameter_gradient_histograms(model, x, "sum", target=np.zeros((7, 4)))


def test_bad_loss_name_bins_and_inputs_are_clear_errors(problem):
    model, _, _, x = problem
    with pytest.raises(GradvizError, match="Unknown loss 'l1'"):
        parameter_gradient_histograms(model, x, "l1")
    with pytest.raises(GradvizError, match="bins"):
        parameter_gradient_histograms(model, x, bins=0)
    with pytest.raises(GradvizError, match="cannot take inputs of shape"):
        parameter_gradient_histograms(model, np.ones((7, 3)))
    with pytest.raises(GradvizError, match="table"):
        parameter_gradient_histograms(model, np.ones(5))
