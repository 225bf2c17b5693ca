"""Wires the setup form, the run worker and the views; owns the run's generation counter.

Every run (and every Reset) gets a new generation; snapshots of older generations are
dropped. The snapshot of the first step with a non-finite gradient is pinned, so "Show
first NaN" can bring it back after the whole run has turned NaN. All slots here run on the
GUI thread; the worker is only ever told things through its thread-safe flags.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QSettings, QTimer, Signal, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog, QMessageBox

from gradviz.core.config import FitConfig
from gradviz.core.errors import GradvizError
from gradviz.core.snapshot import Snapshot
from gradviz.gui import settings as settings_store
from gradviz.gui.dialogs import ErrorDialog
from gradviz.gui.experiments import (
    experiment_from_dict,
    experiment_to_dict,
    load_experiment,
    save_experiment,
)
from gradviz.gui.forms import DEFAULT_EXPERIMENT, LiveSettings, SetupForm
from gradviz.gui.main_window import MainWindow
from gradviz.gui.models.wiring import ModelActions
from gradviz.gui.lab.worker import FitWorker, WorkerHandle, WorkerPool, describe_failure

log = logging.getLogger(__name__)

LIVE_FIELDS = frozenset({"lr", "frame_rate"})


class TorchLoader(QObject):
    """Imports torch and the core run on a background thread (window first).

    ``ready`` carries the devices that exist as (name, label) pairs.
    """

    ready = Signal(object)
    failed = Signal(str, str)

    def __init__(self) -> None:
        super().__init__()
        self._thread = threading.Thread(target=self._load, name="gradviz-torch-import", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _load(self) -> None:
        try:
            from gradviz.core.config import FitConfig
            from gradviz.core.devices import available_devices, describe_device
            from gradviz.core.fit import DistanceFitRun

            # One tiny step pays the lazy imports (the optimiser pulls in torch._dynamo)
            # here, behind the window, instead of in the first real run.
            DistanceFitRun(FitConfig(n=3, dim=2, steps=1, device="cpu")).step(capture=True)
            devices = [(name, describe_device(name)) for name in available_devices()]
        except BaseException as exc:  # noqa: BLE001 - the GUI must hear of any failure
            log.exception("importing torch failed")
            self.failed.emit(
                f"The compute engine (torch) could not be loaded: {exc}. Check the "
                "installation; the window works, but runs cannot start.",
                traceback.format_exc(),
            )
            return
        self.ready.emit(devices)


class FitController(QObject):
    """The behaviour of the distance-fit lab.

    ``views`` follows the FitViews interface: ``widgets``, ``titles``, ``show_snapshot``,
    ``clear``. ``run_factory`` builds the core run from a FitConfig (on the worker thread).
    """

    stateChanged = Signal(str)
    torchReady = Signal()

    def __init__(
        self,
        views: Any,
        settings: QSettings | None = None,
        log_path: str = "",
        run_factory: Callable[[FitConfig], Any] | None = None,
        config: FitConfig | None = None,
        live: LiveSettings | None = None,
    ) -> None:
        super().__init__()
        self.views = views
        self.settings = settings or settings_store.open_settings()
        self.log_path = log_path
        self.run_factory = run_factory
        self.form = SetupForm(config or DEFAULT_EXPERIMENT)
        self.window = MainWindow(self.form, dict(views.widgets), dict(views.titles))
        self.window.close_guard = self._on_close_requested
        self.generation = 0
        self.state = "loading"
        self.torch_ready = False
        self.handle: WorkerHandle | None = None
        self.run_config: FitConfig | None = None  # the settings of the current run
        self.pool = WorkerPool()
        self.last_snapshot: Snapshot | None = None
        self.pinned_nan: Snapshot | None = None
        self.viewing_pinned = False
        self.error_dialog: ErrorDialog | None = None
        self.frames_drawn = 0
        self.steps_per_second = float("nan")
        self._unacknowledged: set[int] = set()
        self._gui_cpu_mark = time.thread_time()
        self._shut_down = False
        self._restore(config, live)
        self._connect()
        from gradviz.gui.investigate import Investigations

        self.investigations = Investigations(self)
        from gradviz.gui.run_network import RunNetworkExplorer

        self.run_network = RunNetworkExplorer(self)
        self.loader = TorchLoader()
        self.loader.ready.connect(self._on_torch_ready)
        self.loader.failed.connect(self._on_torch_failed)
        self._set_state("loading")

    def start_loading(self) -> None:
        """Import torch behind the window; Start is enabled once it is ready."""
        self.loader.start()

    # ---- wiring ----------------------------------------------------------------------------
    def _connect(self) -> None:
        a = self.window.actions
        a["start"].triggered.connect(self.start)
        a["pause"].triggered.connect(self._on_pause_triggered)
        a["toggle_run"].triggered.connect(self.toggle_run)
        a["step"].triggered.connect(self.step_once)
        a["stop"].triggered.connect(self.stop)
        a["reset"].triggered.connect(self.reset)
        a["first_nan"].triggered.connect(self.show_first_nan)
        a["live"].triggered.connect(self.show_live)
        a["open"].triggered.connect(self._on_open_triggered)
        a["save"].triggered.connect(self._on_save_triggered)
        a["quit"].triggered.connect(self.window.close)
        a["copy_command"].triggered.connect(self.copy_command)
        self.window.explorer.failed.connect(self._on_explorer_failed)
        a["reset_layout"].triggered.connect(self._on_reset_layout)
        a["about"].triggered.connect(self._on_about)
        self.window.recentChosen.connect(self.open_experiment)
        self.models = ModelActions(self)  # File > Open model, drops, Save network
        self.form.changed.connect(self._on_setting_changed)
        self.window.set_recent_files(settings_store.recent_files(self.settings))

    def _restore(self, config: FitConfig | None, live: LiveSettings | None) -> None:
        geometry = self.settings.value("window/geometry")
        state = self.settings.value("window/state")
        if geometry is not None:
            self.window.restoreGeometry(geometry)
        if state is not None:
            self.window.restoreState(state)
        if config is None:
            saved = settings_store.read_json(self.settings, "experiment")
            if saved is not None:
                try:
                    config, live = experiment_from_dict(saved, source="the saved settings")
                except GradvizError:
                    log.warning("ignoring unreadable saved settings")
        if config is not None:
            self.form.set_config(config, live or LiveSettings())

    # ---- run commands ----------------------------------------------------------------------
    @Slot()
    def start(self) -> None:
        """Start a run, or resume a paused one."""
        if not self.torch_ready or self._shut_down:
            return
        self.show_live()
        if self.handle is not None and self.handle.worker.paused:
            self.handle.worker.resume()
            self._set_state("running")
        elif self.handle is None:
            self._launch(paused=False)

    @Slot()
    def pause(self) -> None:
        if self.handle is not None and self.state == "running":
            self.handle.worker.pause()
            self._set_state("paused")

    @Slot()
    def toggle_run(self) -> None:
        if self.state == "running":
            self.pause()
        else:
            self.start()

    def _on_pause_triggered(self, checked: bool) -> None:
        if checked:
            self.pause()
        else:
            self.start()

    @Slot()
    def step_once(self) -> None:
        """Pause (if running) and take exactly one step."""
        if not self.torch_ready or self._shut_down:
            return
        self.show_live()
        if self.handle is None:
            self._launch(paused=True)
        self.pause()
        assert self.handle is not None
        self.handle.worker.step_once()
        self._set_state("paused")

    @Slot()
    def stop(self) -> None:
        """End the run; its last state stays on screen."""
        if self.handle is not None:
            self._retire(self.handle)
            self._set_state("stopped")

    @Slot()
    def reset(self) -> None:
        """Back to step 0 with the form's settings (a new generation)."""
        if self.handle is not None:
            self._retire(self.handle)
        self.generation += 1
        self.last_snapshot = None
        self.pinned_nan = None
        self.viewing_pinned = False
        self.steps_per_second = float("nan")
        self.views.clear()
        if self.torch_ready:
            self._launch(paused=True)
        else:
            self._set_state("loading")

    def _launch(self, paused: bool) -> None:
        if self._shut_down:
            return  # after shutdown no thread may start (it would outlive the joins)
        try:
            config = self.form.config()
        except GradvizError as exc:
            self.show_error(str(exc), "")
            return
        self.generation += 1
        self.pinned_nan = None
        self.run_config = config
        worker = FitWorker(
            config,
            self.generation,
            frame_rate=self.form.live_settings().frame_rate,
            start_paused=paused,
            run_factory=self.run_factory,
        )
        worker.snapshotReady.connect(self._on_snapshot)
        worker.firstNanPinned.connect(self._on_first_nan_pinned)
        worker.failed.connect(self._on_worker_failed)
        worker.finished.connect(self._on_worker_finished)
        self.run_network.watch(worker)
        self._gui_cpu_mark = time.thread_time()
        self.handle = self.pool.start(worker)
        self._set_state("paused" if paused else "running")

    def _retire(self, handle: WorkerHandle) -> None:
        """Ask a worker to stop; its thread is joined when it reports finished."""
        handle.worker.request_stop()
        if handle is self.handle:
            self.handle = None

    # ---- worker signals (GUI thread) ---------------------------------------------------------
    @Slot(object, float)
    def _on_snapshot(self, snapshot: Snapshot, steps_per_second: float) -> None:
        handle = self.pool.get(snapshot.generation)
        if snapshot.generation == self.generation:
            self.last_snapshot = snapshot
            if steps_per_second == steps_per_second:  # not NaN
                self.steps_per_second = steps_per_second
            if self.pinned_nan is None and snapshot.first_nonfinite_grad_step is not None:
                self.pinned_nan = snapshot
                self._update_actions()
            if not self.viewing_pinned:
                self.views.show_snapshot(snapshot)
                self.frames_drawn += 1
            self._update_status()
        if handle is not None:
            # Acknowledge after the queued paint, so the worker paces itself to the screen.
            # (A GUI-thread slot: a worker method here would be queued to the busy worker.)
            self._unacknowledged.add(snapshot.generation)
            QTimer.singleShot(0, self._acknowledge_frames)

    @Slot()
    def _acknowledge_frames(self) -> None:
        # GUI-thread CPU time since the last acknowledgement: everything the GUI did for
        # one frame, painting included (paints may come after this slot), but not the time
        # it waited for the GIL.
        now = time.thread_time()
        gui_seconds, self._gui_cpu_mark = now - self._gui_cpu_mark, now
        for generation in self._unacknowledged:
            handle = self.pool.get(generation)
            if handle is not None:
                handle.worker.frame_drawn(gui_seconds)
        self._unacknowledged.clear()

    @Slot(object)
    def _on_first_nan_pinned(self, snapshot: Snapshot) -> None:
        """The exact first-NaN snapshot (replayed): it replaces the approximate pin."""
        if snapshot.generation != self.generation:
            return
        self.pinned_nan = snapshot
        if self.viewing_pinned:
            self.views.show_snapshot(snapshot)
        self._update_actions()
        self.investigations.pinned_changed()

    @Slot(str, str)
    def _on_worker_failed(self, sentence: str, details: str) -> None:
        log.error("run failed: %s\n%s", sentence, details)
        self.show_error(sentence, details)
        self._set_state("failed")

    @Slot(str, str)
    def _on_explorer_failed(self, sentence: str, details: str) -> None:
        log.error("explorer failed: %s\n%s", sentence, details)
        dialog = self.show_error(sentence, details)
        dialog.setWindowTitle("gradviz: the Jacobians could not be computed")

    @Slot(int)
    def _on_worker_finished(self, generation: int) -> None:
        handle = self.pool.retire(generation)
        if handle is not None and handle is self.handle:
            self.handle = None
            if self.state != "failed":
                self._set_state("finished")

    @Slot(object)
    def _on_torch_ready(self, devices: list[tuple[str, str]]) -> None:
        if self._shut_down:
            return  # queued before shutdown, delivered after it: nothing may start now
        self.torch_ready = True
        self.form.set_devices(devices)
        self.reset()  # step 0 of the experiment, paused: ready for Start
        self.torchReady.emit()

    @Slot(str, str)
    def _on_torch_failed(self, sentence: str, details: str) -> None:
        if self._shut_down:
            return
        self.show_error(sentence, details)
        self._set_state("unavailable")

    # ---- pinned first NaN --------------------------------------------------------------------
    @Slot()
    def show_first_nan(self) -> None:
        if self.pinned_nan is None:
            return
        self.viewing_pinned = True
        self.views.show_snapshot(self.pinned_nan)
        self._update_status()
        self._update_actions()

    @Slot()
    def show_live(self) -> None:
        if not self.viewing_pinned:
            return
        self.viewing_pinned = False
        if self.last_snapshot is not None:
            self.views.show_snapshot(self.last_snapshot)
        self._update_status()
        self._update_actions()

    # ---- settings ----------------------------------------------------------------------------
    @Slot(str)
    def _on_setting_changed(self, name: str) -> None:
        if name in LIVE_FIELDS:
            if self.handle is not None:
                live = self.form.live_settings()
                self.handle.worker.set_frame_rate(live.frame_rate)
                if name == "lr":
                    self.handle.worker.set_lr(float(self.form.param("lr").value()))
            return
        if self.form.problem_text or not self.torch_ready:
            return  # the form shows what is wrong; nothing to apply yet
        started = self.last_snapshot is not None and self.last_snapshot.step > 0
        if (
            self.state in ("running", "paused")
            and started
            and not self.confirm(
                "Reset the run?",
                f"Changing {name} needs a fresh run. Reset now? (No keeps the current run; "
                "the change applies at the next Reset.)",
            )
        ):
            return
        self.reset()

    def confirm(self, title: str, question: str) -> bool:
        """Ask the user a yes/no question (tests replace this)."""
        answer = QMessageBox.question(self.window, title, question)
        return answer == QMessageBox.StandardButton.Yes

    def open_experiment(self, path: str) -> None:
        try:
            config, live = load_experiment(path)
        except GradvizError as exc:
            self.show_error(str(exc), "")
            return
        self.form.set_config(config, live)
        self.window.set_recent_files(settings_store.add_recent_file(self.settings, path))
        self.reset()

    def _on_open_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.window, "Open experiment", "", "Experiments (*.json)"
        )
        if path:
            self.open_experiment(path)

    def _on_save_triggered(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self.window, "Save experiment", "experiment.json", "Experiments (*.json)"
        )
        if not path:
            return
        try:
            save_experiment(path, self.form.config(), self.form.live_settings())
        except GradvizError as exc:
            self.show_error(str(exc), "")
            return
        self.window.set_recent_files(settings_store.add_recent_file(self.settings, path))

    @Slot()
    def copy_command(self) -> None:
        """Put the ``gradviz fit`` line that repeats the form's setup on the clipboard."""
        from gradviz.core.reproduce import fit_command_line

        try:
            line = fit_command_line(self.form.config())
        except GradvizError as exc:
            self.show_error(str(exc), "")
            return
        QGuiApplication.clipboard().setText(line)
        self.window.statusBar().showMessage(f"Copied: {line}", 8000)

    def _on_reset_layout(self) -> None:
        self.window.pages.show_page(0)
        self.window.restoreState(self.window.default_state)
        for dock in self.window.docks.values():
            dock.show()

    def _on_about(self) -> None:
        self.investigations.show_about()

    # ---- errors ------------------------------------------------------------------------------
    def show_error(self, sentence: str, details: str) -> ErrorDialog:
        """Show a failure without blocking; the window stays usable behind it."""
        if self.error_dialog is not None:
            self.error_dialog.close()
            self.error_dialog.deleteLater()
        self.error_dialog = ErrorDialog(sentence, details, self.log_path, self.window)
        self.error_dialog.open()
        return self.error_dialog

    def report_exception(self, exc: BaseException, details: str) -> None:
        self.show_error(describe_failure(exc), details)

    # ---- status ------------------------------------------------------------------------------
    def _set_state(self, state: str) -> None:
        self.state = state
        self._update_actions()
        self._update_status()
        self.stateChanged.emit(state)

    def _update_actions(self) -> None:
        a, state = self.window.actions, self.state
        # No run steps while Diagnose holds anomaly mode (it is process-wide).
        investigations = getattr(self, "investigations", None)
        ready = self.torch_ready and not (investigations is not None and investigations.diagnosing)
        a["start"].setEnabled(ready and state != "running")
        a["pause"].setEnabled(ready and state in ("running", "paused"))
        a["pause"].setChecked(state == "paused")
        a["pause"].setText("Resume" if state == "paused" else "Pause")
        a["toggle_run"].setEnabled(ready)
        a["step"].setEnabled(ready)
        a["stop"].setEnabled(ready and self.handle is not None)
        a["reset"].setEnabled(ready)
        a["first_nan"].setEnabled(self.pinned_nan is not None and not self.viewing_pinned)
        a["live"].setEnabled(self.viewing_pinned)
        a["why_nan"].setEnabled(self.pinned_nan is not None)

    def _update_status(self) -> None:
        labels = self.window.status_labels
        snap = self.pinned_nan if self.viewing_pinned else self.last_snapshot
        state = {"loading": "loading torch…", "unavailable": "torch unavailable"}.get(
            self.state, self.state
        )
        labels["state"].setText("showing first NaN" if self.viewing_pinned else state)
        if snap is None:
            for name in ("step", "loss", "speed"):
                labels[name].setText("")
            labels["device"].setText("")
            labels["nan"].setText("")
            labels["nan"].setStyleSheet("")
            return
        labels["step"].setText(f"step {snap.step:,}")
        labels["loss"].setText(f"loss {snap.loss:.4g}")
        rate = self.steps_per_second
        labels["speed"].setText(f"{rate:,.0f} steps/s" if rate == rate else "")
        labels["device"].setText(f"{snap.device} · {snap.method}")
        first = self.last_snapshot.first_nonfinite_grad_step if self.last_snapshot else None
        if first is None:
            labels["nan"].setText("gradients finite")
            labels["nan"].setStyleSheet("color: #1e7b34;")
        else:
            labels["nan"].setText(f"NaN/Inf gradient first at step {first}")
            labels["nan"].setStyleSheet("color: #c0392b; font-weight: bold;")

    # ---- closing -----------------------------------------------------------------------------
    def _on_close_requested(self) -> bool:
        if self._shut_down:
            return True  # already stopped (e.g. --screenshot): nothing to ask
        started = self.last_snapshot is not None and self.last_snapshot.step > 0
        going = started and self.state in ("running", "paused")
        if going and not self.confirm("Quit gradviz?", "A run is going. Stop it and quit?"):
            return False
        self.shutdown()
        return True

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Save settings, stop every worker and join its thread (idempotent)."""
        if self._shut_down:
            return
        self._shut_down = True
        self.window.pages.show_page(0)  # save the lab's layout, not the explorer page
        self._save_settings()
        if self.error_dialog is not None:
            self.error_dialog.close()
        self.investigations.shutdown(timeout_s)
        self.pool.shutdown(timeout_s)
        self.handle = None
        self.loader.join(timeout_s)
        self.models.shutdown(timeout_s)
        self.window.explorer.shutdown()

    def _save_settings(self) -> None:
        s = self.settings
        s.setValue("window/geometry", self.window.saveGeometry())
        s.setValue("window/state", self.window.saveState())
        try:
            data = experiment_to_dict(self.form.config(), self.form.live_settings())
            s.setValue("experiment", json.dumps(data))
        except GradvizError:
            pass  # an unfinished form is not remembered
        s.sync()

    @property
    def thread_count(self) -> int:
        """Worker threads still held (0 after every run has been joined)."""
        return (
            len(self.pool)
            + self.investigations.thread_count
            + int(self.window.explorer.worker_running())
        )
