"""What the tracer tests of each aten operation: its fresh outputs and the arguments it
writes, nothing for views and copies (cached per operation by the tracer)."""

from __future__ import annotations

import torch

UNPLANNED = object()
PASS_THROUGH = object()
#: Operations whose floating outputs are copies, selections or zeros of their inputs: they
#: cannot turn finite values into NaN or Inf, so they are not tested (a chain that exists
#: is carried through them).
_COPIES = frozenset(
    {
        "aten::clone",
        "aten::_unsafe_view",
        "aten::relu",
        "aten::threshold_backward",
        "aten::select_backward",
        "aten::slice_backward",
        "aten::zeros_like",
        "aten::ones_like",
        "aten::zeros",
        "aten::ones",
        "aten::empty_like",
        "aten::empty",
        "aten::new_zeros",
        "aten::new_empty",
        "aten::detach",
        "aten::lift_fresh",
        # Points a tensor at a storage (deserialising a checkpoint): its values come from
        # outside, and are an input where a traced operation first meets them.
        "aten::set_",
    }
)


def plan_of(func) -> tuple[bool, tuple[int, ...]] | None:
    """(check the returned tensors, positions of arguments written in place) of an
    operation; None for one that can make nothing new (a view of its input)."""
    schema = func._schema
    if schema.name in _COPIES:
        return PASS_THROUGH
    written = tuple(
        i
        for i, a in enumerate(schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write
    )
    fresh = any(r.alias_info is None for r in schema.returns)
    return (fresh, written) if (fresh or written) else None


def results_of(out, args, plan) -> list[torch.Tensor]:
    """The tensors an operation made or wrote (lists of a foreach operation flattened)."""
    fresh, written = plan
    found = []
    items = []
    if fresh and isinstance(out, torch.Tensor):
        items.append(out)
    elif fresh and isinstance(out, (list, tuple)):
        items += out
    items += [args[i] for i in written if i < len(args)]
    for item in items:
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            found += [t for t in item if isinstance(t, torch.Tensor)]
    return found


def whole_storage(t: torch.Tensor) -> bool:
    """Whether ``t`` covers its whole storage (a view such as a diagonal does not)."""
    try:
        return t.numel() * t.element_size() == t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return False


def floating(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 0
