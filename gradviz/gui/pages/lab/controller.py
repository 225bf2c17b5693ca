"""The distance-fit lab: wires the setup form, the run session, the views and the window.

The run itself lives in a ``RunSession`` (state, generation, worker, snapshots); this
controller turns the window's actions into session commands with the form's settings and
shows errors. The settings file is read and written by ``lab_memory``, experiment files
by ``ExperimentFiles``. Status bar, toolbar and views listen to the session. All slots
here run on the GUI thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QSettings, Qt, Signal, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMessageBox

from gradviz.core.common.errors import GradvizError
from gradviz.core.settings.config import FitConfig
from gradviz.gui.pages.lab.display_memory import DisplayMemory
from gradviz.gui.pages.lab.experiment_files import ExperimentFiles
from gradviz.gui.pages.lab.focus import EnterLeavesField
from gradviz.gui.pages.lab.lab_memory import remember_lab, restore_lab
from gradviz.gui.pages.lab.session import RunSession, RunState
from gradviz.gui.pages.lab.status import RunActions, RunStatus
from gradviz.gui.pages.lab.torch_loader import TorchLoader
from gradviz.gui.pages.lab.views import LabViews
from gradviz.gui.pages.lab.worker import describe_run_failure
from gradviz.gui.pages.models.wiring import ModelActions
from gradviz.gui.shell import settings as settings_store
from gradviz.gui.shell.dialogs import ErrorDialog
from gradviz.gui.shell.main_window import MainWindow
from gradviz.gui.widgets.settings_form import DEFAULT_EXPERIMENT, LiveSettings, SetupForm

log = logging.getLogger(__name__)


class LabController(QObject):
    """The behaviour of the distance-fit lab. ``session`` is the run; ``views`` its views.

    ``run_factory`` builds the core run from a FitConfig (on the worker thread).
    """

    torchReady = Signal()

    def __init__(
        self,
        views: LabViews,
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
        self.form = SetupForm(config or DEFAULT_EXPERIMENT)
        self.session = RunSession(run_factory, available=False, parent=self)
        self.window = MainWindow(self.form, dict(views.widgets))
        self.window.close_guard = self._on_close_requested
        self.error_dialog: ErrorDialog | None = None
        self._shut_down = False
        restore_lab(self.settings, self.window, self.form, config, live)
        self.session.snapshotShown.connect(views.show)
        self.session.cleared.connect(views.clear)
        self.session.failed.connect(self.show_error)
        # Exact values of a hovered or selected entry of a display-sized picture: asked of
        # the worker through the session (never autograd here), shown when they arrive.
        views.cellWanted.connect(self._on_cell_wanted)
        self.session.cellValuesReady.connect(views.show_cell_values)
        self.run_actions = RunActions(self.session, self.window.actions)
        self.run_status = RunStatus(self.session, self.window.status_labels)
        self._connect()
        from gradviz.gui.pages.lab.investigate import Investigations
        from gradviz.gui.pages.lab.run_network import RunNetworkExplorer

        self.investigations = Investigations(
            self.session, views, self.window, self.form.config, self.show_error, log_path
        )
        self.run_network = RunNetworkExplorer(self.session, self.window)
        from gradviz.gui.pages.recordings.opening import Recordings

        self.recordings = Recordings(
            self.window,
            self.window.pages,
            views,
            self.session,
            self.settings,
            self.show_error,
            lambda title, question: self.confirm(title, question),  # tests replace confirm
        )
        from gradviz.gui.pages.graph.wiring import GraphWiring

        self.graph = GraphWiring(self.window, self.recordings, self.models, self.show_error)
        from gradviz.gui.pages.lab.setup_focus import SetupFollowsFocus

        # After _connect: a change is compared with the run it reset to, not the one before.
        self.setup_focus = SetupFollowsFocus(
            self.form, self.session, self.recordings.recorded, self
        )
        self.recordings.shown.connect(self._on_recording_shown)
        from gradviz.gui.pages.lab.instant_edits import InstantEdits

        self.instant_edits = InstantEdits(
            self.session, self.form, self.window, views, self.experiments,
            self._fitting_config, self.setup_focus.source_config,
        )  # fmt: skip
        from gradviz.gui.pages.lab.network_gradients import NetworkGradients

        self.network_gradients = NetworkGradients(
            self.session, self.form, self, self.instant_edits.earlier.config_of
        )
        self._form_filled_by: object | None = None  # the opened recording that filled the form
        from gradviz.gui.pages.lab.lab_readouts import LabPageReadouts

        self.window.pages.lab_page = LabPageReadouts(
            views, self.run_status, self.form, self.recordings.timeline, self.recordings.dock
        )
        self.loader = TorchLoader()
        self.loader.ready.connect(self._on_torch_ready)
        self.session.snapshotShown.connect(  # step 0's frame, once
            self.loader.first_frame_shown, Qt.ConnectionType.SingleShotConnection
        )
        self.loader.failed.connect(self._on_torch_failed)

    def start_loading(self) -> None:
        """Import torch behind the window; Start is enabled once it is ready."""
        self.loader.start()

    @property
    def torch_ready(self) -> bool:
        return self.session.state.loaded

    # ---- wiring ----------------------------------------------------------------------------
    def _connect(self) -> None:
        a = self.window.actions
        a["start"].triggered.connect(self.start)
        a["pause"].triggered.connect(self._on_pause_triggered)
        a["toggle_run"].triggered.connect(self.toggle_run)
        a["step"].triggered.connect(self.step_once)
        a["stop"].triggered.connect(self.session.stop)
        a["reset"].triggered.connect(self.reset)
        a["first_nan"].triggered.connect(self.session.show_first_nan)
        a["live"].triggered.connect(self.back_to_live_view)
        a["quit"].triggered.connect(self.window.close)
        a["copy_command"].triggered.connect(self.copy_command)
        self.window.explorer.failed.connect(self._on_explorer_failed)
        a["reset_layout"].triggered.connect(self.window.reset_layout)
        self.experiments = ExperimentFiles(self.window, self.form, self.settings, self.show_error)
        self.models = ModelActions(self.window, self.settings, self.session, self.show_error)
        self.form.changed.connect(self._on_setting_changed)
        self.enter_leaves_field = EnterLeavesField(self.window.docks["setup"], self.window)
        self.display_memory = DisplayMemory(self.settings, self.views)

    # ---- run commands: the session's, with the form's settings -------------------------------
    def _form_config(self) -> FitConfig | None:
        """The form's settings for a new run, which also takes the form's frame rate (an
        opened experiment fills the form without a change signal for each setting)."""
        try:
            config = self.form.config()
        except GradvizError as exc:
            self.show_error(str(exc), "")
            return None
        self.session.set_frame_rate(self.form.live_settings().frame_rate)
        return config

    def _fitting_config(self) -> FitConfig | None:
        """The form's settings, or None (after a dialog) when they are invalid or the run
        would not fit in the memory available (both numbers and what to do)."""
        config = self._form_config()
        if config is None:
            return None
        from gradviz.core.common.decimate import MAX_DISPLAY
        from gradviz.core.common.devices import resolve_device
        from gradviz.core.lab import memory  # torch is loaded: runs are available

        try:
            memory.check_fits(
                config, resolve_device(config.device), snapshot_side=min(config.n, MAX_DISPLAY)
            )
        except GradvizError as exc:
            self.show_error(str(exc), "")
            return None
        return config

    @Slot()
    def start(self) -> None:
        """Start a run, or resume a paused one. Over a recording shown in the lab, first
        ask: starting replaces it in the lab's views."""
        if self._showing_a_recording() and not self.confirm(
            "Leave the recording?",
            "The lab shows a recording. Start a live run in its place? (The recording stays "
            "in File > Recent recordings.)",
        ):
            return
        self._command(self.session.start)

    def _showing_a_recording(self) -> bool:
        from gradviz.gui.pages.recordings.recorded_run import FIRST_RECORDED_GENERATION

        shown = self.session.shown
        return (
            shown is not None
            and shown.generation <= FIRST_RECORDED_GENERATION
            and not self.session.state.going
        )

    @Slot()
    def pause(self) -> None:
        self.session.pause()

    @Slot()
    def toggle_run(self) -> None:
        if self.session.state is RunState.RUNNING:
            self.session.pause()
        else:
            self.start()

    def _on_pause_triggered(self) -> None:
        """Pause, or Resume as the action reads while paused."""
        if self.session.state is RunState.PAUSED:
            self.start()
        else:
            self.session.pause()

    @Slot()
    def back_to_live_view(self) -> None:
        """From the pinned first NaN, or from an older step chosen on the timeline, to the
        run's newest step, followed."""
        if self.session.viewing_older:
            self.recordings.live.follow()  # ticks Follow, which shows the newest step
        else:
            self.session.show_live()

    @Slot()
    def step_once(self) -> None:
        """Pause (if running) and take exactly one step."""
        self._command(self.session.step)

    def _command(self, command: Callable[..., None]) -> None:
        """``command()`` on the current run, or ``command(config)`` for a new run from the
        form's settings once they pass the memory preflight."""
        if self._run_differs_from_form():
            self.session.stop()  # its step 0 only: the run starts from the form's settings
        if self.session.worker is not None:
            command()
        elif self.session.available:
            config = self._fitting_config()
            if config is not None:
                command(config)

    def _run_differs_from_form(self) -> bool:
        """A run waiting at step 0 (not started) made with other settings than the form
        shows: the form was set from a lab recording meanwhile. (Changed settings restart
        the run at once where they can run.)"""
        session = self.session
        if session.worker is None or session.state is not RunState.READY:
            return False
        try:
            return self.form.config() != session.settings_now
        except GradvizError:
            return False

    @Slot()
    def reset(self) -> None:
        """Back to step 0 with the form's settings (a new generation)."""
        config = self._fitting_config() if self.session.available else None
        self.session.reset(config)

    # ---- worker signals (GUI thread) ---------------------------------------------------------
    @Slot(int, int)
    def _on_cell_wanted(self, i: int, j: int) -> None:
        snapshot = self.views.snapshot
        if snapshot is not None:
            self.session.request_cell(snapshot, i, j)

    @Slot(str, str)
    def _on_explorer_failed(self, sentence: str, details: str) -> None:
        log.error("explorer failed: %s\n%s", sentence, details)
        dialog = self.show_error(sentence, details)
        dialog.setWindowTitle("gradviz: the Jacobians could not be computed")

    @Slot(object)
    def _on_torch_ready(self, devices: list[tuple[str, str]]) -> None:
        if self._shut_down:
            return  # queued before shutdown, delivered after it: nothing may start now
        self.form.set_devices(devices)
        self.session.set_available(True)
        if not self._showing_a_recording():
            # Step 0 of the experiment, paused: ready for Start. A recording opened while
            # torch loaded (``gradviz gui RECORDING``) stays on screen instead: step 0 of a
            # new run took the views from it while the timeline still named its steps.
            self.reset()
        self.torchReady.emit()

    @Slot(str, str)
    def _on_torch_failed(self, sentence: str, details: str) -> None:
        if self._shut_down:
            return
        self.show_error(sentence, details)
        self.session.set_available(False)

    @Slot(object)
    def _on_recording_shown(self, data) -> None:
        """A lab recording opened in the lab's views: the setup panel shows the settings it
        was made with, even where it was the source in focus already (opened again after
        the form changed); Start then repeats that run live. Once each time a recording is
        opened, not on every re-read of a growing one (the user's edits stay)."""
        if data.source != "fit" or "distances" not in data.images:
            return
        opened = self.recordings.source  # a new one for each open, the same for re-reads
        if opened is not None and opened is not self._form_filled_by:
            self._form_filled_by = opened
            self.setup_focus.refill()

    # ---- settings ----------------------------------------------------------------------------
    @Slot(str)
    def _on_setting_changed(self, name: str) -> None:
        if not self.form.needs_reset(name):
            self.session.set_frame_rate(self.form.live_settings().frame_rate)
            if name == "lr":
                self.session.set_lr(float(self.form.param("lr").value()))
            return
        if self.form.problem_text or not self.torch_ready:
            return  # the form shows what is wrong; nothing to apply yet
        self.instant_edits.restart()  # at once, in place: Edit > Undo brings the setup back

    def confirm(self, title: str, question: str) -> bool:
        """Ask the user a yes/no question (tests replace this)."""
        answer = QMessageBox.question(self.window, title, question)
        return answer == QMessageBox.StandardButton.Yes

    def save_experiment(self, path: str) -> bool:
        """Write the form's settings to ``path`` and say so in the status bar."""
        return self.experiments.save(path)

    @Slot()
    def copy_command(self) -> None:
        """Put the ``gradviz fit`` line that repeats the form's setup on the clipboard."""
        from gradviz.core.settings.reproduce import fit_command_line

        config = self._form_config()
        if config is None:
            return
        line = fit_command_line(config)
        QGuiApplication.clipboard().setText(line)
        self.window.statusBar().showMessage(f"Copied: {line}", 8000)

    # ---- errors ------------------------------------------------------------------------------
    @Slot(str, str)
    def show_error(
        self, sentence: str, details: str, title: str = ErrorDialog.TITLE
    ) -> ErrorDialog:
        """Show a failure without blocking; the window stays usable behind it. ``title``
        names what failed (callers that know set it)."""
        if self.error_dialog is not None:
            self.error_dialog.close()
            self.error_dialog.deleteLater()
        self.error_dialog = ErrorDialog(sentence, details, self.log_path, self.window, title)
        self.error_dialog.open()
        return self.error_dialog

    def report_exception(self, exc: BaseException, details: str) -> None:
        self.show_error(describe_run_failure(exc), details, ErrorDialog.RUN_STOPPED_TITLE)

    # ---- closing -----------------------------------------------------------------------------
    def _on_close_requested(self) -> bool:
        if self._shut_down:
            return True  # already stopped (e.g. --screenshot): nothing to ask
        going = self.session.state.going or self.investigations.comparing
        if going and not self.confirm("Quit gradviz?", "A run is going. Stop it and quit?"):
            return False
        self.shutdown()
        return True

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Save settings, stop every worker and join its thread (idempotent)."""
        if self._shut_down:
            return
        self._shut_down = True
        self.enter_leaves_field.uninstall()
        self.window.pages.show_page(0)  # save the lab's layout, not the explorer page
        remember_lab(self.settings, self.window, self.form)
        if self.error_dialog is not None:
            self.error_dialog.close()
        self.investigations.shutdown(timeout_s)
        self.session.shutdown(timeout_s)
        self.loader.join(timeout_s)
        self.models.shutdown(timeout_s)
        self.recordings.shutdown(timeout_s)
        self.graph.shutdown(timeout_s)
        self.window.explorer.shutdown()

    @property
    def thread_count(self) -> int:
        """Worker threads still held (0 after every run has been joined)."""
        return (
            len(self.session.workers())
            + self.investigations.thread_count
            + int(self.window.explorer.worker_running())
        )
