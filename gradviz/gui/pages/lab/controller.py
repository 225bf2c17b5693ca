"""The distance-fit lab page: the setup form, the lab's views in their docks, and the run
commands of the window's Run menu, applied to the run session with the form's settings.

The run itself lives in a ``RunSession`` (state, generation, worker, snapshots), shared
with the pages that show it too; this page turns the window's actions into session
commands with the form's settings. The settings file is read and written by
``lab_memory``, experiment files by ``ExperimentFiles``. Status bar, toolbar and views
listen to the session. All slots here run on the GUI thread.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QSettings, Qt, Signal, Slot
from PySide6.QtGui import QGuiApplication

from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig
from gradviz.gui.pages.lab.display_memory import DisplayMemory
from gradviz.gui.pages.lab.docks import LabDocks
from gradviz.gui.pages.lab.experiment_files import ExperimentFiles
from gradviz.gui.pages.lab.focus import EnterLeavesField
from gradviz.gui.pages.lab.instant_edits import InstantEdits
from gradviz.gui.pages.lab.investigate import Investigations
from gradviz.gui.pages.lab.lab_memory import remember_lab, restore_lab
from gradviz.gui.pages.lab.lab_readouts import LabPageReadouts
from gradviz.gui.pages.lab.network_gradients import NetworkGradients
from gradviz.gui.pages.lab.record_toggle import RecordToggle
from gradviz.gui.pages.lab.run_menu import RunMenu
from gradviz.gui.pages.lab.run_network import RunNetworkExplorer
from gradviz.gui.pages.lab.run_settings import fitting_config, form_config, run_differs_from_form
from gradviz.gui.pages.lab.torch_loader import TorchLoader
from gradviz.gui.run.recorded_run import FIRST_RECORDED_GENERATION
from gradviz.gui.run.session import RunSession, RunState
from gradviz.gui.run.status import RunActions, RunStatus
from gradviz.gui.run.views import LabViews
from gradviz.gui.widgets.settings_form import DEFAULT_EXPERIMENT, LiveSettings, SetupForm

log = logging.getLogger(__name__)


class LabController(QObject):
    """The lab page: ``form`` (its setup), ``views`` (its docks), ``session`` (the run).

    ``window`` gives the docks, actions and status bar; ``show_error(sentence, details)``
    and ``confirm(title, question)`` are the app's; ``compare_window(base_config)`` makes
    Run > Compare's window; ``exports.add_plot(name, plot)`` gives a plot its right-click
    exports. ``config``/``live``: the experiment to open with (else the one remembered).
    """

    torchReady = Signal()
    #: The lab is the window's docks, not a widget of the pages' stack.
    widget = None

    def __init__(
        self,
        window,
        session: RunSession,
        settings: QSettings,
        show_error: Callable[..., Any],
        confirm: Callable[[str, str], bool],
        compare_window: Callable[..., Any],
        exports: Any,
        log_path: str = "",
        config: FitConfig | None = None,
        live: LiveSettings | None = None,
    ) -> None:
        super().__init__()
        self.window, self.session, self.settings = window, session, settings
        self.show_error, self.confirm, self.log_path = show_error, confirm, log_path
        self.form = SetupForm(config or DEFAULT_EXPERIMENT)
        self.views = views = LabViews()
        self.docks = LabDocks(window, self.form, dict(views.widgets))
        self._shut_down = False
        restore_lab(self.settings, window, self.form, config, live)
        session.snapshotShown.connect(views.show)
        session.cleared.connect(views.clear)
        session.failed.connect(self.show_error)
        # Exact values of a hovered or selected entry of a display-sized picture: asked of
        # the worker through the session (never autograd here), shown when they arrive.
        views.cellWanted.connect(self._on_cell_wanted)
        session.cellValuesReady.connect(views.show_cell_values)
        exports.add_plot("loss", views.views["loss"].widget.plot)
        self.run_menu = RunMenu(window)
        self.run_actions = RunActions(session, window.actions)
        self.run_status = RunStatus(session, window.status_labels)
        self._connect()
        self.investigations = Investigations(
            session, views, window, self.form.config, self.show_error, compare_window
        )
        self.run_network = RunNetworkExplorer(session, window)
        self.record = RecordToggle(window, session, self.run_menu)
        #: What the page says (its timeline joins once the recordings give it one).
        self.page_readouts = LabPageReadouts(views, self.run_status, self.form)
        #: Back to live view from an older step: the live timeline's Follow where the
        #: recordings give the lab one (``shell.links``), else the session's newest step.
        self.follow_newest: Callable[[], None] = session.show_live
        #: The settings of the source a snapshot comes from (a recording's, where the shell
        #: links one: ``shell.links``), else None: an edit then compares with the live run.
        self.source_config: Callable[[Snapshot | None], FitConfig | None] = lambda shown: None
        self.instant_edits = InstantEdits(
            session, self.form, window, views, self.experiments,
            self._fitting_config, lambda shown: self.source_config(shown),
        )  # fmt: skip
        self.network_gradients = NetworkGradients(
            session, self.form, self, self.instant_edits.earlier.config_of
        )
        self.loader = TorchLoader()
        self.loader.ready.connect(self._on_torch_ready)
        session.snapshotShown.connect(  # step 0's frame, once
            self.loader.first_frame_shown, Qt.ConnectionType.SingleShotConnection
        )
        self.loader.failed.connect(self._on_torch_failed)

    def start_loading(self) -> None:
        """Import torch behind the window; Start is enabled once it is ready."""
        self.loader.start()

    @property
    def torch_ready(self) -> bool:
        return self.session.state.loaded

    def readouts(self) -> dict:
        return self.page_readouts.readouts()

    def set_current(self, current: bool) -> None:
        """The run's toolbar, Run menu (and its shortcuts) and status bar show only with the
        lab: other pages say their own state in their headers, never the lab's verdict
        beside data it is not about."""
        self.run_menu.set_shown(current)
        for label in self.window.status_labels.values():
            label.setVisible(current)

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays of the snapshot on screen (File > Export view data)."""
        snapshot = self.views.snapshot
        if snapshot is None:
            return {}
        values = {f.name: getattr(snapshot, f.name) for f in dataclasses.fields(snapshot)}
        return {name: v for name, v in values.items() if isinstance(v, np.ndarray)}

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
        a["copy_command"].triggered.connect(self.copy_command)
        self.experiments = ExperimentFiles(self.window, self.form, self.settings, self.show_error)
        self.form.changed.connect(self._on_setting_changed)
        self.enter_leaves_field = EnterLeavesField(self.window.docks["setup"], self.window)
        self.display_memory = DisplayMemory(self.settings, self.views)

    # ---- run commands: the session's, with the form's settings -------------------------------
    def _form_config(self) -> FitConfig | None:
        return form_config(self.form, self.session, self.show_error)

    def _fitting_config(self) -> FitConfig | None:
        return fitting_config(self.form, self.session, self.show_error)

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
            self.follow_newest()  # the timeline's Follow, which shows the newest step
        else:
            self.session.show_live()

    @Slot()
    def step_once(self) -> None:
        """Pause (if running) and take exactly one step."""
        self._command(self.session.step)

    def _command(self, command: Callable[..., None]) -> None:
        """``command()`` on the current run, or ``command(config)`` for a new run from the
        form's settings once they pass the memory preflight."""
        if run_differs_from_form(self.form, self.session):
            self.session.stop()  # its step 0 only: the run starts from the form's settings
        if self.session.worker is not None:
            command()
        elif self.session.available:
            config = self._fitting_config()
            if config is not None:
                command(config)

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

    # ---- closing -----------------------------------------------------------------------------
    @property
    def going(self) -> bool:
        """Whether closing the app would end a run of this page (the lab's or a compared
        one)."""
        return self.session.state.going or self.investigations.comparing

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Remember the settings and layout; stop this page's workers (idempotent). The
        window shows the lab (its layout is what is saved) before this is called."""
        if self._shut_down:
            return
        self._shut_down = True
        self.enter_leaves_field.uninstall()
        remember_lab(self.settings, self.window, self.form)
        self.investigations.shutdown(timeout_s)
        self.loader.join(timeout_s)
        self.record.shutdown()  # after the session's workers (the app joins them first)

    @property
    def thread_count(self) -> int:
        """Worker threads of this page still held (the session's are counted apart)."""
        return self.investigations.thread_count
