"""Runs a distance fit off the GUI thread.

A ``FitWorker`` is a QObject moved to its own QThread. Its loop drives the same
``DistanceFitRun`` as ``gradviz fit``; commands arrive as flags (``threading.Event`` and a
lock-protected learning rate) checked before every step, because a queued slot would not be
delivered while the loop is busy. Snapshots leave as signals when a frame is due; the GUI
acknowledges each one it has drawn, and the worker does not take the next snapshot before
that acknowledgement (adaptive pacing: when the GUI falls behind, frames are skipped, never
queued up). Every failure is caught and reported as a ``failed`` signal with a plain
sentence, so the GUI always learns about it.

The views get display-sized Snapshots (at most ``decimate.MAX_DISPLAY`` per side); the
exact values of one entry come on request (``request_cell``): the loop answers between two
steps with ``CellValues`` read by ``run.cell_values`` at full resolution, or read from a
run rebuilt at the pinned first-NaN state. Autograd never runs on the GUI thread.

When the coordinates come from a network, ``request_network`` asks for a copy of it: the
loop answers between two steps (running or paused) with a ``NetworkCopy`` of numpy arrays,
and sends one more as the run ends, so a finished or stopped run can still be explored.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import traceback
from collections.abc import Callable
from functools import partial
from typing import Any

from PySide6.QtCore import QObject, Qt, QThread, QTimer, Signal, Slot

from gradviz.core.settings.config import FitConfig
from gradviz.gui.common.failures import describe_failure

log = logging.getLogger(__name__)

#: A frame waits at least this many times as long as the GUI took to draw the last one.
GUI_SHARE_FACTOR = 6.0

#: However slow the GUI, a running fit shows at least one frame a second.
MAX_FRAME_INTERVAL_S = 1.0

#: How long a paused loop sleeps between looks at its flags (seconds).
_IDLE_WAIT_S = 0.05


#: Rows of a lab run's per-step loss and gradient-norm history: a longer run's history is
#: thinned (core.step_series), so that every Snapshot it sends, each one the timeline keeps
#: and the loss plot and Runs page drawn from them stay bounded however long it runs
#: (unbounded, a 10-minute run at 460 steps/s grew by 300 MB).
HISTORY_ROWS = 2048


def default_run_factory(config: FitConfig, cores: int | None = None) -> Any:
    """Build the core run with display-sized Snapshots and a bounded history (imports
    torch: call it on the worker thread only). ``cores``: the cores its automatic thread
    choice may use (default: all of them; the choice is set on the worker thread that steps
    the run, see core.run_threads). Auto times its steps with the window drawing beside them,
    so it takes more threads only where they are faster with the window's share taken: on 2
    idle cores the lab's worker timed 541-573 steps/s on 1 thread and 787-827 on 2."""
    from gradviz.core.common import decimate
    from gradviz.core.lab.fit import DistanceFitRun

    return DistanceFitRun(
        config, max_display=decimate.MAX_DISPLAY, cores=cores, history_rows=HISTORY_ROWS
    )


def describe_run_failure(exc: BaseException) -> str:
    """One plain sentence for a failure that stopped a run."""
    return describe_failure(
        exc,
        "The run stopped because of an unexpected error",
        "The run ran out of memory; try fewer points, float32, or another device. "
        "The last good state is still on screen.",
        then="The last good state is still on screen.",
    )


@dataclasses.dataclass(frozen=True)
class CellValues:
    """The exact values of entry (i, j) of the Snapshot of ``step`` (or of the pinned
    first-NaN Snapshot), by Snapshot field name; ``values`` is None and ``sentence`` says
    why when they could not be read (the run has moved on)."""

    generation: int
    step: int
    i: int
    j: int
    pinned: bool
    values: dict[str, float] | None
    sentence: str = ""


@dataclasses.dataclass(frozen=True)
class NetworkCopy:
    """The coordinate network of a run at one step, as plain data (no live tensor).

    ``spec_json`` is the NetworkSpec as JSON; ``state`` maps each state_dict name to a
    numpy copy ((out, in) weights, (out,) biases) in the run's dtype.
    """

    generation: int
    step: int
    spec_json: str
    state: dict[str, Any]


def copy_network(run: Any, generation: int) -> NetworkCopy | None:
    """A NetworkCopy of ``run``'s coordinate network, or None for free coordinates."""
    model, spec = getattr(run, "model", None), getattr(run, "spec", None)
    if model is None or spec is None:
        return None
    state = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
    return NetworkCopy(generation, int(run.completed_steps), spec.to_json(), state)


class FitWorker(QObject):
    """One run of one generation. Create, move to a QThread, connect, start the thread.

    Signals are connected to slots of GUI-thread QObjects (queued); never to lambdas.
    """

    snapshotReady = Signal(object, float)  # Snapshot, wall-clock steps/s of this worker
    firstNanPinned = Signal(object)  # Snapshot of the exact first non-finite step
    failed = Signal(str, str)  # plain sentence, details (traceback)
    finished = Signal(int)  # generation
    networkReady = Signal(object)  # NetworkCopy, on request and as the run ends
    cellValuesReady = Signal(object)  # CellValues, on request

    def __init__(
        self,
        config: FitConfig,
        generation: int,
        frame_rate: float = 30.0,
        start_paused: bool = False,
        run_factory: Callable[[FitConfig], Any] | None = None,
        after: list[threading.Event] | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        #: Events of earlier runs' workers: this run is built only once they are all set,
        #: so an old run's (N, N) tensors are freed before a new one allocates its own.
        self._after = list(after or [])
        #: Set when this worker has dropped its run (its memory can be reused).
        self.ended = threading.Event()
        self.generation = generation
        self._run_factory = run_factory or default_run_factory
        self._stop = threading.Event()
        self._running = threading.Event()  # set = run freely; clear = paused
        if not start_paused:
            self._running.set()
        self._step_requests = 0
        self._lock = threading.Lock()
        self._pending_lr: float | None = None
        self._frame_interval = 1.0 / max(frame_rate, 0.1)
        self._gui_interval = 0.0  # adaptive: a slow-drawing GUI gets fewer frames
        self._frame_drawn = threading.Event()  # the GUI drew our last frame
        self._frame_drawn.set()
        self._wake = threading.Event()
        self._network_request = threading.Event()
        self._cell_request: tuple[int, int, int, bool] | None = None  # latest wins
        self._pinned_state: Any = None  # anomaly.PinnedState of the replayed first NaN
        self._run: Any = None  # the core run, once built (worker thread only)
        #: Set while the loop sits paused or has ended (no step in flight): a Diagnose run
        #: waits for it, because anomaly mode is process-wide.
        self.idle = threading.Event()
        #: Optimiser steps taken by this worker (read from any thread; for benchmarks).
        self.steps_taken = 0

    # ---- commands (any thread) -------------------------------------------------------
    def request_stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()
        self._wake.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def step_once(self) -> None:
        """While paused: take exactly one more step and show it."""
        with self._lock:
            self._step_requests += 1
        self._wake.set()

    def request_network(self) -> None:
        """Ask for a copy of the coordinate network, sent between two steps
        (``networkReady``; nothing for free coordinates)."""
        self._network_request.set()
        self._wake.set()

    def request_cell(self, i: int, j: int, step: int, pinned: bool = False) -> None:
        """Ask for the exact values of entry (i, j) of the Snapshot of ``step`` (or of the
        pinned first-NaN Snapshot), answered between two steps by ``cellValuesReady``. A
        newer request replaces one not yet answered."""
        with self._lock:
            self._cell_request = (int(i), int(j), int(step), bool(pinned))
        self._wake.set()

    def set_lr(self, lr: float) -> None:
        """Takes effect before the next step."""
        with self._lock:
            self._pending_lr = float(lr)

    def set_frame_rate(self, frame_rate: float) -> None:
        self._frame_interval = 1.0 / max(frame_rate, 0.1)

    @property
    def frame_interval(self) -> float:
        """Seconds between two frames at the frame rate asked for (the GUI may slow it)."""
        return self._frame_interval

    def frame_drawn(self, gui_seconds: float = 0.0) -> None:
        """The GUI has drawn the last snapshot, which kept it busy ``gui_seconds``.

        The next frame waits at least ``GUI_SHARE_FACTOR`` times that long, so drawing
        takes at most about 1/factor of the time and the run keeps the rest (the GIL is
        shared: every millisecond the GUI spends in Python is one the run waits).
        """
        self._gui_interval = min(gui_seconds * GUI_SHARE_FACTOR, MAX_FRAME_INTERVAL_S)
        self._frame_drawn.set()

    # ---- the loop (worker thread) --------------------------------------------------------
    @Slot()
    def run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 - every failure must reach the GUI
            log.exception("run of generation %d failed", self.generation)
            self.failed.emit(describe_run_failure(exc), traceback.format_exc())
        finally:
            self._send_network()  # the final weights: a finished run can be explored too
            self._run = self._pinned_state = None  # the run's tensors go now, not at deleteLater
            self.ended.set()
            self.idle.set()
            self.finished.emit(self.generation)

    def _send_network(self) -> None:
        """Emit a copy of the coordinate network (if any); never raises."""
        self._network_request.clear()
        if self._run is None:
            return
        try:
            network = copy_network(self._run, self.generation)
        except Exception:  # noqa: BLE001 - a copy that fails must not end the run
            log.exception("copying the coordinate network failed")
            return
        if network is not None:
            self.networkReady.emit(network)

    def _wait_for_earlier_runs(self) -> bool:
        """Wait until earlier runs have dropped their tensors, then hand the freed memory
        back to the system; False when stopped meanwhile."""
        for ended in self._after:
            while not ended.wait(_IDLE_WAIT_S):
                if self._stop.is_set():
                    return False
        if self._after:
            from gradviz.core.lab import memory

            memory.return_freed_memory()
        return not self._stop.is_set()

    def _loop(self) -> None:
        if not self._wait_for_earlier_runs():
            return
        run = self._run_factory(self.config)
        self._run = run
        self._meter = _RateMeter(run.completed_steps)
        self._emit(run)
        last_frame = time.perf_counter()
        seen_nonfinite = run.first_nonfinite_grad_step is not None
        shown_step = run.completed_steps
        while not self._stop.is_set() and not _is_done(run):
            self.idle.clear()
            if self._network_request.is_set():  # between two steps: a consistent copy
                self._send_network()
            self._answer_cell_request(run)
            single = self._take_step_request()
            if not single and not self._running.is_set():
                if shown_step != run.completed_steps:
                    self._emit(run, measured=False)  # just paused: show where the run stands
                    shown_step = run.completed_steps
                self.idle.set()
                self._meter.restart(run.completed_steps)
                self._wake.wait(_IDLE_WAIT_S)
                self._wake.clear()
                continue
            self._apply_pending_lr(run)
            # Capture (matrices, gradients, health) only on steps that will be shown: the
            # first step, a single step, or when a frame is due and the last one is drawn
            # (adaptive pacing: a GUI that falls behind gets fewer frames, the run no delay).
            interval = max(self._frame_interval, self._gui_interval)
            due = time.perf_counter() - last_frame >= interval and self._frame_drawn.is_set()
            capture = single or due or run.completed_steps == 0
            run.step(capture=capture)
            self.steps_taken += 1
            self._meter.stepped(run.completed_steps)
            first_nan = not seen_nonfinite and run.first_nonfinite_grad_step is not None
            seen_nonfinite = seen_nonfinite or first_nan
            if capture or first_nan:  # the first NaN is always shown: the GUI pins it
                self._emit(run)
                shown_step = run.completed_steps
                last_frame = time.perf_counter()
            if first_nan and not capture:
                self._pin_exact_first_nan()
        self._emit(run)

    def _pin_exact_first_nan(self) -> None:
        """The first NaN came in a step that was not captured, so the snapshot just sent
        shows the state after that step's update. Replay the (seeded) run to that step,
        stopping on NaN, and send the exact (display-sized) snapshot of its gradients to be
        pinned; its parameters are kept for full-resolution reads (``request_cell``)."""
        from gradviz.core.common import decimate
        from gradviz.core.lab.anomaly import replay_to_first_nonfinite

        pinned = replay_to_first_nonfinite(
            self.config, should_stop=self._stop.is_set, max_display=decimate.MAX_DISPLAY
        )
        if pinned is not None:
            self._pinned_state = pinned
            snapshot = dataclasses.replace(pinned.snapshot, generation=self.generation)
            self.firstNanPinned.emit(snapshot)

    def _answer_cell_request(self, run: Any) -> None:
        """Read the requested entry at full resolution and send it (worker thread)."""
        with self._lock:
            request, self._cell_request = self._cell_request, None
        if request is None:
            return
        i, j, step, pinned = request
        from gradviz.core.common.errors import GradvizError

        try:
            read = self._pinned_cell_values if pinned else partial(run.cell_values, step=step)
            values = read(i, j)
        except GradvizError as exc:
            answer = CellValues(self.generation, step, i, j, pinned, None, str(exc))
        else:
            answer = CellValues(self.generation, step, i, j, pinned, values)
        self.cellValuesReady.emit(answer)

    def _pinned_cell_values(self, i: int, j: int) -> dict[str, float]:
        """Entry (i, j) of the pinned first-NaN state, from a run rebuilt at it (one step's
        memory and time, dropped at once)."""
        from gradviz.core.common.errors import GradvizError
        from gradviz.core.lab.anomaly import pinned_run

        if self._pinned_state is None:
            raise GradvizError(
                "The exact values of the first NaN step are not kept for this run; the "
                "picture shows block values."
            )
        from gradviz.core.common import decimate

        run = pinned_run(self.config, self._pinned_state)
        run.max_display = decimate.MAX_DISPLAY  # no full-size host copies for one read
        run.snapshot()  # re-runs the pinned step's forward and backward
        return run.cell_values(i, j)

    def _emit(self, run: Any, measured: bool = True) -> None:
        """Send a snapshot with the steps/s of the last stretch of running (NaN: unknown)."""
        self._frame_drawn.clear()
        rate = self._meter.rate(run.completed_steps) if measured else float("nan")
        self.snapshotReady.emit(run.snapshot(self.generation), rate)

    def _take_step_request(self) -> bool:
        with self._lock:
            if self._step_requests and not self._running.is_set():
                self._step_requests -= 1
                return True
            self._step_requests = 0 if self._running.is_set() else self._step_requests
            return False

    def _apply_pending_lr(self, run: Any) -> None:
        with self._lock:
            lr, self._pending_lr = self._pending_lr, None
        if lr is not None:
            run.set_lr(lr)


class _RateMeter:
    """Wall-clock steps per second while running (snapshots included, pauses not).

    A stretch of running is measured from the end of its first step: that step carries
    one-off costs (the first optimizer step imports torch._dynamo, ~1.4 s; first calls
    warm caches), and counting it made the first readings 2-10x lower than the rate at
    which the step counter then climbed.
    """

    def __init__(self, steps: int) -> None:
        self.restart(steps)
        self._last = float("nan")

    def restart(self, steps: int) -> None:
        self._t0, self._steps0 = time.perf_counter(), steps
        self._fresh = True

    def stepped(self, steps: int) -> None:
        """A step ended (``steps`` completed): the first of a stretch starts the clock."""
        if self._fresh:
            self._fresh = False
            self._t0, self._steps0 = time.perf_counter(), steps

    def rate(self, steps: int) -> float:
        elapsed = time.perf_counter() - self._t0
        if steps - self._steps0 >= 2 and elapsed > 0.25:
            self._last = (steps - self._steps0) / elapsed
            self._t0, self._steps0 = time.perf_counter(), steps
        return self._last


def _is_done(run: Any) -> bool:
    done = run.done
    return bool(done() if callable(done) else done)


class FramePacer(QObject):
    """Tells each worker when the GUI has drawn its last frame (after the queued paint),
    with the time that frame held the GUI thread: the worker paces itself to the screen
    (see ``FitWorker.frame_drawn``). GUI thread only."""

    def __init__(self, pool: WorkerPool, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._pool = pool
        self._unacknowledged: set[int] = set()
        self._mark = time.thread_time()
        self._arrived = time.perf_counter()

    def restart(self) -> None:
        self._mark = time.thread_time()

    def shown(self, generation: int, arrived: float) -> None:
        """A frame of ``generation``, which reached the GUI thread at ``arrived`` (a
        ``time.perf_counter()``), went to the views; acknowledge it once painted. (A
        GUI-thread slot does it: a worker method would be queued to the busy worker.)"""
        if self._pool.get(generation) is not None:
            if not self._unacknowledged:
                self._arrived = arrived
            self._unacknowledged.add(generation)
            QTimer.singleShot(0, self._acknowledge)

    @Slot()
    def _acknowledge(self) -> None:
        seconds = self.frame_seconds()
        for generation in self._unacknowledged:
            handle = self._pool.get(generation)
            if handle is not None:
                handle.worker.frame_drawn(seconds)
        self._unacknowledged.clear()

    def frame_seconds(self) -> float:
        """How long the last frame held the GUI thread: its CPU time since the last
        acknowledgement (everything it did for the frame, painting included), or the wall
        time from the frame's arrival to its paint where that is longer. On a busy machine
        the GUI thread is preempted while it holds the GIL and the run waits all that time,
        which CPU time does not see: beside two busy processes on 2 cores, paced by CPU time
        the lab ran a median 0.60x of the bare loop, by this 0.77x (4 runs each, in turn),
        drawing about 4 frames a second instead of 9."""
        now = time.thread_time()
        cpu, self._mark = now - self._mark, now
        return max(cpu, time.perf_counter() - self._arrived)


class WorkerHandle(QObject):
    """A worker and its thread, started together and joined together.

    Any QObject worker with a ``run`` slot, a ``request_stop`` method and a ``finished``
    signal fits; ``name`` names the thread (default: the fit run's generation).
    """

    def __init__(self, worker: QObject, name: str | None = None) -> None:
        super().__init__()
        self.worker = worker
        self.thread = QThread()
        self.thread.setObjectName(name or f"gradviz-fit-{worker.generation}")
        worker.moveToThread(self.thread)
        self.thread.started.connect(worker.run)
        # Direct: quit() is thread-safe, and the GUI thread may be blocked in wait().
        worker.finished.connect(self.thread.quit, Qt.ConnectionType.DirectConnection)

    def start(self) -> None:
        self.thread.start()

    def stop_and_join(self, timeout_s: float = 30.0) -> bool:
        """Ask the loop to stop and wait for the thread; True when it has ended."""
        self.worker.request_stop()
        self.thread.quit()
        return self.thread.wait(int(timeout_s * 1000))


class WorkerPool:
    """Fit workers by generation, each on its own thread, from start until joined.

    A thread is joined when its worker reports finished (``retire``) or at ``shutdown``, and
    stays referenced until then: dropping a running QThread aborts the process.
    """

    def __init__(self) -> None:
        self._handles: dict[int, WorkerHandle] = {}

    def start(self, worker: FitWorker) -> WorkerHandle:
        handle = WorkerHandle(worker)
        self._handles[worker.generation] = handle
        handle.start()
        return handle

    def get(self, generation: int) -> WorkerHandle | None:
        return self._handles.get(generation)

    def handles(self) -> list[WorkerHandle]:
        return list(self._handles.values())

    def workers(self) -> list[FitWorker]:
        return [handle.worker for handle in self._handles.values()]

    def retire(self, generation: int) -> WorkerHandle | None:
        """Join and release the thread of a worker that has reported finished."""
        handle = self._handles.pop(generation, None)
        if handle is not None:
            handle.thread.wait()  # its loop has returned: the join is immediate
            _release(handle)
        return handle

    def shutdown(self, timeout_s: float = 30.0) -> bool:
        """Stop every worker and join its thread; returns True (every thread has ended).

        A thread still in a long step after ``timeout_s`` is logged and then waited for
        without a deadline: a QThread destroyed while it runs aborts the whole process
        (a step at N = 10,000 can take longer than any fixed wait), and the stop flag is
        checked before every step, so the wait ends with the step in flight.
        """
        handles = self.handles()
        for handle in handles:
            handle.worker.request_stop()
        for handle in handles:
            if not handle.stop_and_join(timeout_s):
                log.warning(
                    "worker thread %s is finishing a long step; waiting for it",
                    handle.thread.objectName(),
                )
                handle.thread.wait()
            del self._handles[handle.worker.generation]
            _release(handle)
        return not self._handles

    def __len__(self) -> int:
        return len(self._handles)


def _release(handle: WorkerHandle) -> None:
    handle.worker.deleteLater()
    handle.thread.deleteLater()
    handle.deleteLater()
