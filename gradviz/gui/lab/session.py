"""The one model of a run on the Qt side: ``RunSession`` (a QObject, no widgets).

A session owns the run's generation counter, its worker, its state (``RunState``), the
latest snapshot and the pinned snapshot of the first non-finite gradient. Everything that
shows a run (status bar, toolbar, views, "Why NaN here?", the comparison's columns) reads
the session or listens to its signals; nobody reads another object's fields.

Snapshots reach the views through one path, ``show(snapshot)``, whether they come from a
live worker or from a file: ``snapshotShown`` then carries the snapshot on screen.

Every run (and every Reset) gets a new generation; snapshots of older generations are
dropped. The worker is told things only through its thread-safe flags, and each drawn
frame is acknowledged after the queued paint, so the worker paces itself to the screen.
All slots here run on the GUI thread.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, Signal, Slot

from gradviz.core.config import FitConfig
from gradviz.core.health import Health
from gradviz.core.snapshot import Snapshot
from gradviz.gui.lab.worker import FitWorker, FramePacer, WorkerPool

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


def has_nonfinite_gradient(snapshot: Snapshot) -> bool:
    """Whether the gradients ``snapshot`` shows hold a NaN or an Inf (step 0 included,
    whose gradients no optimizer step has used yet)."""
    if snapshot.first_nonfinite_grad_step is not None:
        return True
    return bool(
        (np.asarray(snapshot.entry_health) >= Health.NEG_INF).any()
        or (np.asarray(snapshot.coord_health) >= Health.NEG_INF).any()
    )


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
    networkCopied = Signal(int, object, object)  # generation, NetworkSpec, {name: tensor}

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
        self._generation = 0
        self._config: FitConfig | None = None
        self._latest: Snapshot | None = None
        self._pinned: Snapshot | None = None
        self._shown: Snapshot | None = None
        self._viewing_pinned = False
        self._pinned_replayed = False  # the pin came from the worker's replay
        self._steps_per_second = float("nan")
        self._failure: str | None = None
        self._held = False
        self._closed = False
        self._pool = WorkerPool()
        self._pacer = FramePacer(self._pool, self)
        self._worker: FitWorker | None = None

    # ---- what the session knows (read-only) -------------------------------------------------
    @property
    def state(self) -> RunState:
        return self._state

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def config(self) -> FitConfig | None:
        """The settings of the current run (None before the first)."""
        return self._config

    @property
    def latest(self) -> Snapshot | None:
        """The newest snapshot of the current run."""
        return self._latest

    @property
    def pinned(self) -> Snapshot | None:
        """The snapshot of the run's first non-finite gradient, once there is one."""
        return self._pinned

    @property
    def first_nonfinite_grad_step(self) -> int | None:
        """The step (0-based, as the CLI counts) whose gradients were first non-finite:
        0 when step 0's gradients already are, before any step has used them."""
        latest = self._latest
        if latest is None:
            return None
        if latest.first_nonfinite_grad_step is not None:
            return latest.first_nonfinite_grad_step
        return 0 if self._pinned is not None else None

    @property
    def shown(self) -> Snapshot | None:
        """The snapshot on screen (the latest, the pinned one, or one from a file)."""
        return self._shown

    @property
    def failure(self) -> str | None:
        """The sentence that ended the current run in failure (None unless FAILED)."""
        return self._failure if self._state is RunState.FAILED else None

    @property
    def viewing_pinned(self) -> bool:  # showing the pinned snapshot (until show_live)
        return self._viewing_pinned

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
        return self._worker

    def workers(self) -> list[FitWorker]:
        """Every worker whose thread is still held (the current one and retiring ones):
        ``len(workers())`` threads."""
        return self._pool.workers()

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
        if self._worker is not None and self._worker.paused:
            self._worker.resume()
            self._set_state(RunState.RUNNING)
        elif self._worker is None and config is not None:
            self._launch(config, paused=False)

    @Slot()
    def pause(self) -> None:
        if self._worker is not None and self._state is RunState.RUNNING:
            self._worker.pause()
            self._set_state(RunState.PAUSED)

    def step(self, config: FitConfig | None = None) -> None:
        """Pause (if running) and take exactly one step (of ``config`` if nothing runs)."""
        if not self.available or (self._worker is None and config is None):
            return
        self.show_live()
        if self._worker is None:
            self._launch(config, paused=True)  # type: ignore[arg-type]
        self._worker.pause()  # type: ignore[union-attr]
        self._worker.step_once()  # type: ignore[union-attr]
        self._set_state(RunState.PAUSED)

    @Slot()
    def stop(self) -> None:
        """End the run; its last state stays on screen."""
        if self._worker is not None:
            self._retire()
            self._set_state(RunState.STOPPED)

    def reset(self, config: FitConfig | None = None) -> None:
        """A new generation: the views are cleared, and with ``config`` its step 0 is shown,
        ready to start."""
        self._retire()
        self._generation += 1
        self._latest = self._pinned = self._shown = None
        self._viewing_pinned = False
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
        worker = self._worker
        if worker is None or snapshot.generation != self._generation:
            return False
        pinned = snapshot is self._pinned and self._pinned_replayed
        worker.request_cell(i, j, snapshot.step, pinned=pinned)
        return True

    def set_lr(self, lr: float) -> None:  # takes effect before the next step
        if self._worker is not None:
            self._worker.set_lr(lr)

    def set_frame_rate(self, frame_rate: float) -> None:
        self.frame_rate = frame_rate
        if self._worker is not None:
            self._worker.set_frame_rate(frame_rate)

    def request_network(self) -> bool:
        """Ask the running worker for a copy of its network; False when nothing runs."""
        if self._worker is None:
            return False
        self._worker.request_network()
        return True

    def join(self, timeout_s: float = 30.0) -> bool:
        """Stop every worker and join its thread; True when all threads have ended."""
        self.stop()
        return self._pool.shutdown(timeout_s)

    def shutdown(self, timeout_s: float = 30.0) -> bool:
        """``join``, and no run starts afterwards (the app is closing)."""
        self._closed = True
        self._worker = None
        stopped = self._pool.shutdown(timeout_s)
        # What the stopped run had already queued must not reach a closed window's widgets.
        self._generation += 1
        return stopped

    # ---- what is on screen --------------------------------------------------------------------
    def show(self, snapshot: Snapshot) -> None:
        """Put ``snapshot`` on screen: the one path by which the views are fed."""
        self._shown = snapshot
        self.snapshotShown.emit(snapshot)

    def show_first_nan(self) -> None:
        """Show the pinned snapshot until ``show_live``."""
        if self._pinned is None:
            return
        self._viewing_pinned = True
        self.show(self._pinned)
        self.stateChanged.emit(self._state)

    def show_live(self) -> None:
        if not self._viewing_pinned:
            return
        self._viewing_pinned = False
        if self._latest is not None:
            self.show(self._latest)
        self.stateChanged.emit(self._state)

    # ---- the worker (GUI-thread slots) ----------------------------------------------------------
    def _launch(self, config: FitConfig, paused: bool) -> None:
        self._generation += 1
        self._config = config
        self._set_pinned(None)
        worker = FitWorker(
            config,
            self._generation,
            frame_rate=self.frame_rate,
            start_paused=paused,
            run_factory=self.run_factory,
            after=[w.ended for w in self._pool.workers()],  # old runs free their memory first
        )
        worker.snapshotReady.connect(self._on_snapshot)
        worker.firstNanPinned.connect(self._on_first_nan_pinned)
        worker.failed.connect(self._on_worker_failed)
        worker.finished.connect(self._on_worker_finished)
        worker.networkReady.connect(self._on_network_ready)
        worker.cellValuesReady.connect(self._on_cell_values)
        worker.networkCopied.connect(self._on_network_copied)
        self._pacer.restart()
        self._pool.start(worker)
        self._worker = worker
        self._set_state(RunState.READY if paused else RunState.RUNNING)

    def _retire(self) -> None:
        """Ask the current worker to stop; its thread is joined when it reports finished."""
        if self._worker is not None:
            self._worker.request_stop()
            self._worker = None

    @Slot(object, float)
    def _on_snapshot(self, snapshot: Snapshot, steps_per_second: float) -> None:
        if snapshot.generation == self._generation:
            self._latest = snapshot
            if steps_per_second == steps_per_second:  # not NaN
                self._steps_per_second = steps_per_second
            if self._pinned is None and has_nonfinite_gradient(snapshot):
                self._set_pinned(snapshot)
            if not self._viewing_pinned:
                self.show(snapshot)
        self._pacer.shown(snapshot.generation)

    @Slot(object)
    def _on_first_nan_pinned(self, snapshot: Snapshot) -> None:
        """The exact first-NaN snapshot (replayed): it replaces the approximate pin."""
        if snapshot.generation != self._generation:
            return
        self._set_pinned(snapshot)
        self._pinned_replayed = True
        if self._viewing_pinned:
            self.show(snapshot)

    def _set_pinned(self, snapshot: Snapshot | None) -> None:
        if snapshot is not self._pinned:
            self._pinned = snapshot
            self._pinned_replayed = False
            self.pinnedChanged.emit(snapshot)

    @Slot(str, str)
    def _on_worker_failed(self, sentence: str, details: str) -> None:
        log.error("run failed: %s\n%s", sentence, details)
        if self._closed:
            return
        self._failure = sentence
        self._set_state(RunState.FAILED)
        self.failed.emit(sentence, details)

    @Slot(int)
    def _on_worker_finished(self, generation: int) -> None:
        handle = self._pool.retire(generation)
        if handle is not None and handle.worker is self._worker:
            self._worker = None
            if self._state is not RunState.FAILED:
                self._set_state(RunState.FINISHED)

    @Slot(object)
    def _on_network_ready(self, network: Any) -> None:
        if network.generation == self._generation:
            self.networkReady.emit(network)

    @Slot(object)
    def _on_cell_values(self, values: Any) -> None:
        if values.generation == self._generation:
            self.cellValuesReady.emit(values)

    @Slot(int, object, object)
    def _on_network_copied(self, generation: int, spec: Any, state: Any) -> None:
        if generation == self._generation:
            self.networkCopied.emit(generation, spec, state)

    def _set_state(self, state: RunState) -> None:
        self._state = state
        self.stateChanged.emit(state)
