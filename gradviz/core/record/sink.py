"""Where a Recorder's steps go, so that no logged step is lost.

A recorded step waits, still on the device, for the next ``log`` (which knows the update
the optimizer applied after it). A ``StepSink`` owns that waiting step and the writer, and
outlives the Recorder that feeds it:

- a step that no further ``log`` follows within ``IDLE_S`` is written by the sink's own
  thread, so every logged step is on disk within ``IDLE_S + BackgroundWriter.FLUSH_S``
  (0.4 s); what comes later for it (its update size, measured at the next step; a loss
  or pictures given after the optimizer's step recorded it) amends it. The logged scalars
  (``scalars.ScalarBuffer``) wait here too and are written the same way;
- the sinks still open are kept in a module registry (strong references: not garbage
  collection's luck): at interpreter exit, after an uncaught exception, on SIGTERM, or
  when the Recorder is collected without ``close()``, the sink writes what waits and
  closes the recording (``complete`` true, ``ended`` saying how).

Only SIGKILL (or a crash of the interpreter) can lose the steps of the last 0.4 s.
"""

from __future__ import annotations

import atexit
import math
import os
import signal
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field

import numpy as np
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.record import layout as L
from gradviz.core.record import stats
from gradviz.core.record.origin_notes import untraced
from gradviz.core.record.scalars import ScalarBuffer, Values
from gradviz.core.record.writer import BackgroundWriter

#: A recorded step that no further ``log`` follows within this time is written by itself.
IDLE_S = 0.15
#: How long a signal handler waits for a step being recorded on the main thread.
SIGNAL_LOCK_S = 1.0
#: How long the exit hook waits for a step being recorded on another thread.
EXIT_LOCK_S = 10.0


@dataclass
class Pending:
    """A recorded step whose statistics are still on the device (written at the next step,
    when the update the optimizer applied after it is known, or after ``IDLE_S``)."""

    step: int
    loss: torch.Tensor | None
    rows: torch.Tensor  # (T, ROW_WIDTH) float64
    images: dict[str, torch.Tensor]  # name -> (H, W)
    names: list[str]  # the watched tensors, in the rows' order
    params: list[torch.Tensor | None]  # each row's parameter (None: no update tracked)
    before: list[torch.Tensor | None]  # parameter values at the step (for the update norm)
    first_bad: torch.Tensor  # (3,) float64: step, tensor, sum of the first non-finite step
    host_images: dict[str, np.ndarray] = field(default_factory=dict)  # added by add_images
    at: float = field(default_factory=time.monotonic)


class StepSink:
    """The pending step, the logged scalars, the writer and the lock that orders them (see
    the module). ``local`` (set under DDP): the rank's own bucket checks, whose device record
    of the first non-finite step travels with each recorded step's host copy. ``origin``
    (set by ``watch(origin=True)``): the module-level origin that joins the first non-finite
    gradient when its step is written."""

    def __init__(self, writer: BackgroundWriter) -> None:
        self.writer = writer
        self.lock = threading.Lock()
        self.pending: Pending | None = None
        self.scalars = ScalarBuffer(writer)
        self.local = None  # a ddp.LocalChecks under DDP
        self.origin = None  # an origin_notes.OriginNotes under watch(origin=True)
        self.unamended: Pending | None = None  # written before its update size was known
        self.closed = False
        self._released = False  # the Recorder is gone: close from the idle thread
        self._wake = threading.Condition(self.lock)
        _OPEN[id(self)] = self
        _install_exit_handlers()
        threading.Thread(
            target=self._watch_idle, name="gradviz-recording-idle", daemon=True
        ).start()

    # ---- called with ``lock`` held ---------------------------------------------------------
    def ensure_open(self) -> None:
        """Refuse a step or a number once the recording was closed (at exit, on a signal)."""
        if self.closed:
            raise GradvizError("This recording was closed; start a new gradviz.watch.")

    def add_scalars(self, number: int, values: Values) -> None:
        """Buffer the scalars of step ``number`` (written within ``IDLE_S`` of the last)."""
        waiting = bool(self.scalars)
        self.scalars.add(number, values)
        if not waiting and self.scalars:
            self._wake.notify()  # the idle thread now has a deadline

    def hold(self, pending: Pending) -> None:
        """``pending`` waits for the next step (or ``IDLE_S``)."""
        self.pending = pending
        self._wake.notify()

    def write_pending(self, update_known: bool = True) -> None:
        """Write the pending step: one copy to the host. With ``update_known`` its update
        norms are measured now (the optimizer has stepped); otherwise they stay NaN until
        ``amend`` (the next step) measures them. The recorder's own operations: untraced."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        with untraced(), self.writer.together():
            self._write(pending, update_known)

    def _write(self, pending: Pending, update_known: bool) -> None:
        rows = pending.rows
        if update_known:
            _fill_update_norms(rows, pending)
        loss = pending.loss
        if loss is None:  # a fill on the device, not a copy from the host
            loss = torch.full((), math.nan, dtype=rows.dtype, device=rows.device)
        parts = [rows.reshape(-1), loss.reshape(1).to(rows), pending.first_bad.to(rows)]
        if self.local is not None:  # the device's record of the first local non-finite step
            parts.append(self.local.device_first_step().to(rows))
        parts += [image.reshape(-1).to(rows) for image in pending.images.values()]
        self.scalars.flush()  # the copy below synchronises anyway
        host = torch.cat(parts).cpu().numpy()  # the one synchronisation of a recorded step
        n_rows = rows.numel()
        host_rows = host[:n_rows].reshape(rows.shape)
        loss_value, first_bad = float(host[n_rows]), host[n_rows + 1 : n_rows + 4]
        images, offset = {}, n_rows + 4
        if self.local is not None:
            self.report_local(float(host[offset]))
            offset += 1
        for name, image in pending.images.items():
            flat = host[offset : offset + image.numel()]
            offset += image.numel()
            images[name] = flat.reshape(image.shape).astype(
                np.uint8 if image.dtype == torch.uint8 else np.float32
            )
        images.update(pending.host_images)
        first = first_nonfinite(pending.step, pending.names, host_rows, first_bad)
        if self.origin is not None:
            self.origin.attach(first)
        self.writer.append(pending.step, loss_value, host_rows, images, first)
        if not update_known:
            self.unamended = pending

    def report_local(self, device_step: float | None = None) -> None:
        """Write, once, the first step this rank's own gradients were non-finite."""
        first = self.local.report(device_step)
        if first is not None:
            self.writer.set_meta_once("local_first_nonfinite", first)

    def amend(self) -> None:
        """Measure the update size of the step written early and correct its row."""
        pending, self.unamended = self.unamended, None
        if pending is None:
            return
        with untraced():
            self._amend(pending)

    def _amend(self, pending: Pending) -> None:
        filled = pending.rows.new_full((len(pending.names), 4), math.nan)
        _fill_update_norms(filled, pending)
        norms = filled[:, 3].cpu().numpy()
        if not np.isnan(norms).all():
            self.writer.amend(pending.step, norms=norms)

    def add_loss(self, step: int, loss: torch.Tensor | None) -> None:
        """The loss of ``step``, given after the step was recorded (``log`` after the
        optimizer's step recorded it)."""
        if self.pending is not None and self.pending.step == step:
            self.pending.loss = loss
        elif loss is not None and self.unamended is not None and self.unamended.step == step:
            self.writer.amend(step, loss=float(loss))

    def add_images(self, step: int, images: dict[str, np.ndarray]) -> bool:
        """Attach ``images`` to ``step`` if it is the step just recorded."""
        if self.pending is not None and self.pending.step == step:
            self.pending.host_images.update(images)
            return True
        if self.unamended is not None and self.unamended.step == step:
            self.writer.amend(step, images=dict(images))
            return True
        return False

    def close(self, ended: str = "close", update_known: bool = True) -> None:
        """Write what waits and mark the recording complete; ``ended`` says how it ended."""
        if self.closed:
            return
        self.write_pending(update_known)
        self.scalars.flush()
        self.amend()
        self.writer.close(ended)
        # Last: the exit hook waits (on the lock) for a close under way in another thread.
        self.closed = True
        _OPEN.pop(id(self), None)
        self._wake.notify()

    # ---- from other threads ----------------------------------------------------------------
    def release(self) -> None:
        """The Recorder was collected without ``close()``: close from the idle thread (the
        collector may run on any thread, even the writer's, which close waits for)."""
        self._released = True
        if self.lock.acquire(blocking=False):
            try:
                self._wake.notify()
            finally:
                self.lock.release()

    def close_now(self, ended: str, wait_s: float) -> None:
        """Close from outside the recording thread (exit hook, signal handler); waits at
        most ``wait_s`` for a step being recorded, then closes without it."""
        got = self.lock.acquire(timeout=wait_s)
        try:
            if got:
                self.close(ended, update_known=ended in ("exit", "collected"))
            elif not self.closed:  # the step being recorded is lost, every other is kept
                self.writer.close(ended)
                self.closed = True
                _OPEN.pop(id(self), None)
        finally:
            if got:
                self.lock.release()

    def _watch_idle(self) -> None:
        with self.lock:
            while not self.closed:
                if self._released:
                    self.close("collected")
                    return
                due = self._due()
                if due is None:
                    self._wake.wait(1.0)  # also looks at _released now and then
                    continue
                left = due - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                self.write_pending(update_known=False)
                self.scalars.flush()

    def _due(self) -> float | None:
        """When the idle thread writes by itself: ``IDLE_S`` after the pending step was
        held or the last scalars were logged, whichever came first (None: nothing waits)."""
        since = [self.pending.at] if self.pending is not None else []
        since += [self.scalars.last_added] if self.scalars else []
        return min(since) + IDLE_S if since else None


def _fill_update_norms(rows: torch.Tensor, pending: Pending) -> None:
    """Column 3 of ``rows``: the norm of each parameter's change since ``pending``'s step."""
    moved, steps = [], []
    for t, (param, before) in enumerate(zip(pending.params, pending.before)):
        now = _local(param)
        if before is not None and now is not None and now.shape == before.shape:
            steps.append(before.sub_(now.detach()))  # our own copy: now the update
            moved.append(t)
    if len(moved) == len(rows):
        rows[:, 3] = stats.norms(steps)
    elif moved:
        rows[torch.tensor(moved, device=rows.device), 3] = stats.norms(steps)
    # The copies are the update now: never subtract twice.
    pending.before = [None] * len(pending.before)


def first_nonfinite(step: int, names, rows: np.ndarray, first_bad) -> dict | None:
    """The run's first non-finite gradient as far as this recorded step tells."""
    if first_bad[0] < 0:
        return None
    tensor = names[int(first_bad[1])]
    if int(first_bad[0]) == step:  # recorded in full: the exact entry and its kind
        hist = rows[:, len(L.STAT_COLUMNS) :]
        for t, name in enumerate(names):
            _, _, nan, pos_inf, neg_inf = L.counts_from_histogram(hist[t])
            kind = L.bad_kind(nan, pos_inf, neg_inf)
            if kind is not None:
                index = int(rows[t, L.STAT_COLUMNS.index("first_bad_index")])
                return {"step": step, "tensor": name, "index": index, "kind": kind}
    total = first_bad[2]
    kind = "nan" if math.isnan(total) else ("+inf" if total > 0 else "-inf")
    return {"step": int(first_bad[0]), "tensor": tensor, "index": None, "kind": kind}


def _local(t: torch.Tensor | None) -> torch.Tensor | None:
    """This rank's shard of a sharded tensor (FSDP's DTensor parameters), else ``t``."""
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t


def watch_owner(owner: object, sink: StepSink) -> None:
    """Close ``sink`` when ``owner`` (its Recorder) is collected without ``close()``."""
    weakref.finalize(owner, sink.release).atexit = False


# ---- every open sink, closed at exit and on SIGTERM ----------------------------------------
_OPEN: dict[int, StepSink] = {}
_exit_hook_installed = False
_signal_handler_installed = False


def _close_all(ended: str, wait_s: float) -> None:
    for sink in list(_OPEN.values()):
        sink.close_now(ended, wait_s)


def _close_at_exit() -> None:
    # An uncaught exception (KeyboardInterrupt too) was printed before exit hooks run.
    failed = getattr(sys, "last_value", None) is not None
    _close_all("exception" if failed else "exit", EXIT_LOCK_S)


def _on_sigterm(signum, frame) -> None:
    """Close every recording, then die of SIGTERM as the process would have."""
    _close_all("SIGTERM", SIGNAL_LOCK_S)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_exit_handlers() -> None:
    """After the first writer started zarr's thread pool: the exit hook (zarr's pool stops
    at the threading module's exit hooks, which run before atexit's and in reverse order:
    one registered after zarr's runs before it), and, from the main thread, a SIGTERM
    handler where nobody else catches it (Python's default dies without exit hooks)."""
    global _exit_hook_installed, _signal_handler_installed
    if not _exit_hook_installed:
        _exit_hook_installed = True
        getattr(threading, "_register_atexit", atexit.register)(_close_at_exit)
    if _signal_handler_installed or threading.current_thread() is not threading.main_thread():
        return
    _signal_handler_installed = True
    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError, AttributeError):  # no signals here (an embedded interpreter)
        pass
