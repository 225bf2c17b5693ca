"""The one model of a run on the Qt side: ``RunSession`` (a QObject, no widgets).

A session owns the run's state (``RunState``); what it shows (the latest snapshot, the one
on screen and the pinned snapshot of the first non-finite gradient) is kept by its
``OnScreen``, and its ``WorkerSlot`` keeps the generation counter and the worker threads.
Everything that shows a run (status bar, toolbar, views, "Why NaN here?", the comparison's
columns) reads the session or listens to its signals; nobody reads another object's
fields.

Snapshots reach the views through one path, ``show(snapshot)``, whether they come from a
live worker or from a file: ``snapshotShown`` then carries the snapshot on screen.

Every run (and every Reset) gets a new generation; snapshots of older generations are
dropped. The worker is told things only through its thread-safe flags, and each drawn
frame is acknowledged after the queued paint, so the worker paces itself to the screen.
All slots here run on the GUI thread.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig
from gradviz.gui.run.on_screen import OnScreen
from gradviz.gui.run.worker import FitWorker
from gradviz.gui.run.worker_slot import WorkerSlot

log = logging.getLogger(__name__)


class RunState(enum.Enum):
    """Where a run stands; ``label`` is what the status bar says."""

    LOADING = "loading torch…"  # the compute engine is still being imported
    UNAVAILABLE = "torch unavailable"
    IDLE = "idle"  # nothing to show yet
    READY = "ready"  # step 0 is on screen; Start runs it
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"

    @property
    def label(self) -> str:
        return self.value

    @property
    def loaded(self) -> bool:
        """The compute engine is there (runs can start)."""
        return self not in (RunState.LOADING, RunState.UNAVAILABLE)

    @property
    def going(self) -> bool:
        """A run that has been started and has not ended (closing it loses work)."""
        return self in (RunState.RUNNING, RunState.PAUSED)


class RunSession(QObject):
    """One run at a time: its state, its worker and its snapshots.

    ``run_factory`` builds the core run from a FitConfig (on the worker thread; None: the
    real DistanceFitRun). A session made with ``available=False`` waits for
    ``set_available`` (the lab imports torch behind the window first).
    """

    stateChanged = Signal(object)  # RunState
    snapshotShown = Signal(object)  # Snapshot now on screen (live, pinned or from a file)
    cleared = Signal()  # a new generation: nothing is on screen
    pinnedChanged = Signal(object)  # Snapshot of the first non-finite gradient, or None
    failed = Signal(str, str)  # plain sentence, details
    networkReady = Signal(object)  # NetworkCopy of the current run's coordinate network
    cellValuesReady = Signal(object)  # worker.CellValues of the current run, on request
    workerRetired = Signal(int)  # a worker, current or stopped, has ended (its generation)

    def __init__(
        self,
        run_factory: Callable[[FitConfig], Any] | None = None,
        available: bool = True,
        frame_rate: float = 30.0,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.run_factory = run_factory
        self.frame_rate = frame_rate
        self._state = RunState.IDLE if available else RunState.LOADING
        self._config: FitConfig | None = None
        self._lr_now: float | None = None  # set while running: the run's rate since then
        self._screen = OnScreen()
        self._steps_per_second = float("nan")
        self._failure: str | None = None
        self._held = False
        self._closed = False
        self._workers = WorkerSlot(self)
        self._connect_workers()

    # ---- what the session knows (read-only) -------------------------------------------------
    @property
    def state(self) -> RunState:
        return self._state

    @property
    def generation(self) -> int:
        return self._workers.generation

    @property
    def config(self) -> FitConfig | None:
        """The settings of the current run (None before the first)."""
        return self._config

    @property
    def settings_now(self) -> FitConfig | None:
        """The settings the current run runs with now: ``config`` with the learning rate
        changed while it ran (``config`` stays what it started from, as a replay needs)."""
        if self._config is None or self._lr_now is None:
            return self._config
        return dataclasses.replace(self._config, lr=self._lr_now)

    @property
    def latest(self) -> Snapshot | None:
        """The newest snapshot of the current run."""
        return self._screen.latest

    @property
    def pinned(self) -> Snapshot | None:
        """The snapshot of the run's first non-finite gradient, once there is one."""
        return self._screen.pin.snapshot

    @property
    def first_nonfinite_grad_step(self) -> int | None:
        """The step (0-based, as the CLI counts) whose gradients were first non-finite:
        0 when step 0's gradients already are, before any step has used them."""
        return self._screen.pin.first_nonfinite_grad_step(self._screen.latest)

    @property
    def shown(self) -> Snapshot | None:
        """The snapshot on screen (the latest, the pinned one, or one from a file)."""
        return self._screen.shown

    @property
    def failure(self) -> str | None:
        """The sentence that ended the current run in failure (None unless FAILED)."""
        return self._failure if self._state is RunState.FAILED else None

    @property
    def viewing_pinned(self) -> bool:  # showing the pinned snapshot (until show_live)
        return self._screen.pin.viewing

    @property
    def viewing_older(self) -> bool:
        """Showing an older step of the current run than its newest (chosen on the
        timeline), not the pinned first NaN."""
        return self._screen.viewing_older(self.generation)

    @property
    def steps_per_second(self) -> float:
        """Wall-clock speed while running; NaN when not running or not yet measured."""
        return self._steps_per_second if self._state is RunState.RUNNING else float("nan")

    @property
    def available(self) -> bool:
        """Whether runs can start (torch loaded, not held by a diagnosis, not closed)."""
        return not self._closed and not self._held and self._state.loaded

    @property
    def worker(self) -> FitWorker | None:
        """The current run's worker while it runs (its thread-safe commands only)."""
        return self._workers.current

    def workers(self) -> list[FitWorker]:
        """Every worker whose thread is still held (the current one and retiring ones):
        ``len(workers())`` threads."""
        return self._workers.workers()

    # ---- commands ---------------------------------------------------------------------------
    def set_available(self, available: bool) -> None:
        """The compute engine has loaded (True) or cannot load (False)."""
        if self._closed:
            return
        self._set_state(RunState.IDLE if available else RunState.UNAVAILABLE)

    def set_held(self, held: bool) -> None:
        """While held (a diagnosis owns process-wide anomaly mode) no run may start or step."""
        self._held = held
        self.stateChanged.emit(self._state)

    @Slot()
    def start(self, config: FitConfig | None = None) -> None:
        """Run: resume a paused or ready run, else start ``config`` from step 0."""
        if not self.available:
            return
        self.show_live()
        worker = self.worker
        if worker is not None and worker.paused:
            worker.resume()
            self._set_state(RunState.RUNNING)
        elif worker is None and config is not None:
            self._launch(config, paused=False)

    @Slot()
    def pause(self) -> None:
        if self.worker is not None and self._state is RunState.RUNNING:
            self.worker.pause()
            self._set_state(RunState.PAUSED)

    def step(self, config: FitConfig | None = None) -> None:
        """Pause (if running) and take exactly one step (of ``config`` if nothing runs)."""
        if not self.available or (self.worker is None and config is None):
            return
        self.show_live()
        if self.worker is None:
            self._launch(config, paused=True)  # type: ignore[arg-type]
        self.worker.pause()  # type: ignore[union-attr]
        self.worker.step_once()  # type: ignore[union-attr]
        self._set_state(RunState.PAUSED)

    @Slot()
    def stop(self) -> None:
        """End the run; its last state stays on screen."""
        if self.worker is not None:
            self._workers.retire()
            self._set_state(RunState.STOPPED)

    def reset(self, config: FitConfig | None = None) -> None:
        """A new generation: the views are cleared, and with ``config`` its step 0 is shown,
        ready to start."""
        self._workers.clear()
        self._screen.clear()
        self._steps_per_second = float("nan")
        self.cleared.emit()
        self.pinnedChanged.emit(None)
        if config is not None and self.available:
            self._launch(config, paused=True)
        elif self._state.loaded:
            self._set_state(RunState.IDLE)

    def request_cell(self, snapshot: Snapshot, i: int, j: int) -> bool:
        """Ask the worker for the exact values of entry (i, j) of ``snapshot`` (a
        display-sized one), answered by ``cellValuesReady``; False when no worker of its
        run can answer (the views keep the display value, marked approximate)."""
        worker = self.worker
        if worker is None or snapshot.generation != self.generation:
            return False
        worker.request_cell(i, j, snapshot.step, pinned=self._screen.pin.is_exact(snapshot))
        return True

    def set_lr(self, lr: float) -> None:
        """Change the running run's learning rate (it takes effect before the next step);
        ``settings_now`` says the rate it now runs with."""
        if self.worker is not None:
            self.worker.set_lr(lr)
            self._lr_now = lr

    def set_frame_rate(self, frame_rate: float) -> None:
        self.frame_rate = frame_rate
        if self.worker is not None:
            self.worker.set_frame_rate(frame_rate)

    def request_network(self) -> bool:
        """Ask the running worker for a copy of its network; False when nothing runs."""
        if self.worker is None:
            return False
        self.worker.request_network()
        return True

    def join(self, timeout_s: float = 30.0) -> bool:
        """Stop every worker and join its thread; True when all threads have ended."""
        self.stop()
        return self._workers.join(timeout_s)

    def shutdown(self, timeout_s: float = 30.0) -> bool:
        """``join``, and no run starts afterwards (the app is closing)."""
        self._closed = True
        return self._workers.close(timeout_s)

    # ---- what is on screen --------------------------------------------------------------------
    def show(self, snapshot: Snapshot) -> None:
        """Put ``snapshot`` on screen: the one path by which the views are fed."""
        self._screen.shown = snapshot
        self.snapshotShown.emit(snapshot)

    def show_first_nan(self) -> None:
        """Show the pinned snapshot until ``show_live``."""
        pinned = self._screen.view_pinned()
        if pinned is not None:
            self.show(pinned)
            self.stateChanged.emit(self._state)

    def show_live(self) -> None:
        """Show the run's newest step instead of the pinned first NaN or an older step
        chosen on the timeline. Start and Step call it first: a run goes on from its newest
        step, so that is on screen at once, not only at the run's next frame."""
        if self._screen.leave_for_latest(self.generation):
            if self._screen.latest is not None:
                self.show(self._screen.latest)
            self.stateChanged.emit(self._state)

    # ---- the worker (GUI-thread slots) ----------------------------------------------------------
    def _connect_workers(self) -> None:
        workers = self._workers
        workers.snapshotReady.connect(self._on_snapshot)
        workers.firstNanPinned.connect(self._on_first_nan_pinned)
        workers.failed.connect(self._on_worker_failed)
        workers.runEnded.connect(self._on_run_ended)
        workers.networkReady.connect(self.networkReady)
        workers.cellValuesReady.connect(self.cellValuesReady)
        workers.workerRetired.connect(self.workerRetired)

    def _launch(self, config: FitConfig, paused: bool) -> None:
        self._config, self._lr_now = config, None
        self._set_pinned(None)
        self._workers.launch(config, paused, self.frame_rate, self.run_factory)
        self._set_state(RunState.READY if paused else RunState.RUNNING)

    @Slot(object, float)
    def _on_snapshot(self, snapshot: Snapshot, steps_per_second: float) -> None:
        """A frame of the current run (the worker slot drops older generations')."""
        if steps_per_second == steps_per_second:  # not NaN
            self._steps_per_second = steps_per_second
        still = self._state in (RunState.PAUSED, RunState.STOPPED)
        pin, show = self._screen.frame(snapshot, self.generation, still)
        if pin:
            self._set_pinned(snapshot)
        if show:
            self.show(snapshot)

    @Slot(object)
    def _on_first_nan_pinned(self, snapshot: Snapshot) -> None:
        """The exact first-NaN snapshot (replayed): it replaces the approximate pin."""
        self._set_pinned(snapshot, replayed=True)
        if self._screen.pin.viewing:
            self.show(snapshot)

    def _set_pinned(self, snapshot: Snapshot | None, replayed: bool = False) -> None:
        if self._screen.pin.pin(snapshot, replayed):
            self.pinnedChanged.emit(snapshot)

    @Slot(str, str)
    def _on_worker_failed(self, sentence: str, details: str) -> None:
        log.error("run failed: %s\n%s", sentence, details)
        if self._closed:
            return
        self._failure = sentence
        self._set_state(RunState.FAILED)
        self.failed.emit(sentence, details)

    @Slot()
    def _on_run_ended(self) -> None:
        if self._state is not RunState.FAILED:
            self._set_state(RunState.FINISHED)

    def _set_state(self, state: RunState) -> None:
        self._state = state
        self.stateChanged.emit(state)
