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

#: Why a bad step's origin is not known where running it again made nothing non-finite.
_RAN_CLEAN = (
    "run again, the step made no NaN or Inf: it came from outside the model's forward and "
    "backward, or that forward is not the same twice"
)


def untraced():
    """The context the recorder's own work runs in (no tracer's, where one is armed)."""
    return UNTRACED[-1]() if UNTRACED else _NO_TRACER


_NO_TRACER = contextlib.nullcontext()  # holds no state: entered by any number of blocks

#: Whether a loop that allows it has its bad step replayed rather than every step noted
#: (see ``OriginNotes``; off only to compare the two ways).
REPLAY = True


class OriginNotes:
    """The first module-level origin seen in a run of ``model``, with its step.

    Found one of two ways (see ``core.origin``):

    - notes (``modules.ModuleOrigin``): every module's output and the gradient reaching it
      are noted at every step. On the CPU they are kept through the step and summed only
      when the step's gradients or loss turned out non-finite; on an accelerator they are
      summed on the device, at the recorded steps only;
    - replay (``replay.StepCalls``, on the CPU in one process): a step keeps only its calls
      of the model, and one that went bad is run again with every module noted. A run
      starts with notes; after a clean step whose parameters were still those of its
      forward when it was logged (``rec.log`` before the optimizer's step), and whose
      forward changed nothing of the model's own plain state (a call counter, a generator of
      its own), the notes go; otherwise they stay for good. A bad step that does not run
      again as it ran (its replayed outputs differ, or it runs again clean) has no origin:
      ``unknown`` says why, and the notes come back for the steps after it.

    Where the notes name a bad step's origin and the step can be run again, it runs again
    under the tracer too, which names the operation, its line and its cause (``verdicts``).
    A parameter that held the value is the optimizer's doing at the step of the ``step()``
    that last wrote it (``writes``). Where the notes cannot decide, ``unknown`` says why.

    Once the origin is found everything goes: the steps after it cost nothing."""

    def __init__(self, model: nn.Module, device: torch.device, *, single: bool = True) -> None:
        from gradviz.core.origin.modules import ModuleOrigin  # only where origin is asked for
        from gradviz.core.origin.replay import StepCalls
        from gradviz.core.origin.writes import OptimizerWrites

        lazy = device.type == "cpu"
        self._model = model
        # ``single``: one process (in a distributed run a bias's gradient is averaged over
        # the ranks, so it is not read as this rank's output gradient, and a forward run
        # again would wait for the other ranks' backward).
        self._notes_args = {"lazy": lazy, "read_biases": single}
        self._notes: ModuleOrigin | None = ModuleOrigin(model, **self._notes_args)
        replays = REPLAY and lazy and single
        self._calls: StepCalls | None = StepCalls(model) if replays else None
        self._writes: OptimizerWrites | None = OptimizerWrites(model)
        self._clean = False  # the last step was read and found clean
        self._done = False  # the first bad step was looked at: nothing more is
        self.found: dict | None = None
        #: {"step", "why"}: a bad step whose origin is not known (it could not be run again,
        #: or the notes do not decide).
        self.unknown: dict | None = None

    @property
    def way(self) -> str:
        """How the origin is being looked for: "notes" or "replay"."""
        return "notes" if self._notes is not None else "replay"

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
        if self._done:
            return
        if self._notes is not None:
            found = self._notes.step_end(read=read, suspect=suspect)
            if found is not None:
                found = self._traced(found)
            elif read and suspect:
                found = self._unseen(number)
        else:
            found = self._replayed(number) if read and suspect is not False else None
        if found is not None and "unknown" in found:
            self._decided(number, None, found["unknown"])
            return
        if found is None:
            self._choose_way()
            self._clean = read and suspect is False
            if self._writes is not None:
                self._writes.logged(number)
        if found is not None:
            self._decided(number, found, loss=loss)
        elif self._notes is not None:
            self._notes.armed = read_next

    def _decided(self, number: int, found: dict | None, why: str = "", loss=None) -> None:
        """Step ``number`` is the first bad one: keep its origin (``found``), or why it is
        not known; nothing more is looked at."""
        from gradviz.core.origin.verdicts import optimizer_wrote

        if found is None:
            if self.unknown is None:
                self.unknown = {"step": number, "why": why}
        else:
            found = optimizer_wrote(found, self._model, self._writes, number, self._clean)
            self.found = {"step": number, **_outside_modules(found, loss)}
        self._done = True
        self.remove()  # only the first origin is kept: nothing more to look at

    def _traced(self, verdict: dict) -> dict:
        """The notes' ``verdict``, or what the tracer sees of the step run again where it
        can be (see ``verdicts.refined``)."""
        from gradviz.core.origin.replay import NotReplayable
        from gradviz.core.origin.tracer import NonfiniteTracer
        from gradviz.core.origin.verdicts import refined

        calls = self._calls
        if calls is None or calls.why_not() is not None:
            return verdict
        try:
            traced = calls.trace_again(NonfiniteTracer())
        except NotReplayable:
            return verdict
        except Exception:  # noqa: BLE001 a watch must not stop the loop it watches
            return verdict
        return refined(verdict, traced)

    def _unseen(self, number: int) -> dict | None:
        """A bad step whose noted values were all finite: run again where it can be (the
        parameters' gradients then tell a NaN made inside a module's backward), else its
        origin is not known."""
        if self._calls is not None and self._calls.why_not() is None:
            return self._replayed(number)
        return {
            "unknown": "every module's output and the gradient reaching it were finite, and "
            "the step could not be run again: the value started inside a module's backward "
            "(reaching only its parameters), or outside the model's forward and backward"
        }

    def _replayed(self, number: int) -> dict | None:
        """The origin of step ``number``, from running it again (None where it is clean, or
        cannot be run again as it ran: then why is kept in ``unknown``)."""
        from gradviz.core.origin.modules import ModuleOrigin
        from gradviz.core.origin.replay import NotReplayable

        try:
            found = self._calls.replay(lambda m: ModuleOrigin(m, lazy=True, read_biases=False))
        except NotReplayable as exc:
            self._not_known(number, f"the step could not be run again ({exc})")
            return None
        except Exception as exc:  # a watch must not stop the loop it watches
            self._not_known(number, f"the step could not be run again ({type(exc).__name__})")
            return None
        if found is None:  # a bad step that runs again clean
            self._not_known(number, _RAN_CLEAN)
            return None
        return self._traced(found)

    def _not_known(self, number: int, why: str) -> None:
        """Step ``number`` was bad and its origin is not known: keep why (the first such
        step's), and take the notes for the steps after it."""
        if self.unknown is None:
            self.unknown = {"step": number, "why": why}
        self._notes_for_good()

    def _choose_way(self) -> None:
        """After a step taken with notes that found no origin: go over to replaying where
        the parameters were still those of its forwards when it was logged and the forwards
        changed nothing of the model's own plain state, stay with notes for good where not
        (a step without a call of the model tells nothing). The step's calls are let go."""
        calls = self._calls
        if calls is None:
            return
        if self._notes is not None and calls.called:
            if calls.stateful or calls.why_not() is not None:
                self._notes_for_good()
                return
            self._notes.remove()
            self._notes = None
            calls.trust()
        calls.clear()

    def _notes_for_good(self) -> None:
        from gradviz.core.origin.modules import ModuleOrigin

        self._calls.remove()
        self._calls = None
        if self._notes is None:
            self._notes = ModuleOrigin(self._model, **self._notes_args)

    def forget(self, read_next: bool = True) -> None:
        """Drop the step's tensors unread (a step GradScaler skipped: its scaled gradients
        overflowed, which is no module's doing)."""
        if self._done:
            return
        if self._notes is not None:
            self._notes.step_end(read=False)
            if self.found is None:
                self._notes.armed = read_next
        if self._calls is not None:
            self._calls.clear()
        if self._writes is not None:
            self._writes.skipped()

    def attach(self, first: dict | None) -> None:
        """Add the origin to the run's ``first`` non-finite gradient where it was seen by
        that step (a later one started elsewhere)."""
        from gradviz.core.origin.verdicts import ORIGIN_KEYS

        found, unknown = self.found, self.unknown
        if unknown is not None and found is not None and unknown["step"] < found["step"]:
            found = None  # a bad step before it whose origin is not known: that one counts
        if first is not None and found is not None and found["step"] <= first["step"]:
            first["origin"] = {k: found[k] for k in ORIGIN_KEYS if k in found}
        elif first is not None and unknown is not None and unknown["step"] <= first["step"]:
            first["origin_unknown"] = unknown["why"]

    def remove(self) -> None:
        if self._notes is not None:
            self._notes.remove()
        if self._calls is not None:
            self._calls.remove()
        if self._writes is not None:
            self._writes.remove()
            self._writes = None


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
