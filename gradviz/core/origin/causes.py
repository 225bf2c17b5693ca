"""Why an operation made a non-finite value, in one sentence, from the operation, its
autograd node and the input values at the first non-finite entries."""

from __future__ import annotations

import math

import torch

from gradviz.core.origin.result import Event

_LOG = {"log", "log2", "log10", "log1p", "xlogy", "special_xlog1py"}
_DIV = {"div", "div_", "reciprocal", "reciprocal_", "remainder", "fmod", "true_divide"}
_EXP = {"exp", "exp_", "exp2", "expm1", "sinh", "cosh", "pow", "pow_", "logsumexp"}
_DOMAIN = {"acos": "[-1, 1]", "asin": "[-1, 1]", "acosh": "[1, Inf)", "atanh": "[-1, 1]"}
_SQRT_NODES = ("SqrtBackward",)
_PRODUCTS = {"mul", "mul_", "addcmul", "addcmul_", "mm", "bmm", "matmul", "addmm"}
_SOFTMAX = {"_softmax", "_log_softmax", "softmax", "log_softmax"}


def cause_of(
    event: Event, scalars: tuple[float, ...], node=None, tensor: str = ""
) -> tuple[str, str]:
    """``(code, sentence)`` for an operation that made ``event``'s non-finite values.

    ``scalars``: the operation's plain number arguments; ``node``: the autograd node
    running it (backward only); ``tensor``: for phase "input" or "optimizer", the name of
    the tensor concerned ("" when unknown).
    """
    base = event.op.split(".")[1] if event.op.count(".") >= 1 else event.op
    values = _values(event)
    if event.phase == "input":
        return "nonfinite_input", (
            f"A value already {_kind_words(event.kind)} in the input: "
            f"{_tensor_words(tensor)} held "
            f"{event.count:,} non-finite entries before any operation made one."
        )
    if event.phase == "optimizer":
        lr = next((abs(s) for s in scalars if math.isfinite(s) and s != 0), None)
        step = f" (a step of {lr:.3g} x the update)" if lr is not None else ""
        return "optimizer_overflow", (
            f"The optimizer's update of {_tensor_words(tensor)} overflowed {event.dtype} to "
            f"{_kind_words(event.kind)}{step}: the learning rate is too large for these values."
        )
    custom = isinstance(node, torch.autograd.function.BackwardCFunction)
    if custom and all(math.isfinite(v) for row in event.inputs if row for v in row):
        name = type(node).__name__.removesuffix("Backward")
        return "custom_backward", (
            f"The backward of the custom autograd.Function {name} made "
            f"{_kind_words(event.kind)} ({event.op}) from finite gradients: check its backward."
        )
    if event.node is not None and _is_sqrt_node(event.node, node):
        return "sqrt_at_zero", (
            "sqrt at 0 in the backward: the derivative of sqrt(x), 1 / (2 sqrt(x)), is "
            f"infinite at x = 0, so its backward divided the incoming gradient by 0 at "
            f"{_n(event.count, 'entry', 'entries')} (0 / 0 = NaN where that gradient is 0); "
            "keep x = 0 out of the sqrt (mask it before the sqrt, or add a small epsilon)."
        )
    if event.node is not None and event.node.startswith("LogBackward"):
        return "log_of_zero", (
            "log at 0 in the backward: the derivative of log(x), 1 / x, is infinite at x = 0 "
            "(clamp its input to a small positive value)."
        )
    if base in ("sqrt", "rsqrt") and any(v < 0 for v in values):
        return "domain", f"sqrt of a negative number ({_lowest(values)}) is NaN."
    if base in _LOG:
        if any(v < 0 for v in values):
            return "log_of_negative", f"log of a negative number ({_lowest(values)}) is NaN."
        if any(v == 0 for v in values):
            return "log_of_zero", "log of 0 is -Inf (clamp its input to a small positive value)."
    if base in _DOMAIN:
        outside = [v for v in values if not _in_domain(base, v)]
        if outside:
            return "domain", (
                f"{base} of values outside {_DOMAIN[base]} ({outside[0]:.6g}) is NaN "
                "(rounding can push a cosine just past 1: clamp it)."
            )
    if base in _DIV and _divisor_is_zero(event, scalars, base):
        return "division_by_zero", f"Division by 0 made {_kind_words(event.kind)}."
    if base in _DIV and _both_infinite(event):
        return "inf_over_inf", "Inf / Inf = NaN: an overflowed value was divided by another."
    if base in _SOFTMAX and event.kind == "nan":
        return "fully_masked", (
            "softmax over a row whose entries are all -Inf (every position masked) is 0 / 0 = NaN."
        )
    if base in _PRODUCTS and _has_zero_and_inf(event):
        return "zero_times_inf", (
            "0 x Inf = NaN: a zero (often the gradient a masked where sends to its "
            "unselected branch) met an Inf."
        )
    if base in ("add", "add_", "sub", "sub_", "rsub", "sum", "mean") and event.kind == "nan":
        return "inf_minus_inf", "Inf - Inf = NaN: values of opposite infinite sign were added."
    if base in _EXP and event.kind in ("inf", "-inf"):
        top = max(values, default=math.nan)
        shown = f" at inputs up to {top:.4g}" if math.isfinite(top) else ""
        return "exp_overflow", (
            f"exp overflowed {event.dtype}{shown}: subtract the max before exp "
            "(as softmax and logsumexp do), or compute in log space."
        )
    if event.kind in ("inf", "-inf") and event.dtype in ("float16", "bfloat16"):
        top = torch.finfo(getattr(torch, event.dtype)).max
        return "low_precision_overflow", (
            f"{event.dtype} overflowed: the result exceeds its largest value {top:.5g}; "
            "compute this step in float32 (autocast keeps such operations in float32)."
        )
    if event.kind in ("inf", "-inf"):
        return "float_overflow", f"The result overflowed {event.dtype} (finite inputs, Inf output)."
    if any(not math.isfinite(s) for s in scalars):
        return "constant", f"A non-finite constant in the code ({event.op} with {scalars})."
    return "unknown", f"{event.op} turned finite inputs into {_kind_words(event.kind)}."


def spread_sentence(sentence: str, event: Event) -> str:
    """How a first Inf became NaN later, as a second sentence."""
    node = f" ({event.node})" if event.node else ""
    where = f" in module {event.module}" if event.module else ""
    return f"It became NaN in the {event.phase}, in {event.op}{node}{where}. {sentence}"


def _values(event: Event) -> list[float]:
    """The first input's values at the first non-finite entries (the operand that matters
    for a unary operation), finite ones only."""
    for row in event.inputs:
        if row is not None:
            return [v for v in row if math.isfinite(v)]
    return []


def _divisor_is_zero(event: Event, scalars, base: str) -> bool:
    if base.startswith("reciprocal"):
        return any(v == 0 for v in _values(event))
    if len(event.inputs) >= 2 and event.inputs[1] is not None:
        return any(v == 0 for v in event.inputs[1])
    return any(s == 0 for s in scalars)


def _has_zero_and_inf(event: Event) -> bool:
    rows = [row for row in event.inputs if row is not None]
    if len(rows) < 2:
        return False
    return any(
        (a == 0 and math.isinf(b)) or (b == 0 and math.isinf(a)) for a, b in zip(rows[0], rows[1])
    )


def _both_infinite(event: Event) -> bool:
    rows = [row for row in event.inputs if row is not None]
    return len(rows) >= 2 and any(math.isinf(a) and math.isinf(b) for a, b in zip(*rows[:2]))


def _is_sqrt_node(name: str, node) -> bool:
    if name.startswith(_SQRT_NODES):
        return True
    exponent = getattr(node, "_saved_exponent", None) if name.startswith("PowBackward") else None
    return isinstance(exponent, (int, float)) and 0 < exponent < 1


def _in_domain(base: str, v: float) -> bool:
    if base == "acosh":
        return v >= 1
    return -1 <= v <= 1


def _lowest(values: list[float]) -> str:
    return f"{min(values):.6g}"


def _kind_words(kind: str) -> str:
    return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}.get(kind, kind)


def _tensor_words(tensor: str) -> str:
    return f"tensor {tensor}" if tensor else "a tensor from outside the traced code (the batch?)"


def _n(count: int, singular: str, plural: str) -> str:
    return f"{count:,} {singular if count == 1 else plural}"
