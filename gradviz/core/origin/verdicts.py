"""The watch's origin of a bad step, from what was seen of it: the module boundaries
(``boundaries``), the step replayed under the tracer (``tracer``) and the optimizer's last
write to a parameter (``writes``). Each origin says how it was established (``"how"``):

- ``"replayed"``: the step ran again under the tracer, which saw the operation (its op,
  autograd node, source line and cause are the tracer's);
- ``"module_boundaries"``: inferred from which module's output, or gradient reaching it,
  was first non-finite (the operation and line are not known).

A parameter that held the value when the forward ran is the optimizer's doing, at the step
of its ``step()`` call, only where that ``step()`` was its last write.
"""

from __future__ import annotations

from torch import nn

from gradviz.core.origin import inspect_values as V
from gradviz.core.origin.boundaries import MODULE_BOUNDARIES
from gradviz.core.origin.result import Origin

REPLAYED = "replayed"
#: What a recording's ``first_nonfinite["origin"]`` may hold (``source`` and ``node``
#: where the operation is known, ``tensor`` for a parameter).
ORIGIN_KEYS = (
    "phase", "module", "in_model", "op", "node", "source", "tensor", "cause", "how", "step"
)  # fmt: skip


def refined(verdict: dict, traced: Origin | None) -> dict:
    """The notes' ``verdict`` of a step, or what the tracer saw of the same step run
    again, where it saw the operation in the model (not a gradient from outside it: the
    loss's, which the notes place)."""
    if traced is None or (traced.phase == "input" and traced.node is not None):
        return verdict  # (a gradient from outside the model: the loss's backward)
    where = f", at {traced.source}" if traced.source else ""
    node = f" ({traced.node})" if traced.node else ""
    kind = {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}.get(traced.kind, traced.kind)
    found = {
        "phase": traced.phase,
        "module": traced.module,
        "op": traced.op,
        "node": traced.node,
        "source": traced.source,
        "in_model": traced.in_model,
        "how": REPLAYED,
    }
    if traced.phase == "input":
        found["op"] = None
        found["module"] = traced.tensor.rpartition(".")[0] if traced.tensor else ""
        if traced.tensor:
            found["tensor"] = traced.tensor
            found["cause"] = (
                f"Parameter {traced.tensor} already held {kind} when the forward ran (the step "
                f"replayed under the tracer: it first met {traced.op}{where})."
            )
        else:
            found["cause"] = (
                f"The model's input already held {kind} before any module ran (the step "
                f"replayed under the tracer: it first met {traced.op}{where})."
            )
        return found
    reaching = verdict.get("reaching") or (
        verdict.get("cause", "").split(", made by")[0] if _reaching(verdict) else ""
    )
    lead = f"{reaching}. " if reaching else ""
    found["cause"] = (
        f"{lead}It was made in the {traced.phase} of {_named(traced.module)} (its own code, "
        f"not a submodule's): {traced.op}{node}{where}, found by running the step again under "
        f"the tracer. {traced.cause}"
    )
    return found


def optimizer_wrote(found: dict, model: nn.Module, writes, number: int, clean_before: bool):
    """Where ``found`` is a parameter that held the value when step ``number``'s forward
    ran: the optimizer's, at the step whose ``step()`` last wrote it (``writes``, an
    ``OptimizerWrites``), or said not known; else ``found`` as it is."""
    name = found.get("tensor")
    if found.get("phase") != "input" or not name or writes is None:
        return found
    try:
        param = model.get_parameter(name)
    except AttributeError:
        return found
    kinds = V.kinds_of(param.detach())
    if not kinds:
        return found
    held = " and ".join({"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}[k] for k in kinds.split(","))
    step = writes.writer(param)
    if step is None:
        return {
            **found,
            "cause": f"Parameter {name} held {held} when step {number}'s forward ran; what wrote "
            "it there is not known (no optimizer step() was seen to be its last write).",
        }
    before = (
        f"step {step}'s own forward and gradients were finite"
        if clean_before
        else f"whether it was finite before that step() is not known (step {step} was not read)"
    )
    return {
        "phase": "optimizer",
        "module": "",
        "op": None,
        "tensor": name,
        "step": step,
        "how": found.get("how", MODULE_BOUNDARIES),
        "cause": f"The optimizer's step() of step {step} wrote {held} into {name}: it held "
        f"{held} when step {number}'s forward ran and nothing wrote it after that step() "
        f"({before}); the learning rate or the update is too large for these values.",
    }


def _reaching(verdict: dict) -> bool:
    return verdict.get("phase") == "backward" and "The gradient reaching" in verdict.get(
        "cause", ""
    )


def _named(module: str) -> str:
    return f"module '{module}'" if module else "the model"
