"""What a step's module boundaries tell about where its first non-finite value started.

``modules.ModuleOrigin`` notes, in the order they came, every module call's output and the
gradient reaching it, and for each call its inputs (the tensors, or their finiteness sums)
and its own parameters' version counters (``CallNote``). The first of them that is not
finite points at a module, and this module says as much as the notes support:

- a module's output: its own operations made the value only where its inputs and its own
  parameters were finite. A parameter that was not (and was not written since the
  forward) brought it in; an input that was not came from its caller's own code (a
  parent's code between its children, with the caller named), looked for up the
  module tree;
- a gradient reaching a module's output: made by the backward of the module that took
  that output as its input (the gradient reaching whose output was finite), or, where no
  module took it, by the loss's backward (the model's output) or by the backward of the
  code of the parent that used it.

Where the notes do not decide (a caller whose call was not noted, a parameter written
after the forward, an output several modules took), the verdict is ``{"unknown": why}``.
"""

from __future__ import annotations

import math
import weakref

import torch
from torch import nn

from gradviz.core.common.diagnostics import finiteness_sum
from gradviz.core.common.module_calls import call_tensors

#: Modules that only hold others and have no code of their own between them.
CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)
#: How a verdict of the notes was established (``"how"`` of an origin).
MODULE_BOUNDARIES = "module_boundaries"


class Tokens:
    """A number for each output of a noted call, to tell which later call took it as its
    input. An id alone would not do: an output nothing holds is freed during the forward,
    and a later tensor may get its id."""

    __slots__ = ("_live", "_next")

    def __init__(self) -> None:
        self._live: dict[int, tuple[weakref.ref, int]] = {}
        self._next = 0

    def of(self, t: torch.Tensor) -> int | None:
        """The number of ``t`` if it is a noted output (still alive: it is at hand)."""
        found = self._live.get(id(t))
        return found[1] if found is not None and found[0]() is t else None

    def mint(self, t: torch.Tensor) -> int:
        """``t``'s number (a new one unless it was noted already: a container returning its
        child's output)."""
        token = self.of(t)
        if token is None:
            token, self._next = self._next, self._next + 1
            self._live[id(t)] = (weakref.ref(t), token)
        return token

    def alias(self, t: torch.Tensor, source: torch.Tensor) -> None:
        """``t`` (a passive module's output) stands for ``source``, a noted output."""
        token = self.of(source)
        if token is not None and self.of(t) is None:
            self._live[id(t)] = (weakref.ref(t), token)

    def clear(self) -> None:
        self._live.clear()


class CallNote:
    """One call of a noted module: its name, its floating tensor inputs (each kept, or
    its finiteness sum), the numbers of the noted outputs among its inputs and of its own
    outputs (``Tokens``), and its own parameters' version counters as it returned."""

    __slots__ = ("module", "name", "inputs", "input_tokens", "output_tokens", "versions")

    def __init__(
        self, module: nn.Module, name: str, args, outputs, keep: int, tokens: Tokens
    ) -> None:
        """``keep``: inputs of up to this many entries are kept, larger ones summed."""
        self.module, self.name = module, name
        self.inputs: list[torch.Tensor] = []  # a tensor kept, or a finiteness sum
        taken = []
        for a in call_tensors(args):
            token = tokens.of(a)
            if token is not None:
                taken.append(token)
            if a.is_floating_point() and a.numel():
                d = a.detach()
                self.inputs.append(d if d.numel() <= keep else finiteness_sum(d))
        self.input_tokens = tuple(taken)
        self.output_tokens = tuple(tokens.mint(t) for t in call_tensors(outputs))
        self.versions = tuple(p._version for p in module._parameters.values() if p is not None)

    def inputs_finite(self) -> bool:
        return all(_finite(t) for t in self.inputs)


def origin_of(entries: list, k: int, value: float, calls: list[CallNote]) -> dict:
    """The verdict for the step whose first non-finite entry is ``entries[k]`` (``value``:
    its sum, for the kind): an origin dict ``{"phase", "module", "op", "cause", "how"}``
    (and ``"tensor"`` for a parameter), or ``{"unknown": why}``."""
    phase, module, _, _, _, info = entries[k]
    kind = "NaN" if math.isnan(value) else "Inf"
    if phase == "input":
        return _found("input", "", f"The model's input already held {kind} before any module ran.")
    if phase == "forward":
        return _forward(info, kind, calls)
    return _backward(entries, k, module, info, kind, calls)


def _forward(call: CallNote, kind: str, calls: list[CallNote]) -> dict:
    """A module's output was the first non-finite value (see the module)."""
    if not call.inputs_finite():  # it came in: from its caller's own code
        return _caller(call, kind, calls)
    held = _parameter(call, kind)
    if held is not None:
        return held
    return _found(
        "forward",
        call.name,
        f"The forward of {_named(call.name)} made {kind} from finite inputs and finite "
        "parameters of its own (its submodules' outputs before it were finite).",
    )


def _caller(call: CallNote, kind: str, calls: list[CallNote]) -> dict:
    """``call``'s input was not finite: made by the own code of the nearest caller whose
    inputs were finite, up the module tree."""
    later = calls[calls.index(call) + 1 :]
    name = call.name
    while name:
        name = name.rpartition(".")[0]
        parent = next((c for c in later if c.name == name), None)
        if parent is None:
            module = _module_named(calls, name)
            if isinstance(module, CONTAINERS):
                continue  # no code of its own: its child's input was its own input
            return {
                "unknown": f"{_named(call.name)} received {kind} as its input, from a "
                f"caller whose call was not noted ({_named(name)}): where it was made is "
                "not known"
            }
        if parent.inputs_finite():
            held = _parameter(parent, kind)
            if held is not None:
                return held
            return _found(
                "forward",
                parent.name,
                f"The own code of {_named(parent.name)} (outside its submodules) made "
                f"{kind} before calling {_named(call.name)}: its inputs and the outputs of "
                "its submodules that ran before were finite, and that submodule received "
                f"{kind} as its input.",
            )
        later = later[later.index(parent) + 1 :]
    return {
        "unknown": f"{_named(call.name)} received {kind} as its input and every caller up "
        "to the model received it too: where it was made is not known"
    }


def _parameter(call: CallNote, kind: str) -> dict | None:
    """A parameter of the call's own module that is not finite: it brought the value in
    (where it was not written since the call), or it is not known whether it did."""
    params = [(n, p) for n, p in call.module._parameters.items() if p is not None]
    for (name, p), version in zip(params, call.versions):
        if _finite(p.detach()):
            continue
        full = f"{call.name}.{name}".lstrip(".")
        if p._version != version:
            return {
                "unknown": f"parameter {full} is not finite now, but it was written after "
                f"{_named(call.name)}'s forward: whether it held {kind} then is not known"
            }
        found = _found(
            "input",
            call.name,
            f"Parameter {full} already held {kind} when {_named(call.name)}'s forward ran.",
        )
        found["tensor"] = full
        return found
    return None


def _backward(entries, k: int, module: str, out: int | None, kind: str, calls) -> dict:
    """The gradient reaching ``module``'s output was the first non-finite one."""
    made = next((c for c in calls if out in c.output_tokens and c.name == module), None)
    later = calls[calls.index(made) + 1 :] if made is not None else calls
    takers = [c for c in later if out in c.input_tokens]
    # A caller that handed the output on to a submodule took it too: the innermost did.
    callers = [c for c in takers if any(_inside(o.name, c.name) for o in takers)]
    takers = [c for c in takers if c not in callers]
    reaching = f"The gradient reaching the output of {_named(module)} was {kind}"
    root = calls[-1] if calls and calls[-1].name == "" else None
    model_output = root is not None and out in root.output_tokens
    if len(takers) > 1 or (takers and model_output):
        names = ", ".join(_named(c.name) for c in takers)
        return {
            "unknown": f"{reaching}; several took that output ({names}"
            + (", and the loss" if model_output else "")
            + "): which backward made it is not known",
            "reaching": reaching,
        }
    if takers:
        taker = takers[0].name
        passed = ", ".join(_named(c.name) for c in callers)
        passed = f"; {passed} handed it on to it" if passed else ""
        return _found(
            "backward",
            taker,
            f"{reaching}, made by the backward of {_named(taker)}, which took that output as "
            f"its input (the gradient reaching its own output was finite{passed}).",
        )
    if model_output or module == "":
        return _found("backward", "", f"{reaching}, made by the loss's backward.")
    parent = module.rpartition(".")[0]
    # No module took it: the parent's own code did, and passed on what it made to modules
    # that ran after it, whose backward may have made the value as well as that code's.
    after = [c.name for c in later if _inside(c.name, parent)]
    if after:
        names = ", ".join(_named(n) for n in dict.fromkeys(after))
        return {
            "unknown": f"{reaching}; no module took that output, the own code of "
            f"{_named(parent)} did: its backward, or that of a module it called after "
            f"({names}), made it, which the module boundaries do not tell",
            "reaching": reaching,
        }
    return _found(
        "backward",
        parent,
        f"{reaching}, made by the backward of the own code of {_named(parent)} (no "
        "submodule took that output as its input, and none ran after it there).",
    )


def _inside(name: str, outer: str) -> bool:
    """Whether module ``name`` lies inside module ``outer`` (every module lies in the
    model, "")."""
    return name != outer and (outer == "" or name.startswith(outer + "."))


def parameter_gradient(grads: list, entries: list, calls: list[CallNote]) -> dict | None:
    """Every noted value finite, but a parameter's gradient not: made by the backward of
    the module that owns it (of those, the one called last: the backward runs it first),
    from the finite gradient reaching its output; ``{"unknown": why}`` where that gradient
    was not noted; None where every gradient is finite."""
    bad = [name for name, g in grads if g is not None and not _finite(g)]
    if not bad:
        return None
    order = {c.name: k for k, c in enumerate(calls)}
    name = max(bad, key=lambda n: order.get(n.rpartition(".")[0], -1))
    owner = name.rpartition(".")[0]
    reached = any(e[0] == "backward" and e[1] == owner for e in entries)
    if not reached:
        return {
            "unknown": f"the gradient of parameter {name} was not finite, but the gradient "
            f"reaching the output of {_named(owner)} was not noted: which backward made it "
            "is not known"
        }
    return _found(
        "backward",
        owner,
        f"The gradient of parameter {name} was not finite while the gradient reaching the "
        f"output of {_named(owner)} was: made by the backward of {_named(owner)}.",
    )


def _found(phase: str, module: str, cause: str) -> dict:
    return {
        "phase": phase,
        "module": module,
        "op": None,
        "cause": f"{cause} (Run `gradviz diagnose` for the operation and line.)",
        "how": MODULE_BOUNDARIES,
    }


def _module_named(calls: list[CallNote], name: str) -> nn.Module | None:
    """The module of that dotted name, from the root's call (the last one noted)."""
    root = next((c.module for c in reversed(calls) if c.name == ""), None)
    if root is None:
        return None
    try:
        return root.get_submodule(name)
    except AttributeError:
        return None


def _finite(t: torch.Tensor) -> bool:
    """Whether every entry of ``t`` (a kept tensor, or a finiteness sum) is finite."""
    if t.numel() == 1:
        return math.isfinite(float(t))
    return bool(torch.isfinite(t).all())


def _named(module: str) -> str:
    """A module in a sentence: module 'encoder.0', or the model itself."""
    return f"module '{module}'" if module else "the model"
