"""Why an operation made a non-finite value, in one sentence, from the operation, its
autograd node and the input values at the first non-finite entries.

A sentence says only what those values support. An Inf from finite inputs is an overflow
only where the operation has no other way to make one (a sum, a product, exp); an
operation that also makes Inf at a point of its own (log, rsqrt and the backward of sqrt at
0, the backward of acos and asin at +-1: a domain edge) is named for that point where the
values show it. A NaN made from +-Inf inputs is told by the kinds those inputs held (+Inf
and -Inf added, 0 x Inf, a softmax row all -Inf), and where they do not decide, the
sentence says "not known" and why.
"""

from __future__ import annotations

import math

import torch

from gradviz.core.origin.result import Event, place_words

_LOG = {"log", "log2", "log10", "log1p", "xlogy", "special_xlog1py"}
_DIV = {"div", "div_", "reciprocal", "reciprocal_", "remainder", "fmod", "true_divide"}
_EXP = {"exp", "exp_", "exp2", "expm1", "sinh", "cosh", "logsumexp"}
_CASTS = {"_to_copy", "copy_", "to", "_to_dtype"}
_DOMAIN = {"acos": "[-1, 1]", "asin": "[-1, 1]", "acosh": "[1, Inf)", "atanh": "[-1, 1]"}
_PRODUCTS = {"mul", "mul_", "addcmul", "addcmul_"}
_MATMUL = {
    "mm",
    "bmm",
    "matmul",
    "addmm",
    "addmm_",
    "baddbmm",
    "addbmm",
    "linear",
    "mv",
    "dot",
    "convolution",
    "_convolution",
    "convolution_backward",
    "_scaled_dot_product_attention_math",
    "_scaled_dot_product_flash_attention_for_cpu",
}
_SUMS = {"add", "add_", "sub", "sub_", "rsub", "sum", "mean", "cumsum", "addcdiv", "addcdiv_"}
_SOFTMAX = {"_softmax", "_log_softmax", "softmax", "log_softmax", "_masked_softmax"}
#: Operations whose only way to an Inf from finite inputs is an overflow of the dtype.
_OVERFLOWING = (
    _PRODUCTS
    | _MATMUL
    | _SUMS
    | _EXP
    | _CASTS
    | {"pow", "pow_", "linalg_vector_norm", "norm", "_cdist_forward", "_euclidean_dist", "dist"}
)
#: Backward nodes whose derivative is infinite at a point of the forward's domain:
#: node name prefix -> (the function, its saved input or result, the points, the derivative).
_EDGES = {
    "AcosBackward": ("acos", "_saved_self", (1.0, -1.0), "-1 / sqrt(1 - x^2)"),
    "AsinBackward": ("asin", "_saved_self", (1.0, -1.0), "1 / sqrt(1 - x^2)"),
    "AcoshBackward": ("acosh", "_saved_self", (1.0,), "1 / sqrt(x^2 - 1)"),
    "StdBackward": ("std", "_saved_result", (0.0,), "(x - mean) / (n std)"),
    "LinalgVectorNormBackward": ("a vector norm", "_saved_result", (0.0,), "x / |x|"),
    "NormBackward": ("a vector norm", "_saved_result", (0.0,), "x / |x|"),
}


def cause_of(
    event: Event, scalars: tuple[float, ...], node=None, tensor: str = ""
) -> tuple[str, str]:
    """``(code, sentence)`` for an operation that made ``event``'s non-finite values.

    ``scalars``: the operation's plain number arguments; ``node``: the autograd node
    running it (backward only); ``tensor``: for phase "input" or "optimizer", the name of
    the tensor concerned ("" when unknown).
    """
    base = event.op.split(".")[1] if event.op.count(".") >= 1 else event.op
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
    if any(event.input_kinds):
        return _from_nonfinite(event, base)
    return _from_finite(event, base, scalars, node)


def _from_finite(event: Event, base: str, scalars, node) -> tuple[str, str]:
    """An operation whose inputs were all finite made ``event``'s values."""
    values = _values(event)
    custom = isinstance(node, torch.autograd.function.BackwardCFunction)
    if custom:
        name = type(node).__name__.removesuffix("Backward")
        return "custom_backward", (
            f"The backward of the custom autograd.Function {name} made "
            f"{_kind_words(event.kind)} ({event.op}) from finite gradients: check its backward."
        )
    if event.node is not None:
        found = _backward_edge(event, node)
        if found is not None:
            return found
    if base in ("sqrt", "rsqrt") and any(v < 0 for v in values):
        return "domain", f"{base} of a negative number ({_lowest(values)}) is NaN."
    if base == "rsqrt" and any(v == 0 for v in values):
        return "domain_edge", (
            "rsqrt at 0 is +Inf (a domain edge: 1 / sqrt(x) has no value at x = 0); keep 0 "
            "out of it (add a small epsilon, as a normalisation's variance + eps does)."
        )
    if base in _LOG:
        if any(v < 0 for v in values):
            return "log_of_negative", f"log of a negative number ({_lowest(values)}) is NaN."
        if any(v == 0 for v in values):
            return "log_of_zero", (
                "log of 0 is -Inf (a domain edge, not an overflow; clamp its input to a small "
                "positive value)."
            )
    if base in _DOMAIN:
        outside = [v for v in values if not _in_domain(base, v)]
        if outside:
            return "domain", (
                f"{base} of values outside {_DOMAIN[base]} ({outside[0]:.6g}) is NaN "
                "(rounding can push a cosine just past 1: clamp it)."
            )
        if base == "atanh" and any(abs(v) == 1 for v in values):
            return "domain_edge", "atanh at +-1 is +-Inf (a domain edge of atanh)."
    if base in _DIV and _divisor_is_zero(event, scalars, base):
        return "division_by_zero", f"Division by 0 made {_kind_words(event.kind)}."
    if base in ("pow", "pow_") and any(v == 0 for v in values) and any(s < 0 for s in scalars):
        return "division_by_zero", "0 to a negative power is Inf (a division by 0)."
    if base in ("pow", "pow_") and event.kind == "nan" and any(v < 0 for v in values):
        return "domain", f"A negative number ({_lowest(values)}) to a fractional power is NaN."
    if base in _EXP and event.kind in ("inf", "-inf"):
        top = max(values, default=math.nan)
        shown = f" at inputs up to {top:.4g}" if math.isfinite(top) else ""
        return "exp_overflow", (
            f"{base} overflowed {event.dtype}{shown}: subtract the max before exp "
            "(as softmax and logsumexp do), or compute in log space."
        )
    if base in _OVERFLOWING and _overflowed(event, base):
        return _overflow_words(event)
    if any(not math.isfinite(s) for s in scalars):
        return "constant", f"A non-finite constant in the code ({event.op} with {scalars})."
    return "unknown", (
        f"Not known why: {event.op} made {_kind_words(event.kind)} from finite inputs, and it "
        "is not an operation whose only way to that is an overflow or a known domain edge."
    )


def _backward_edge(event: Event, node) -> tuple[str, str] | None:
    """A backward node whose derivative is infinite where its forward's input sat at a
    domain edge (sqrt and fractional powers at 0, acos and asin at +-1, a norm at 0), as
    its saved values show; None where the node is none of those."""
    name = event.node
    if name.startswith("SqrtBackward") or _fractional_pow(name, node):
        return "sqrt_at_zero", (
            "sqrt at 0 in the backward (a domain edge): the derivative of sqrt(x), "
            f"1 / (2 sqrt(x)), is infinite at x = 0, so its backward divided the incoming "
            f"gradient by 0 at {_n(event.count, 'entry', 'entries')} (0 / 0 = NaN where that "
            "gradient is 0); keep x = 0 out of the sqrt (mask it before the sqrt, or add a "
            "small epsilon)."
        )
    if name.startswith("LogBackward"):
        return "log_of_zero", (
            "log at 0 in the backward (a domain edge): the derivative of log(x), 1 / x, is "
            "infinite at x = 0 (clamp its input to a small positive value)."
        )
    edge = next((e for prefix, e in _EDGES.items() if name.startswith(prefix)), None)
    if edge is None:
        return None
    function, _, points, derivative = edge
    at = list(event.saved)
    hit = [v for v in at if v in points]
    if at and not hit:
        return "unknown", (
            f"Not known why: the backward of {function} made {_kind_words(event.kind)} from "
            f"finite values, but its saved values there ({_shown(at)}) are not its domain edge."
        )
    point = _shown(hit) if hit else " or ".join(f"{p:g}" for p in points)
    return "domain_edge", (
        f"{function} at {point} in the backward (a domain edge, not an overflow): its "
        f"derivative {derivative} is infinite there, so the backward made "
        f"{_kind_words(event.kind)}; keep the input off that point (clamp a cosine to "
        "[-1 + eps, 1 - eps], add an epsilon under a norm)."
    )


def _from_nonfinite(event: Event, base: str) -> tuple[str, str]:
    """An operation that received +-Inf or NaN (``event.input_kinds``) made its NaN or
    Inf: how, as far as the kinds and the values at its entries tell."""
    got = _received(event.input_kinds)
    made = _kind_words(event.kind)
    if event.kind != "nan":
        return "carried", f"{event.op} received {got} and passed on {made}."
    if base in _SOFTMAX:
        return _softmax_nan(event, got)
    if base in _PRODUCTS and _has_zero_and_inf(event):
        hint = (
            " (in a backward, often the gradient a masked where sends to its unselected branch)"
            if event.phase == "backward"
            else ""
        )
        return "zero_times_inf", f"0 x Inf = NaN: a zero{hint} met an Inf."
    if base in _DIV:
        found = _division_nan(event)
        if found is not None:
            return found
    if base in _SUMS and _opposite_infinities(event, base):
        return "inf_minus_inf", "Inf - Inf = NaN: values of opposite infinite sign were added."
    if base in _MATMUL:
        return "inf_in_product", (
            f"{event.op} received {got} and made NaN: a sum of products over them met "
            "Inf - Inf or 0 x Inf (which of the two is not known from the values kept)."
        )
    return "unknown", (
        f"{event.op} received {got} and made NaN; how, the values kept do not tell (not known)."
    )


def _softmax_nan(event: Event, got: str) -> tuple[str, str]:
    """A softmax's NaN from a non-NaN row: the row was all -Inf, or it held +Inf."""
    kinds = set(",".join(event.input_kinds).split(","))
    if "inf" not in kinds and "nan" not in kinds:
        return "fully_masked", (
            "softmax over a row whose entries are all -Inf (every position masked) is 0 / 0 = NaN."
        )
    at = [v for row in event.inputs if row is not None for v in row]
    if "nan" not in kinds and any(v == math.inf for v in at):
        return "softmax_of_inf", (
            "softmax over a row holding +Inf is exp(Inf - Inf) = NaN: an overflowed score "
            "reached it."
        )
    return "unknown", (
        f"softmax received {got} and made NaN: a row all -Inf (masked) or a row holding "
        "+Inf would each do it; which, the values kept do not tell (not known)."
    )


def spread_sentence(sentence: str, event: Event) -> str:
    """How a first Inf became NaN later, as a second sentence."""
    node = f" ({event.node})" if event.node else ""
    where = f" {place_words(event.module, True)}" if event.module or event.in_model else ""
    return f"It became NaN in the {event.phase}, in {event.op}{node}{where}. {sentence}"


def _values(event: Event) -> list[float]:
    """The first input's values at the first non-finite entries (the operand that matters
    for a unary operation), finite ones only."""
    for row in event.inputs:
        if row is not None:
            return [v for v in row if math.isfinite(v)]
    return []


def _overflowed(event: Event, base: str) -> bool:
    """Whether the values support an overflow: for an elementwise product or sum whose
    inputs at the entries are known, their exact result (in float64) is beyond the dtype's
    largest value; otherwise the operation has no other way to a non-finite value from
    finite inputs (a sum of products: an Inf, or NaN from Inf - Inf within it)."""
    rows = [row for row in event.inputs if row is not None]
    if base in ("mul", "mul_", "add", "add_", "sub", "sub_") and len(rows) >= 2:
        exact = _exact(base, rows[0], rows[1])
        top = _largest(event.dtype)
        return top is not None and any(abs(v) > top for v in exact)
    if base in _CASTS:  # a value beyond the target dtype's range, rounded to Inf
        top = _largest(event.dtype)
        return top is not None and any(abs(v) > top for row in rows for v in row)
    return True


def _exact(base: str, a: tuple, b: tuple) -> list[float]:
    if base.startswith("mul"):
        return [x * y for x, y in zip(a, b)]
    if base.startswith("add"):
        return [x + y for x, y in zip(a, b)]
    return [x - y for x, y in zip(a, b)]


def _overflow_words(event: Event) -> tuple[str, str]:
    made = _kind_words(event.kind)
    if event.dtype == "float16":
        top = torch.finfo(torch.float16).max
        return "low_precision_overflow", (
            f"float16 overflowed to {made}: the result exceeds its largest value {top:.5g}; "
            "compute this step in float32 (autocast keeps such operations in float32)."
        )
    if event.dtype == "bfloat16":
        top = torch.finfo(torch.bfloat16).max
        return "low_precision_overflow", (
            f"bfloat16 overflowed to {made}: the result exceeds its largest value {top:.5g}, "
            "which is float32's range too: the values themselves grew too large."
        )
    if event.kind == "nan":
        return "float_overflow", (
            f"The sums inside {event.op} overflowed {event.dtype} and met Inf - Inf (finite "
            "inputs, NaN output)."
        )
    return "float_overflow", f"The result overflowed {event.dtype} to {made} (finite inputs)."


def _largest(dtype: str) -> float | None:
    try:
        return float(torch.finfo(getattr(torch, dtype)).max)
    except (AttributeError, TypeError):
        return None


def saved_at(node, indices) -> tuple[float, ...]:
    """For a backward node with a domain edge (``_EDGES``): its saved input or result at
    the entries (where its shape has them), the evidence of the edge; else (). Read as the
    node runs: the backward frees what it saved."""
    name = type(node).__name__
    edge = next((e for prefix, e in _EDGES.items() if name.startswith(prefix)), None)
    if edge is None:
        return ()
    try:
        t = getattr(node, edge[1], None)
        if not isinstance(t, torch.Tensor):
            return ()
        if t.numel() == 1:
            return (float(t),)
        return tuple(float(t[i]) for i in indices)
    except (IndexError, RuntimeError):
        return ()


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


def _division_nan(event: Event) -> tuple[str, str] | None:
    """A division's NaN at the entries: Inf / Inf, or 0 / 0 (named by the first entry's,
    both told where both occur), or None where the values there show neither."""
    rows = [row for row in event.inputs if row is not None]
    if len(rows) < 2:
        return None
    ways = []
    for a, b in zip(rows[0], rows[1]):
        if math.isinf(a) and math.isinf(b):
            ways.append("inf_over_inf")
        elif a == 0 and b == 0:
            ways.append("division_by_zero")
    if not ways:
        return None
    words = {
        "inf_over_inf": "Inf / Inf = NaN: an overflowed value was divided by another",
        "division_by_zero": "0 / 0 = NaN: a zero was divided by zero",
    }
    said = "; ".join(words[w] for w in dict.fromkeys(ways))
    return ways[0], f"{said} (at the first entries)."


def _opposite_infinities(event: Event, base: str) -> bool:
    """Whether +Inf met -Inf in a sum: at the entries (a binary add or subtract whose
    inputs there are known), else anywhere in the summed input (a reduction: a sum of
    non-NaN values is NaN only where both infinities are among them)."""
    rows = [row for row in event.inputs if row is not None]
    if base in ("sum", "mean", "cumsum") or len(rows) < 2:
        kinds = [set(k.split(",")) for k in event.input_kinds if k]
        if base in ("sum", "mean", "cumsum"):
            return any({"inf", "-inf"} <= k and "nan" not in k for k in kinds)
        return False
    same = base.startswith(("sub", "rsub"))
    return any(
        math.isinf(a) and math.isinf(b) and ((a == b) if same else (a != b))
        for a, b in zip(rows[0], rows[1])
    )


def _fractional_pow(name: str, node) -> bool:
    exponent = getattr(node, "_saved_exponent", None) if name.startswith("PowBackward") else None
    return isinstance(exponent, (int, float)) and 0 < exponent < 1


def _in_domain(base: str, v: float) -> bool:
    if base == "acosh":
        return v >= 1
    return -1 <= v <= 1


def _lowest(values: list[float]) -> str:
    return f"{min(values):.6g}"


def _shown(values: list[float]) -> str:
    return ", ".join(f"{v:g}" for v in dict.fromkeys(values))


def _received(kinds: tuple[str, ...]) -> str:
    """The kinds the inputs held, in words ("+Inf and -Inf")."""
    found = dict.fromkeys(k for ks in kinds for k in ks.split(",") if k)
    return " and ".join(_kind_words(k) for k in found) or "non-finite values"


def _kind_words(kind: str) -> str:
    return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}.get(kind, kind)


def _tensor_words(tensor: str) -> str:
    return f"tensor {tensor}" if tensor else "a tensor from outside the traced code (the batch?)"


def _n(count: int, singular: str, plural: str) -> str:
    return f"{count:,} {singular if count == 1 else plural}"
