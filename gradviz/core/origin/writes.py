"""Which optimizer ``step()`` last wrote a watched model's parameters before a step's forward.

A parameter that holds NaN or Inf when a step's forward runs brought the value in; where
nothing wrote it between an optimizer's ``step()`` and that forward (its version counter is
the one that ``step()`` left), the step whose ``step()`` that was is where it started: the
optimizer's, at that step, not the forward's. Steps are numbered as they are logged: a
``step()`` that runs after a step's ``rec.log`` and before the next forward is the logged
step's (a loop that logs, then steps); one that runs after a forward is the step logged
next (a loop that steps, then logs).

What it costs while armed: a Python call per forward of the model and per ``step()`` of an
optimizer (any in the process; those that update none of the model's parameters are
passed over), each reading the parameters' version counters (no tensor is read).
"""

from __future__ import annotations

import operator

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from gradviz.core.common.module_calls import note_each_call

_VERSION = operator.attrgetter("_version")


class OptimizerWrites:
    """The last ``step()`` before each forward of ``model`` (see the module)."""

    def __init__(self, model: nn.Module) -> None:
        self._params = list(model.parameters())
        self._index = {id(p): k for k, p in enumerate(self._params)}
        self._names = {id(p): name for name, p in model.named_parameters()}
        self._updates: dict[int, bool] = {}  # id(optimizer) -> it updates the model's
        self._logged: int | None = None  # the last step logged
        self._forward_seen = False  # since the last step logged
        # The last step() of an optimizer of the model: [its step (None until logged),
        # the parameters' versions after it]; and as it was when this step's forward began.
        self._last: list | None = None
        self._before_forward: list | None = None
        self._at_forward: tuple[int, ...] = ()
        self._handles = [
            register_optimizer_step_post_hook(self._on_step),
            *note_each_call(model, _nothing, self._on_forward),
        ]

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _on_forward(self, _module, _args) -> None:
        if not self._forward_seen and torch.is_grad_enabled():  # (not an evaluation)
            self._forward_seen = True
            self._before_forward = self._last
            self._at_forward = tuple(map(_VERSION, self._params))

    def _on_step(self, optimizer, *_args) -> None:
        updates = self._updates.get(id(optimizer))
        if updates is None:
            updates = self._updates[id(optimizer)] = any(
                id(p) in self._index for group in optimizer.param_groups for p in group["params"]
            )
        if updates:
            number = None if self._forward_seen else self._logged
            self._last = [number, tuple(map(_VERSION, self._params))]

    def logged(self, number: int | None) -> None:
        """Step ``number`` was logged (a ``step()`` since its forward is numbered so)."""
        if self._last is not None and self._last[0] is None:
            self._last[0] = number
        self._logged, self._forward_seen = number, False

    def skipped(self) -> None:
        """A step was logged as skipped (GradScaler's: no ``step()`` ran), numbered after
        the last one."""
        self.logged(None if self._logged is None else self._logged + 1)

    def writer(self, param) -> int | None:
        """The step whose optimizer ``step()`` was the last write to ``param`` before this
        step's forward, or None where that is not known (no ``step()`` seen, or something
        else wrote it after)."""
        last, k = self._before_forward, self._index.get(id(param))
        if last is None or last[0] is None or k is None or not self._at_forward:
            return None
        return last[0] if last[1][k] == self._at_forward[k] else None

    def name_of(self, param) -> str:
        return self._names.get(id(param), "")


def _nothing(*_args) -> None:
    return None
