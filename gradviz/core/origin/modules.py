"""The module-level origin ``gradviz.watch`` checks at every step, cheaply.

Forward hooks on the watched model's computing submodules (not containers, dropout,
pooling and the like) take one sum of their output (and of the root's inputs), and a hook
on each output tensor one sum of the gradient reaching it.
The sums stay on the device; at the end of a step (``rec.log``) one stacked finiteness test
says whether any of them went non-finite, and the first one in execution order names the
module: its forward made the value, or (for a gradient) the backward of the module that
consumed its output. The exact operation is the full tracer's job (``gradviz diagnose``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

#: Modules that only select, move or zero values (no NaN or Inf of their own making) and
#: containers: not hooked, because a hook costs every call of a module microseconds.
_PASSIVE = (
    nn.Sequential,
    nn.ModuleList,
    nn.ModuleDict,
    nn.Identity,
    nn.Flatten,
    nn.Unflatten,
    nn.ReLU,
    nn.modules.dropout._DropoutNd,
    nn.modules.pooling._MaxPoolNd,
    nn.modules.pooling._AdaptiveMaxPoolNd,
)


_HALF = (torch.float16, torch.bfloat16)


class ModuleOrigin:
    """Per-step finiteness of module outputs and output gradients of ``model``.

    ``step_end()`` (after ``backward()``) returns the step's module-level origin as
    ``{"phase", "module", "op", "cause"}`` (``op`` None: a module, not an operation, is
    known) or None, and forgets the step; with ``read=False`` it only forgets (the
    recorder reads on the CPU at every step, on an accelerator only at recorded steps,
    which synchronise anyway).
    """

    def __init__(self, model: nn.Module) -> None:
        self._names = {id(m): name for name, m in model.named_modules()}
        self._root = model
        self._sums: list[torch.Tensor] = []
        self._where: list[tuple[str, str]] = []  # (phase, module) of each sum
        self._last_output: torch.Tensor | None = None  # the output summed last
        self._handles = [model.register_forward_pre_hook(self._on_root_input)]
        for m in model.modules():
            if m is model or not isinstance(m, _PASSIVE):
                self._handles.append(m.register_forward_hook(self._on_output))

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _on_root_input(self, _module, args) -> None:
        for a in args:
            if _floating(a):
                self._add("input", "", a)

    def _on_output(self, module, _args, output) -> None:
        name = self._names.get(id(module), type(module).__name__)
        for t in output if isinstance(output, (tuple, list)) else (output,):
            if _floating(t) and t is not self._last_output:
                # A container returning its last child's output: that tensor is summed once,
                # under the innermost module that made it.
                self._last_output = t
                self._add("forward", name, t)
                if t.requires_grad:
                    t.register_hook(self._gradient_hook(name))

    def _gradient_hook(self, name: str):
        def hook(grad: torch.Tensor) -> None:
            if _floating(grad):
                self._add("backward", name, grad)

        return hook

    def _add(self, phase: str, name: str, t: torch.Tensor) -> None:
        t = t.detach()  # (a sum of a detached tensor records no graph)
        self._sums.append(t.sum(dtype=torch.float32) if t.dtype in _HALF else t.sum())
        self._where.append((phase, name))

    def step_end(self, read: bool = True) -> dict | None:
        sums, where = self._sums, self._where
        self._sums, self._where, self._last_output = [], [], None
        if not sums:
            return None
        if not read:
            return None
        device = sums[0].device
        values = torch.stack([s.to(device, torch.float32) for s in sums]).tolist()  # one read
        for k, value in enumerate(values):
            if not math.isfinite(value):
                return _origin(k, where, value)
        return None


def _origin(k: int, where: list[tuple[str, str]], value: float) -> dict:
    phase, module = where[k]
    kind = "NaN" if math.isnan(value) else "Inf"
    if phase == "input":
        return {
            "phase": "input",
            "module": "",
            "op": None,
            "cause": f"The model's input already held {kind} before any module ran.",
        }
    if phase == "forward":
        return {
            "phase": "forward",
            "module": module,
            "op": None,
            "cause": f"The forward of {_named(module)} made {kind} from finite inputs "
            "(run `gradviz diagnose` for the operation and line).",
        }
    # A gradient reaching ``module``'s output: made by the backward of the module whose
    # output gradient came just before it (its consumer), or by the loss.
    before = [m for p, m in where[:k] if p == "backward"]
    producer = before[-1] if before else ""
    made_by = f"the backward of {_named(producer)}" if producer else "the loss's backward"
    return {
        "phase": "backward",
        "module": producer,
        "op": None,
        "cause": f"The gradient reaching the output of {_named(module)} was {kind}, made by "
        f"{made_by} (run `gradviz diagnose` for the operation and line).",
    }


def _named(module: str) -> str:
    """A module in a sentence: module 'encoder.0', or the model itself."""
    return f"module '{module}'" if module else "the model"


def _floating(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 0
