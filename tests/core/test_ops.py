"""The library's operations: batched exact distances, per-element stop-gradient, Jacobians."""

import pytest
import torch
from torch import nn

import gradviz
from gradviz.core.common.errors import GradvizError


def seeded(*shape: int, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def reference(x: torch.Tensor) -> torch.Tensor:
    """Float64 distances from pairwise differences, any batch shape."""
    x64 = x.detach().to(torch.float64)
    diff = x64[..., :, None, :] - x64[..., None, :, :]
    return (diff * diff).sum(-1).sqrt()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(7, 3), (4, 7, 3), (2, 3, 6, 2)])
def test_pairwise_distances_match_float64_reference_for_single_and_batched_sets(shape, dtype):
    x = seeded(*shape, dtype=dtype)
    d = gradviz.pairwise_distances(x)
    assert d.shape == (*shape[:-1], shape[-2]) and d.dtype == dtype
    tolerance = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(d.to(torch.float64), reference(x), rtol=tolerance, atol=tolerance)


def test_batched_distances_pass_gradcheck_and_gradgradcheck():
    x = seeded(3, 5, 2, seed=1).requires_grad_(True)
    assert torch.autograd.gradcheck(gradviz.pairwise_distances, (x,))
    assert torch.autograd.gradgradcheck(gradviz.pairwise_distances, (x,))


def test_batched_gradient_equals_the_gradient_of_each_set_alone():
    x = seeded(4, 6, 3, seed=2).requires_grad_(True)
    weights = seeded(4, 6, 6, seed=3)
    (gradviz.pairwise_distances(x) * weights).sum().backward()
    for b in range(4):
        xb = x[b].detach().clone().requires_grad_(True)
        (gradviz.pairwise_distances(xb) * weights[b]).sum().backward()
        torch.testing.assert_close(x.grad[b], xb.grad)


def test_batched_gradient_is_finite_with_coincident_points():
    x = seeded(2, 5, 3, seed=4, dtype=torch.float32)
    x[1, 3] = x[1, 0]
    x.requires_grad_(True)
    gradviz.pairwise_distances(x).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_named_lab_methods_run_on_batches_and_reproduce_their_nan():
    x = seeded(2, 5, 3, dtype=torch.float32).requires_grad_(True)
    gradviz.pairwise_distances(x, "naive").sum().backward()
    assert torch.isnan(x.grad).all()


def test_pairwise_distances_refuses_a_vector_in_one_sentence():
    with pytest.raises(GradvizError, match=r"shape \(\.\.\., N, D\)"):
        gradviz.pairwise_distances(torch.zeros(5))


def test_stop_gradient_keeps_values_and_zeroes_gradient_only_under_the_mask():
    x = seeded(4, 5).requires_grad_(True)
    mask = seeded(4, 5, seed=9) > 0
    weights = seeded(4, 5, seed=10)
    y = gradviz.stop_gradient(x, mask)
    assert torch.equal(y, x)
    (y * weights).sum().backward()
    assert torch.equal(x.grad[mask], torch.zeros(int(mask.sum()), dtype=x.dtype))
    assert torch.equal(x.grad[~mask], weights[~mask])


def test_stop_gradient_on_squared_distances_before_sqrt_gives_finite_gradients():
    x = seeded(6, 3).requires_grad_(True)
    sq = (x[:, None] - x[None]).pow(2).sum(-1)
    sq = gradviz.stop_gradient(sq, torch.eye(6, dtype=torch.bool))
    torch.sqrt(sq).sum().backward()
    assert torch.isfinite(x.grad).all()
    # The same result as the exact method (whose coincident gradient is also 0).
    x2 = x.detach().clone().requires_grad_(True)
    gradviz.pairwise_distances(x2).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


def test_detaching_the_diagonal_after_sqrt_still_gives_nan():
    x = seeded(6, 3).requires_grad_(True)
    gradviz.pairwise_distances(x, "detach").sum().backward()
    assert torch.isnan(x.grad).all()


def test_stop_gradient_refuses_a_float_mask():
    with pytest.raises(GradvizError, match="bool mask"):
        gradviz.stop_gradient(torch.zeros(3), torch.zeros(3))


def test_per_input_jacobians_of_a_linear_net_equal_its_weight_product():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 5), nn.Linear(5, 2)).double()
    J = gradviz.per_input_jacobians(net, seeded(8, 3))
    expected = net[1].weight @ net[0].weight
    assert J.shape == (8, 2, 3)
    torch.testing.assert_close(J, expected.expand(8, 2, 3))


def test_import_gradviz_loads_neither_torch_nor_qt_until_an_operation_is_used():
    import subprocess
    import sys

    script = (
        "import sys, gradviz\n"
        "assert 'torch' not in sys.modules, 'torch imported by import gradviz'\n"
        "gradviz.pairwise_distances, gradviz.watch, gradviz.Reader\n"
        "import gradviz.core.record.fit_recording\n"
        "assert 'torch' in sys.modules\n"
        "bad = [m for m in ('PySide6', 'pyqtgraph', 'superqt') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
