"""KeptCopies: copies that later in-place changes of the originals do not reach, in buffers
refilled while the tensors keep their shapes, made again where one changed."""

from __future__ import annotations

import torch

from gradviz.core.common.kept_copies import KeptCopies


def test_copies_hold_the_values_of_the_call_and_reuse_their_buffers():
    kept = KeptCopies()
    a, b = torch.arange(6.0).reshape(2, 3).t(), torch.ones(4, dtype=torch.float64)
    first = kept.take([a, None, b])
    assert first[1] is None
    a.mul_(float("nan"))  # as clipping does to a gradient in place, after the copy
    assert torch.equal(first[0], torch.arange(6.0).reshape(2, 3).t())
    assert first[2].dtype == torch.float64 and torch.equal(first[2], b)
    second = kept.take([torch.zeros(3, 2), None, b])
    assert second[0] is first[0] and bool((second[0] == 0).all())  # refilled, not made


def test_a_tensor_that_changed_shape_or_dtype_gets_a_new_buffer():
    kept = KeptCopies()
    first = kept.take([torch.ones(3)])[0]
    grown = kept.take([torch.full((5,), 2.0)])[0]
    assert grown is not first and torch.equal(grown, torch.full((5,), 2.0))
    half = kept.take([torch.ones(5, dtype=torch.float16)])[0]
    assert half.dtype == torch.float16
