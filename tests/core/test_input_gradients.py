"""Gradients for inputs of any shape: per-sample Jacobians (B, m, *in_shape) when small,
saliency (B, *in_shape) otherwise; both are the diagonal blocks of the batch's derivative,
checked against autograd of the whole batch in float64."""

import pytest
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.input_gradients import input_gradients


class Net(torch.nn.Module):
    """(B, 2, 3) -> (B, 4); with ``mix`` each sample also sees the batch mean."""

    def __init__(self, mix=False):
        super().__init__()
        torch.manual_seed(0)
        self.mix = mix
        self.conv = torch.nn.Conv1d(2, 3, 2)
        self.head = torch.nn.Linear(6, 4)

    def forward(self, x):
        if self.mix:
            x = x - x.mean(dim=0, keepdim=True)
        return self.head(torch.tanh(self.conv(x)).flatten(1))


def batch_blocks(net, x):
    """d f(X)[b] / d X[b] from the full Jacobian of the batched function: (B, m, 2, 3)."""
    full = torch.autograd.functional.jacobian(net, x)  # (B, m, B, 2, 3)
    return torch.stack([full[b, :, b] for b in range(len(x))])


def sample_inputs():
    return torch.randn(5, 2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))


@pytest.mark.parametrize("mix", [False, True])
def test_small_jacobian_has_the_input_shape_and_matches_the_batch_derivative(mix):
    net, x = Net(mix).double().eval(), sample_inputs()
    result = input_gradients(net, x)
    assert result.kind == "jacobian" and result.values.shape == (5, 4, 2, 3)
    torch.testing.assert_close(result.values, batch_blocks(net, x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mix", [False, True])
def test_saliency_is_the_explained_outputs_row_of_the_batch_derivative(mix):
    net, x = Net(mix).double().eval(), sample_inputs()
    result = input_gradients(net, x, max_entries=10)  # 4 x 6 entries: over the limit
    assert result.kind == "saliency" and result.values.shape == (5, 2, 3)
    blocks = batch_blocks(net, x)
    explained = net(x).argmax(dim=1)
    assert torch.equal(result.explained, explained)
    expected = blocks[torch.arange(5), explained]
    torch.testing.assert_close(result.values, expected, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(result.grad_x_input, expected * x)
    torch.testing.assert_close(result.norms, expected.flatten(1).norm(dim=1))
    assert ("mixes samples" in result.reason) == mix


def test_asking_for_an_output_gives_its_saliency_and_a_missing_one_is_refused():
    net, x = Net().double().eval(), sample_inputs()
    result = input_gradients(net, x, output=2)
    assert result.kind == "saliency" and result.explained.tolist() == [2] * 5
    torch.testing.assert_close(result.values, batch_blocks(net, x)[:, 2])
    with pytest.raises(GradvizError, match="--output 4 does not exist"):
        input_gradients(net, x, output=4)
