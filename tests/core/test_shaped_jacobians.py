"""gradviz.per_input_jacobians on inputs of any shape (B, *in_shape): images, sequences,
token embeddings, against a loop of torch.autograd.grad in float64."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradviz
from gradviz.core.common.errors import GradvizError


class LastStepLSTM(nn.Module):
    """(B, T, F) -> (B, 3): an LSTM read at its last time step."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(4, 5, batch_first=True)
        self.out = nn.Linear(5, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.out(y[:, -1])


def _cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, stride=4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 10)
    ).double()


def _lstm() -> nn.Module:
    torch.manual_seed(1)
    return LastStepLSTM().double()


def _transformer_layer() -> nn.Module:
    torch.manual_seed(2)
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    return layer.double().eval()


def reference(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """(B, m, *in_shape) by hand: one forward per sample, one autograd.grad per output entry."""
    rows = []
    for b in range(len(x)):
        xb = x[b : b + 1].detach().clone().requires_grad_(True)
        y = model(xb).reshape(-1)
        rows.append(torch.stack([torch.autograd.grad(yi, xb, retain_graph=True)[0][0] for yi in y]))
    return torch.stack(rows)


CASES = {
    "cnn (B, 3, 32, 32)": (_cnn, (3, 3, 32, 32), 10),
    "lstm (B, T, F)": (_lstm, (3, 6, 4), 3),
    "transformer layer (B, T, d)": (_transformer_layer, (3, 3, 4), 3 * 4),
}


@pytest.mark.parametrize("case", list(CASES))
def test_per_input_jacobians_of_shaped_inputs_match_a_float64_autograd_loop(case):
    build, shape, m = CASES[case]
    model = build()
    x = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    jac = gradviz.per_input_jacobians(model, x)
    assert jac.shape == (shape[0], m, *shape[1:])
    torch.testing.assert_close(jac, reference(model, x), rtol=1e-10, atol=1e-12)


def test_torch_func_methods_run_a_cnn_on_images():
    model = _cnn()
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    expected = reference(model, x)
    for method in ("jacrev", "jacfwd"):
        torch.testing.assert_close(gradviz.per_input_jacobians(model, x, method), expected)


def test_a_model_that_mixes_samples_gets_exact_blocks_for_shaped_inputs():
    """The probe sees the mixing (a batch mean over images) and auto takes the exact blocks."""

    class SubtractBatchMean(nn.Module):
        def forward(self, x):
            return (x - x.mean(dim=0, keepdim=True)).flatten(1)[:, :5] ** 2

    model = SubtractBatchMean()
    x = torch.randn(4, 2, 3, 3, dtype=torch.float64)
    batched = gradviz.per_input_jacobians(model, x)
    # The reference of a mixing model needs the whole batch: J[b] = d f(X)[b] / d X[b].
    xr = x.clone().requires_grad_(True)
    y = model(xr)
    expected = torch.stack(
        [
            torch.stack(
                [torch.autograd.grad(y[b, i], xr, retain_graph=True)[0][b] for i in range(5)]
            )
            for b in range(4)
        ]
    )
    torch.testing.assert_close(batched, expected)


def test_inputs_without_a_batch_dimension_are_refused_in_one_sentence():
    with pytest.raises(GradvizError, match=r"shape \(B, \*in_shape\).*not \(5,\)"):
        gradviz.per_input_jacobians(_cnn(), torch.randn(5, dtype=torch.float64))
