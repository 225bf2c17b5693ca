"""Distance-matrix methods: values against float64 references, gradients, the NaN cases."""

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab.distances import METHODS, gram_squared, pairwise_distances
from gradviz.core.settings.config import DISTANCE_METHODS


def exact_reference(x: torch.Tensor) -> torch.Tensor:
    """Distances (N, N) float64 from pairwise differences of the same coordinates."""
    x64 = x.detach().to(torch.float64)
    diff = x64[:, None, :] - x64[None, :, :]
    return (diff * diff).sum(-1).sqrt()


def reference_safe_float64(x: torch.Tensor) -> torch.Tensor:
    """An independent exact, zero-subgradient construction (double where over differences)."""
    diff = x[:, None, :] - x[None, :, :]
    sq = (diff * diff).sum(-1)
    coincident = sq == 0
    return torch.where(coincident, 0.0, torch.sqrt(torch.where(coincident, 1.0, sq)))


def relative_error(d: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    off = ref > 0
    return ((d.to(torch.float64) - ref).abs()[off] / ref[off]).max()


def seeded(*shape: int, seed: int = 0, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def close_pairs(scale: float, gap: float, pairs: int = 32, seed: int = 0) -> torch.Tensor:
    """(2 * pairs, 3) float32: points at coordinate scale ``scale``, each with a partner
    about ``gap`` away."""
    base = scale * seeded(pairs, 3, seed=seed, dtype=torch.float64)
    offset = gap * seeded(pairs, 3, seed=seed + 1, dtype=torch.float64) / np.sqrt(3)
    return torch.cat([base, base + offset]).to(torch.float32)


def test_torch_method_registry_offers_exactly_the_configured_method_names():
    assert list(METHODS) == list(DISTANCE_METHODS)


def test_unknown_method_is_a_gradviz_error_naming_the_choices():
    with pytest.raises(
        GradvizError, match="choose one of: naive, masked, clamp, safe, cdist, detach"
    ):
        pairwise_distances(torch.zeros(3, 2), "magic")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_matches_float64_reference_for_separated_points(method, dtype):
    x = seeded(20, 3, dtype=dtype)
    ref = exact_reference(x)
    result = pairwise_distances(x, method)
    assert result.distances.dtype == dtype
    assert result.distances.shape == (20, 20)
    # The Gram formula loses ~eps * |x|^2 absolutely; safe must be exact to 1e-5 relative.
    tolerance = 1e-5 if method == "safe" else 1e-4
    assert relative_error(result.distances, ref) <= tolerance
    assert torch.all(torch.diagonal(result.distances) == 0)
    if result.squared is not None:
        torch.testing.assert_close(
            result.squared.to(torch.float64), ref**2, rtol=1e-4, atol=1e-4 * ref.max() ** 2
        )


def test_blocked_masks_say_where_each_method_stops_the_gradient():
    x = seeded(6, 2)
    x[4] = x[1]  # one coincident pair off the diagonal
    eye = torch.eye(6, dtype=torch.bool)
    coincident = eye.clone()
    coincident[1, 4] = coincident[4, 1] = True
    assert pairwise_distances(x, "naive").blocked is None
    assert pairwise_distances(x, "cdist").blocked is None
    assert torch.equal(pairwise_distances(x, "masked").blocked, eye)
    clamp = pairwise_distances(x, "clamp")
    assert torch.equal(clamp.blocked, clamp.squared < 1e-8)
    assert clamp.blocked[eye].all()
    safe = pairwise_distances(x, "safe")
    assert safe.squared is None
    assert torch.equal(safe.blocked, coincident)


def test_naive_method_gives_nan_coordinate_gradients_that_come_from_the_diagonal():
    x = seeded(10, 3).requires_grad_()
    target = exact_reference(seeded(10, 3, seed=1)).to(torch.float32)
    result = pairwise_distances(x, "naive")
    result.squared.retain_grad()
    torch.nn.MSELoss()(result.distances, target).backward()
    sq_grad = result.squared.grad
    eye = torch.eye(10, dtype=torch.bool)
    # d sqrt / d sq is infinite at the zero diagonal: 0 * inf = NaN there, and only there...
    assert torch.isnan(sq_grad[eye]).all()
    assert torch.isfinite(sq_grad[~eye]).all()
    # ... and every point's Gram diagonal entry carries it into every coordinate.
    assert torch.isnan(x.grad).all()


def test_gram_formula_is_off_by_hundreds_of_percent_for_pairs_1e4_apart_where_safe_is_exact():
    x = close_pairs(scale=1.0, gap=1e-4)
    ref = exact_reference(x)
    partner = torch.arange(64).roll(32)
    pair_ref = ref[torch.arange(64), partner]
    gram = gram_squared(x).clamp_min(0).sqrt()[torch.arange(64), partner]
    assert ((gram.double() - pair_ref).abs() / pair_ref).max() > 3.0
    assert relative_error(pairwise_distances(x, "safe").distances, ref) <= 1e-5


def test_cdist_method_inherits_gram_error_for_close_pairs_when_n_is_large():
    x = close_pairs(scale=1.0, gap=1e-4)  # N = 64: torch.cdist takes its Gram-formula path
    ref = exact_reference(x)
    assert relative_error(pairwise_distances(x, "cdist").distances, ref) > 0.1


def test_masked_gives_nan_in_forward_for_near_coincident_points_at_scale_100_but_safe_is_exact():
    x = close_pairs(scale=100.0, gap=1e-4)
    sq = gram_squared(x)
    off = ~torch.eye(64, dtype=torch.bool)
    # The premise: float32 rounding drives some off-diagonal squared distances below zero.
    assert (sq[off] < 0).any()
    assert torch.isnan(pairwise_distances(x, "masked").distances).any()
    safe = pairwise_distances(x, "safe").distances
    assert torch.isfinite(safe).all()
    assert relative_error(safe, exact_reference(x)) <= 1e-5


def test_safe_gradient_of_near_coincident_points_at_scale_100_matches_float64_reference():
    x = close_pairs(scale=100.0, gap=1e-4)
    weights = seeded(64, 64, seed=2, dtype=torch.float64)
    x32 = x.clone().requires_grad_()
    (pairwise_distances(x32, "safe").distances * weights.float()).sum().backward()
    x64 = x.to(torch.float64).requires_grad_()
    (reference_safe_float64(x64) * weights).sum().backward()
    error = (x32.grad.double() - x64.grad).norm(dim=1) / x64.grad.norm(dim=1)
    assert error.max() <= 1e-4


def test_safe_float32_gradient_of_a_fit_matches_float64_reference():
    x = seeded(50, 3)
    target = exact_reference(seeded(50, 3, seed=1))
    x32 = x.clone().requires_grad_()
    torch.nn.MSELoss()(pairwise_distances(x32, "safe").distances, target.float()).backward()
    x64 = x.to(torch.float64).requires_grad_()
    torch.nn.MSELoss()(reference_safe_float64(x64), target).backward()
    torch.testing.assert_close(
        x32.grad.double(), x64.grad, rtol=1e-4, atol=1e-4 * x64.grad.abs().max()
    )


def exact_pair_gradient(x: torch.Tensor, upstream: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """(N, D) float64: sum_j (W_ij + W_ji) (x_i - x_j), W = upstream / d (0 on the diagonal),
    summed in exact rational arithmetic from the float64 inputs, rounded once at the end;
    and (N, D) the same sums of absolute terms (the scale an ulp is measured against)."""
    w = upstream / d
    w.fill_diagonal_(0)
    xs = [[Fraction(v) for v in row] for row in x.tolist()]
    ws = [[Fraction(v) for v in row] for row in w.tolist()]
    n, dim = x.shape
    terms = [
        [[(ws[i][j] + ws[j][i]) * (xs[i][k] - xs[j][k]) for j in range(n)] for k in range(dim)]
        for i in range(n)
    ]
    exact = [[float(sum(t)) for t in row] for row in terms]
    scale = [[float(sum(abs(v) for v in t)) for t in row] for row in terms]
    return torch.tensor(exact, dtype=torch.float64), torch.tensor(scale, dtype=torch.float64)


@pytest.mark.parametrize("gap", [1e-8, 1e-6])
def test_safe_float64_gradient_of_pairs_far_closer_than_their_scale_is_exact_to_a_few_ulps(gap):
    # At scale 1000, the products x * rowsum(S) - S @ x cancel 1e11 and more for a pair 1e-8
    # apart: 1.2e-5 relative error before (1.6e-7 at 1e-6).
    x = 1000.0 * seeded(16, 3, seed=4, dtype=torch.float64)
    x[1] = x[0] + gap * torch.tensor([0.6, 0.8, 0.0], dtype=torch.float64)
    x[9] = x[5] - gap * torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    upstream = seeded(16, 16, seed=5, dtype=torch.float64)
    xr = x.clone().requires_grad_()
    d = pairwise_distances(xr, "safe").distances
    (grad,) = torch.autograd.grad(d, xr, upstream)
    exact, scale = exact_pair_gradient(x, upstream, d.detach())
    ulps = (grad - exact).abs() / (scale * torch.finfo(torch.float64).eps)
    assert ulps.max() <= 4
    close_rows = exact[[0, 1, 5, 9]]  # dominated by the close pair's own term
    relative = (grad[[0, 1, 5, 9]] - close_rows).norm(dim=1) / close_rows.norm(dim=1)
    assert relative.max() <= 1e-14


def test_safe_float64_gradient_is_the_same_when_its_pairs_are_split_in_row_blocks(monkeypatch):
    import gradviz.core.lab.distances as distances

    x = 1000.0 * seeded(40, 3, seed=6, dtype=torch.float64)
    x[20:] = x[:20] + 1e-7 * seeded(20, 3, seed=7, dtype=torch.float64)
    upstream = seeded(40, 40, seed=8, dtype=torch.float64)

    def gradient():
        xr = x.clone().requires_grad_()
        return torch.autograd.grad(pairwise_distances(xr, "safe").distances, xr, upstream)[0]

    whole = gradient()
    monkeypatch.setattr(distances, "_FLOAT64_BLOCK_ENTRIES", 3 * 40)  # blocks of 3 rows
    blocked = gradient()
    exact, scale = exact_pair_gradient(x, upstream, pairwise_distances(x).distances)
    for grad in (whole, blocked):
        assert ((grad - exact).abs() / (scale * torch.finfo(torch.float64).eps)).max() <= 4


def test_safe_passes_gradcheck_in_float64_with_a_coincident_pair():
    x = seeded(7, 3, dtype=torch.float64)
    x[5] = x[2]
    x.requires_grad_()
    assert torch.autograd.gradcheck(lambda p: pairwise_distances(p, "safe").distances, (x,))


def test_safe_gives_zero_distance_and_zero_gradient_where_points_coincide():
    x = seeded(5, 3, dtype=torch.float64)
    x[3] = x[0]
    x.requires_grad_()
    d = pairwise_distances(x, "safe").distances
    assert d[0, 3] == 0 and d[3, 0] == 0
    (d[0, 3] + d[3, 0] + torch.diagonal(d).sum()).backward()
    assert torch.equal(x.grad, torch.zeros_like(x))


def test_safe_gradient_with_coincident_points_equals_independent_construction():
    x = seeded(8, 2, dtype=torch.float64)
    x[6] = x[1]
    x[7] = x[1]
    weights = seeded(8, 8, seed=3, dtype=torch.float64)
    ours = x.clone().requires_grad_()
    (pairwise_distances(ours, "safe").distances * weights).sum().backward()
    ref = x.clone().requires_grad_()
    (reference_safe_float64(ref) * weights).sum().backward()
    torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_safe_passes_a_non_finite_upstream_gradient_on_to_its_pair_beside_a_coincident_pair(bad):
    # The coincident pair's gradient is 0 (a subgradient); the upstream Inf or NaN of a
    # separated pair is a result the user must see on exactly those two points.
    x = seeded(6, 3, dtype=torch.float64)
    x[5] = x[0]
    weights = seeded(6, 6, seed=4, dtype=torch.float64)
    weights[2, 3] = bad
    ours = x.clone().requires_grad_()
    (pairwise_distances(ours, "safe").distances * weights).sum().backward()
    ref = x.clone().requires_grad_()
    (reference_safe_float64(ref) * weights).sum().backward()
    finite = torch.ones(6, dtype=torch.bool)
    finite[[2, 3]] = False
    assert not torch.isfinite(ours.grad[~finite]).any()
    torch.testing.assert_close(ours.grad[finite], ref.grad[finite], rtol=1e-12, atol=1e-12)


def test_safe_passes_gradgradcheck_in_float64():
    x = seeded(6, 3, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradgradcheck(lambda p: pairwise_distances(p, "safe").distances, (x,))


def test_safe_second_derivative_is_finite_with_a_coincident_pair():
    x = seeded(5, 2, dtype=torch.float64)
    x[4] = x[1]
    x.requires_grad_()
    d = pairwise_distances(x, "safe").distances
    (grad,) = torch.autograd.grad(d.square().sum() + d.sum(), x, create_graph=True)
    (hessian_row,) = torch.autograd.grad(grad[0, 0], x)
    assert torch.isfinite(hessian_row).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.gpu
@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_gives_the_same_result_on_cuda_as_on_cpu(method):
    x = seeded(40, 3)
    cpu = x.clone().requires_grad_()
    gpu = x.cuda().requires_grad_()
    d_cpu = pairwise_distances(cpu, method).distances
    d_gpu = pairwise_distances(gpu, method).distances
    torch.testing.assert_close(d_gpu.cpu(), d_cpu, rtol=1e-4, atol=1e-4)
    d_cpu.square().sum().backward()
    d_gpu.square().sum().backward()
    torch.testing.assert_close(gpu.grad.cpu(), cpu.grad, rtol=1e-3, atol=1e-3, equal_nan=True)


# Coordinates 0 or of magnitude 2^-10..1e4, so that squared differences neither underflow nor
# overflow in float32; some points are copies of others (coincident pairs).
coordinate = st.one_of(
    st.just(0.0),
    st.floats(2.0**-10, 1e4, width=32),
    st.floats(-1e4, -(2.0**-10), width=32),
)


@st.composite
def point_sets(draw) -> np.ndarray:
    n = draw(st.integers(1, 12))
    dim = draw(st.integers(1, 4))
    points = draw(arrays(np.float32, (n, dim), elements=coordinate))
    for source, copy in draw(
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3)
    ):
        points[copy] = points[source]
    return points


@settings(max_examples=150, deadline=None)
@given(point_sets())
def test_safe_is_finite_symmetric_zero_on_diagonal_and_exact_for_any_point_set(points):
    x = torch.from_numpy(points).requires_grad_()
    result = pairwise_distances(x, "safe")
    d = result.distances
    ref = exact_reference(x)
    assert torch.isfinite(d).all()
    assert torch.equal(d, d.T)
    assert torch.all(torch.diagonal(d) == 0)
    assert torch.equal(d == 0, ref == 0)  # zero exactly where the points coincide
    assert torch.equal(result.blocked, ref == 0)
    if (ref > 0).any():
        assert relative_error(d.detach(), ref) <= 1e-5
    target = seeded(*d.shape, seed=4).abs()
    torch.nn.MSELoss()(d, target).backward()
    assert torch.isfinite(x.grad).all()
