"""The batch sizes a ``.pt2`` program was exported for, from its own constraints.

``torch.export`` records a dynamic batch (``Dim("batch", min=2, max=64)``) as a symbol in the
input's shape and its range in ``program.range_constraints``. gradviz keeps whatever batch
the user picked: a batch inside the range runs as it is, any other in chunks within the
range (as a fixed batch runs in chunks of its size), and the model's assumptions say so.
Before the program is trusted, the same is read from the archive's ``models/model.json``
(plain JSON, never run), so an untrusted description says it too.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from typing import Any

from gradviz.core.modelio.declared import read_entry
from gradviz.core.modelio.json_depth import json_depth
from gradviz.core.modelio.limits import MAX_DESCRIPTION_ENTRY_BYTES, MAX_JSON_DEPTH

_SYMBOL = re.compile(r"^Symbol\('(\w+)'")


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
    return _kept(_finite(bounds.lower), _finite(bounds.upper))


def _kept(lowest: int | None, highest: int | None) -> tuple[int, int | None] | None:
    """(lowest, highest) with a lowest of at least 1; None for a range that is not one."""
    if lowest is None or (highest is not None and highest < max(lowest, 1)):
        return None
    return max(lowest, 1), highest


def fixed_batch_note(batch: int) -> str:
    """The assumption of a program exported for batches of exactly ``batch``."""
    return (
        f"The program was exported for batches of exactly {batch} inputs; gradviz runs "
        f"any batch through it {batch} samples at a time (the last chunk filled up with "
        "copies of its last sample, whose outputs are dropped)."
    )


def described_batch_notes(data: bytes) -> tuple[str, ...]:
    """The batch note of an untrusted .pt2 (``data``: the archive), read from its
    ``models/model.json``: its single user input's first size, a number or a symbol whose
    range ``range_constraints`` gives. Empty where the entry is absent, over
    MAX_DESCRIPTION_ENTRY_BYTES, nested deeper than MAX_JSON_DEPTH or not as expected (a
    description is optional; the trusted load reads the program itself)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            info = next(i for i in archive.infolist() if i.filename.endswith("models/model.json"))
            raw = read_entry(archive, info, MAX_DESCRIPTION_ENTRY_BYTES, "the file")
        if json_depth(raw) > MAX_JSON_DEPTH:
            return ()
        program = json.loads(raw)
        graph = program["graph_module"]
        specs = graph["signature"]["input_specs"]
        users = [s["user_input"]["arg"]["as_tensor"]["name"] for s in specs if "user_input" in s]
        sizes = graph["graph"]["tensor_values"][users[0]]["sizes"] if len(users) == 1 else []
        first = sizes[0] if len(sizes) >= 2 else {}
        if isinstance(first.get("as_int"), int):
            return (fixed_batch_note(first["as_int"]),)
        symbol = _SYMBOL.match(first["as_expr"]["expr_str"])
        bounds = program["range_constraints"][symbol.group(1)]
        batches = _kept(_json_int(bounds["min_val"]), _json_int(bounds["max_val"]))
    except Exception:  # not as expected: no description of the batch
        return ()
    note = batch_range_note(*batches) if batches else None
    return (note,) if note else ()


def _json_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
