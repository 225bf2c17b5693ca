"""A Recorder's part in finding where a non-finite value started.

- ``watch(origin=True)``: ``OriginNotes`` keeps the module-level origin
  (``core.origin.modules``) of the first step that had one, and the ``StepSink`` adds it to
  the recording's ``first_nonfinite`` as ``origin`` when it writes that step;
- ``gradviz diagnose``: ``STEP_LISTENERS`` are told of every logged step before the
  recorder reads it (the tracer is looked at and re-armed there), and the recorder does its
  own work (its sums, the sink's writes) under ``untraced()``: those operations are not the
  user's and must never be blamed.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

#: Called as ``listener(recorder, step)`` at every logged step, before it is read
#: (``gradviz diagnose`` re-arms its tracer there).
STEP_LISTENERS: list = []
#: Context-manager factories under which the recorder does its own work (``gradviz
#: diagnose`` pauses its tracer there: the recorder's sums are not the user's).
UNTRACED: list = []

#: What a recording's ``first_nonfinite["origin"]`` holds.
ORIGIN_KEYS = ("phase", "module", "op", "cause", "step")


def untraced():
    """The context the recorder's own work runs in (no tracer's, where one is armed)."""
    return UNTRACED[-1]() if UNTRACED else _NO_TRACER


_NO_TRACER = contextlib.nullcontext()  # holds no state: entered by any number of blocks


class OriginNotes:
    """The first module-level origin seen in a run of ``model``, with its step.

    On the CPU the module outputs and gradients are kept through the step and summed only
    when the step's gradients or loss turned out non-finite; on an accelerator they are
    summed on the device, at the recorded steps only (see ``core.origin.modules``). Once
    the origin is found the hooks go: the steps after it cost nothing."""

    def __init__(self, model: nn.Module, device: torch.device, *, single: bool = True) -> None:
        from gradviz.core.origin.modules import ModuleOrigin  # only where origin is asked for

        # ``single``: one process (in a distributed run a bias's gradient is averaged over
        # the ranks, so it is not read as this rank's output gradient).
        self._origin = ModuleOrigin(model, lazy=device.type == "cpu", read_biases=single)
        self.found: dict | None = None

    def note(
        self, number: int, read: bool, loss=None, suspect: bool | None = None, read_next=True
    ) -> None:
        """End step ``number``: remember its origin if it is the first one and ``read``
        (the recorder reads on the CPU at every step, on an accelerator at the steps of the
        interval, which synchronise anyway); otherwise only forget the step's tensors.
        ``suspect``: whether the step's gradients or loss are non-finite (False: the step is
        clean and nothing is summed; None: unknown, everything is). ``loss`` (the step's
        logged loss, if any) tells a loss that was already non-finite from one whose
        backward made the first bad gradient. ``read_next``: whether the next step will be
        read (the hooks sleep through a step that will not)."""
        found = self._origin.step_end(read=read and self.found is None, suspect=suspect)
        if found is not None:
            self.found = {**_outside_modules(found, loss), "step": number}
            self._origin.remove()  # only the first origin is kept: nothing more to look at
        elif self.found is None:
            self._origin.armed = read_next

    def forget(self, read_next: bool = True) -> None:
        """Drop the step's tensors unread (a step GradScaler skipped: its scaled gradients
        overflowed, which is no module's doing)."""
        self._origin.step_end(read=False)
        if self.found is None:
            self._origin.armed = read_next

    def attach(self, first: dict | None) -> None:
        """Add the origin to the run's ``first`` non-finite gradient where it was seen by
        that step (a later one started elsewhere)."""
        found = self.found
        if first is not None and found is not None and found["step"] <= first["step"]:
            first["origin"] = {k: found[k] for k in ORIGIN_KEYS}

    def remove(self) -> None:
        self._origin.remove()


def _outside_modules(found: dict, loss) -> dict:
    """Every module's forward was finite and the first bad gradient came from outside them:
    where the logged loss is itself non-finite, the value started in the loss's forward
    (outside every module), not in a backward."""
    if found["phase"] != "backward" or found["module"] or loss is None:
        return found
    import math

    value = float(loss.detach().float().sum()) if hasattr(loss, "detach") else float(loss)
    if math.isfinite(value):
        return found
    kind = "NaN" if math.isnan(value) else "Inf"
    return {
        **found,
        "phase": "forward",
        "cause": f"The loss was {kind} though every module's output was finite: it started "
        "in the loss's computation, outside the modules (run `gradviz diagnose` for the "
        "operation and line).",
    }
