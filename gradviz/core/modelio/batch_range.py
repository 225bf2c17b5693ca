"""The batch sizes a ``.pt2`` program was exported for, from its own constraints.

``torch.export`` records a dynamic batch (``Dim("batch", min=2, max=64)``) as a symbol in the
input's shape and its range in ``program.range_constraints``. gradviz keeps whatever batch
the user picked: a batch inside the range runs as it is, any other in chunks within the
range (as a fixed batch runs in chunks of its size), and the model's assumptions say so.
"""

from __future__ import annotations

from typing import Any


def dynamic_batch_range(program: Any, inputs: list) -> tuple[int, int | None] | None:
    """(lowest, highest) batch of a program whose single input's first size is a symbol
    with a range in its ``range_constraints`` (``highest`` None: unbounded); None where the
    input is not one tensor, its batch is a number or an expression, or the range is
    unknown."""
    if len(inputs) != 1 or inputs[0] is None:
        return None
    shape = getattr(inputs[0].meta.get("val"), "shape", None)
    if not shape or isinstance(shape[0], int):
        return None
    expr = getattr(getattr(shape[0], "node", None), "expr", None)
    bounds = getattr(program, "range_constraints", {}).get(expr)
    if bounds is None:
        return None
    lowest, highest = _finite(bounds.lower), _finite(bounds.upper)
    if lowest is None or (highest is not None and highest < max(lowest, 1)):
        return None
    return max(lowest, 1), highest


def batch_range_note(lowest: int, highest: int | None) -> str | None:
    """The assumption that says the range and how a batch outside it runs; None for a
    program that takes a batch of any size."""
    if highest is None:
        if lowest <= 1:
            return None
        return (
            f"The program was exported for batches of {lowest} or more inputs; gradviz runs "
            f"a smaller batch filled up to {lowest} with copies of its last sample, whose "
            "outputs are dropped."
        )
    return (
        f"The program was exported for batches of {lowest} to {highest} inputs; gradviz runs "
        f"a batch outside that range in chunks of at most {highest} samples"
        + (
            f", a chunk of fewer than {lowest} filled up with copies of its last sample, whose "
            "outputs are dropped."
            if lowest > 1
            else "."
        )
    )


def in_batch_range(program: Any, lowest: int, highest: int | None):
    """A builder of the program's module run through ``guard.InBatchRange``."""
    from gradviz.core.modelio.guard import InBatchRange

    return lambda: InBatchRange(program.module(), lowest, highest)


def _finite(bound: Any) -> int | None:
    """A range bound as an int; None for torch's symbolic infinity."""
    if not getattr(bound, "is_finite", True):
        return None
    try:
        return int(bound)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None
