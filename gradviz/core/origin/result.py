"""What a trace found: the origin of the first non-finite value, and how it spread."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: Phases, in the order a training step runs them ("input": it came from outside).
PHASES = ("input", "forward", "backward", "optimizer")


@dataclass(frozen=True)
class Event:
    """One operation that made or received non-finite values.

    ``indices`` are the first few non-finite entries of its output, as index tuples into
    the output's shape; ``inputs`` the tensor operands' values at those entries (floating,
    integer or bool, in the operation's order) where an operand has the output's shape
    after broadcasting (else ``None`` for that operand);
    ``input_kinds`` the kinds of non-finite entries each floating input held anywhere
    ("" finite, else "nan", "inf", "-inf" joined by commas: see ``inspect_values.kinds_of``);
    ``saved`` a backward node's saved input or result at those entries, where it has a
    domain edge (acos's input: 1.0; see ``causes.saved_at``).
    """

    phase: str  # "input", "forward", "backward" or "optimizer"
    op: str  # "aten.div.Tensor"
    node: str | None  # the autograd node running it ("SqrtBackward0"); None outside backward
    module: str  # dotted path of the innermost module ("" outside any module)
    source: str  # "train.py:42", the user's line (for a backward op: its forward call)
    function: str  # the function that line is in ("naive")
    kind: str  # "nan", "inf" or "-inf": the first non-finite entry's kind
    count: int  # non-finite entries of the output
    numel: int  # entries of the output
    indices: tuple[tuple[int, ...], ...] = ()
    inputs: tuple[tuple[float, ...] | None, ...] = ()
    dtype: str = ""  # the output's dtype, "float32"
    input_kinds: tuple[str, ...] = ()
    saved: tuple[float, ...] = ()
    #: It ran while a module of the model ran: with ``module`` "", in the root module's own
    #: code (its forward, between its submodules), not outside the model as the loss does.
    in_model: bool = False


@dataclass(frozen=True)
class Origin(Event):
    """Where the first non-finite value started (an Event) and why.

    ``cause`` is one or two sentences for a person, saying only what the values kept
    support; ``cause_code`` a short code for programs ("sqrt_at_zero", "log_of_zero",
    "domain_edge" (acos or asin at +-1, rsqrt at 0, ...), "division_by_zero",
    "exp_overflow", "zero_times_inf", "inf_minus_inf", "inf_over_inf", "inf_in_product",
    "softmax_of_inf", "domain", "low_precision_overflow", "float_overflow",
    "nonfinite_input", "custom_backward", "optimizer_overflow", "constant",
    "fully_masked", "carried", or "unknown": not known, and the sentence says why).
    ``tensor`` names the input tensor for phase "input" ("fc1.weight", or "" for a tensor
    from outside the model such as the batch).
    """

    cause: str = ""
    cause_code: str = "unknown"
    spread_code: str = ""  # where an Inf became NaN later: that operation's cause code
    tensor: str = ""
    #: How it was established: "observed" (the tracer saw the operation make it, as it ran).
    how: str = "observed"
    events: tuple[Event, ...] = field(default=(), compare=False)

    def to_dict(self, *, events: bool = True) -> dict:
        """Plain JSON-ready data (index tuples as lists)."""
        data = asdict(self)
        data["indices"] = [list(i) for i in self.indices]
        data["inputs"] = [None if v is None else list(v) for v in self.inputs]
        if events:
            data["events"] = [
                {k: v for k, v in asdict(e).items() if k not in ("indices", "inputs", "saved")}
                for e in self.events
            ]
        else:
            data.pop("events")
        return data

    def words(self) -> str:
        """Two or three lines for a terminal or a panel."""
        where = " " + place_words(self.module, self.in_model)
        node = f" (autograd node {self.node})" if self.node else ""
        first = (
            f"The first non-finite value ({self.kind}, {self.count:,} of {self.numel:,} "
            f"entries) started in the {self.phase} phase: {self.op}{node}{where}"
            + (f", at {self.source}" if self.source else "")
            + "."
        )
        lines = [first, self.cause]
        if self.indices:
            shown = ", ".join(str(i if len(i) != 1 else i[0]) for i in self.indices)
            lines.append(f"First entries: {shown}.")
        return "\n".join(line for line in lines if line)


def place_words(module: str, in_model: bool) -> str:
    """Where an operation ran, for a sentence: "in module fc1", "in the model's own code
    (its forward, outside its submodules)" or "outside any module" (the loss, for one)."""
    if module:
        return f"in module {module}"
    if in_model:
        return "in the model's own code (its forward, outside its submodules)"
    return "outside any module"
