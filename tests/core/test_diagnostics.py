"""Gradient health on the device agrees with the numpy classifier the views use."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gradviz.core.common import diagnostics
from gradviz.core.common.health import Health, classify
from gradviz.core.lab.distances import pairwise_distances

SPECIALS = [0.0, -0.0, 1.5, -2.0, 1e-45, 3e38, math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_and_numpy_classifiers_agree_on_every_category(dtype):
    values = torch.tensor(SPECIALS * 2, dtype=dtype)
    blocked = torch.tensor([False] * len(SPECIALS) + [True] * len(SPECIALS))
    codes = diagnostics.classify_tensor(values, blocked)
    assert codes.dtype == torch.uint8
    np.testing.assert_array_equal(codes.numpy(), classify(values.numpy(), blocked.numpy()))
    # Unblocked: each special value has its own category; a NaN behind a mask stays NaN.
    assert codes[: len(SPECIALS)].tolist() == [1, 1, 0, 0, 0, 0, 5, 4, 3]
    assert codes[len(SPECIALS) :].tolist() == [2, 2, 2, 2, 2, 2, 5, 4, 3]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(SPECIALS) | st.floats(), st.booleans()), max_size=40),
    st.booleans(),
)
def test_torch_classifier_matches_numpy_for_any_values(pairs, with_mask):
    values = np.array([v for v, _ in pairs], dtype=np.float64)
    blocked = np.array([b for _, b in pairs], dtype=bool) if with_mask else None
    codes = diagnostics.classify_tensor(
        torch.from_numpy(values), None if blocked is None else torch.from_numpy(blocked)
    )
    np.testing.assert_array_equal(codes.numpy(), classify(values, blocked))


def _entry_health_after_backward(method, points):
    x = torch.tensor(points, requires_grad=True)
    result = pairwise_distances(x, method)
    node = result.squared if result.squared is not None else result.distances
    node.retain_grad()
    target = torch.cdist(x.detach(), x.detach()) * 1.1
    torch.nn.functional.mse_loss(result.distances, target).backward()
    return diagnostics.entry_health(node.grad, result.blocked), x.grad


def test_naive_method_health_is_nan_exactly_on_the_diagonal():
    points = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    codes, coord_grads = _entry_health_after_backward("naive", points)
    diagonal = torch.eye(6, dtype=torch.bool)
    assert (codes[diagonal] == Health.NAN).all()
    assert (codes[~diagonal] == Health.FINITE).all()
    # The NaN reaches every coordinate through the diagonal of the Gram matrix.
    assert (diagnostics.coord_health(coord_grads) == Health.NAN).all()


def test_masked_method_health_marks_the_diagonal_blocked():
    points = np.random.default_rng(1).standard_normal((6, 3)).astype(np.float32)
    codes, coord_grads = _entry_health_after_backward("masked", points)
    diagonal = torch.eye(6, dtype=torch.bool)
    assert (codes[diagonal] == Health.BLOCKED).all()
    assert (codes[~diagonal] == Health.FINITE).all()
    assert (diagnostics.coord_health(coord_grads) == Health.FINITE).all()


def test_parameter_health_reports_the_worst_gradient_of_each_tensor():
    a = torch.nn.Parameter(torch.ones(3))
    b = torch.nn.Parameter(torch.ones(2, 2))
    c = torch.nn.Parameter(torch.ones(4))
    a.grad = torch.tensor([1.0, 0.0, 2.0])
    b.grad = torch.tensor([[1.0, math.nan], [math.inf, 0.0]])
    health = diagnostics.parameter_health([("a", a), ("b", b), ("c", c)])
    assert health == (("a", Health.ZERO), ("b", Health.NAN), ("c", Health.ZERO))


def test_all_finite_spots_one_bad_value_in_any_tensor():
    good = [torch.ones(3), None, torch.zeros(2, 2)]
    assert bool(diagnostics.all_finite(good, torch.device("cpu")))
    bad = [*good, torch.tensor([1.0, -math.inf])]
    assert not bool(diagnostics.all_finite(bad, torch.device("cpu")))
    assert bool(diagnostics.all_finite([], torch.device("cpu")))


def test_worst_code_of_a_missing_gradient_is_zero():
    assert diagnostics.worst_code(None) == Health.ZERO
    assert diagnostics.worst_code(torch.tensor([0.0, -math.inf])) == Health.NEG_INF


def test_the_in_place_finiteness_test_answers_only_where_it_leaves_every_bit():
    # Exact where it answers (Inf, NaN, a sum that would overflow); no answer for dtypes it
    # may rewrite (bfloat16, float16) or for a tensor in a graph, and those are not touched.
    assert diagnostics.finite_in_place([torch.full((3,), 3e38), torch.ones(2)]) is True
    for bad in (math.inf, -math.inf, math.nan):
        assert diagnostics.finite_in_place([torch.ones(2), torch.tensor([0.0, bad])]) is False
    for dtype in (torch.bfloat16, torch.float16):
        t = torch.tensor([1.0, math.nan], dtype=dtype)
        before = t.clone()
        assert diagnostics.finite_in_place([torch.ones(2), t]) is None
        assert torch.equal(t.view(torch.int16), before.view(torch.int16))
    assert diagnostics.finite_in_place([torch.ones(2, requires_grad=True)]) is None


def test_the_in_place_finiteness_test_leaves_a_kept_flag_ready_for_the_next_step():
    # A recorder keeps one flag from step to step: a non-finite step must not leave it set
    # (every later clean step would then read non-finite), nor a refused call.
    flag = torch.zeros(1)
    assert diagnostics.finite_in_place([torch.tensor([1.0, math.nan])], flag) is False
    assert diagnostics.finite_in_place([torch.ones(3)], flag) is True
    assert diagnostics.finite_in_place([torch.tensor([math.inf]), None], flag) is None
    shared = torch.tensor([math.inf]).expand(2)  # entries sharing memory: refused
    assert diagnostics.finite_in_place([torch.tensor([math.inf]), shared], flag) is None
    assert flag.item() == 0.0
    assert diagnostics.finite_in_place([torch.ones(3)], flag) is True
