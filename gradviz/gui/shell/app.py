"""The application: QApplication, theme, log file, exception hook, and launching the window.

Window first: nothing imported here pulls in torch. The window is shown, then torch is
imported on a background thread, and Start is enabled when it is ready.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyqtgraph.util.garbage_collector import GarbageCollector
from PySide6.QtCore import QObject, QStandardPaths, QTimer, Slot
from PySide6.QtWidgets import QApplication

from gradviz.core.settings.config import FitConfig
from gradviz.gui.widgets.settings_form import LiveSettings

if TYPE_CHECKING:
    from gradviz.gui.shell.compose import App

log = logging.getLogger("gradviz")

#: Longest wait for torch in --screenshot mode before giving up (seconds).
SCREENSHOT_LOAD_TIMEOUT_S = 180.0


def log_file_path() -> Path:
    """Where the app logs: GRADVIZ_LOG_FILE, a temp file in tests, else the app data dir."""
    explicit = os.environ.get("GRADVIZ_LOG_FILE")
    if explicit:
        return Path(explicit)
    scope = os.environ.get("GRADVIZ_SETTINGS_SCOPE")
    if scope:
        return Path(tempfile.gettempdir()) / f"gradviz-{scope}.log"
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppLocalDataLocation)
    return Path(base or tempfile.gettempdir()) / "gradviz.log"


def setup_logging() -> Path:
    """Log to the log file (never to the console, which a GUI user does not see)."""
    path = log_file_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
    except OSError:
        path = Path(tempfile.gettempdir()) / "gradviz.log"
        handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if not any(getattr(h, "baseFilename", None) == str(path) for h in log.handlers):
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    return path


def create_application(argv: list[str] | None = None) -> QApplication:
    """The QApplication (reused if one exists), with names and the theme."""
    app = QApplication.instance() or QApplication(argv or [sys.argv[0]])
    app.setApplicationName("gradviz")
    app.setOrganizationName("gradviz")
    app.setStyle("Fusion")  # the same look on every platform; the views set their own colours
    collect_garbage_on_gui_thread()
    return app  # type: ignore[return-value]


_collector: GarbageCollector | None = None


def collect_garbage_on_gui_thread() -> None:
    """Run Python's cyclic garbage collector only on the GUI thread, on a timer.

    Automatic collection runs in whichever thread happens to allocate. When a fit or explorer
    worker triggers it, cycles that hold Qt objects (pyqtgraph items have many) are destroyed
    on that worker thread, and Qt crashes later, far from the cause. Needs the QApplication;
    calling it again does nothing.
    """
    global _collector
    if _collector is None:
        _collector = GarbageCollector(interval=0.5)


def build_controller(
    config: FitConfig | None = None,
    live: LiveSettings | None = None,
    run_factory: Callable[[FitConfig], Any] | None = None,
    log_path: str | None = None,
) -> App:
    """The app composed: its window (not shown) and every page; torch is not loaded yet."""
    from gradviz.gui.shell.compose import App

    return App(config, live, run_factory, log_path=log_path or str(log_file_path()))


class ExceptionHook:
    """Turns an exception that escaped a Qt slot into a logged error and a dialog."""

    def __init__(self, report: Callable[[BaseException, str], object]) -> None:
        self.report = report
        self.previous = sys.excepthook
        self.previous_thread = threading.excepthook

    def install(self) -> None:
        sys.excepthook = self._on_exception
        threading.excepthook = self._on_thread_exception

    def uninstall(self) -> None:
        sys.excepthook = self.previous
        threading.excepthook = self.previous_thread

    def _on_exception(self, kind, value, tb) -> None:
        details = "".join(traceback.format_exception(kind, value, tb))
        log.error("unhandled exception\n%s", details)
        if threading.current_thread() is threading.main_thread():
            self.report(value, details)

    def _on_thread_exception(self, args) -> None:
        details = "".join(
            traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback)
        )
        log.error("unhandled exception in thread %s\n%s", args.thread, details)


class ScreenshotDirector(QObject):
    """--screenshot: run the experiment for ``run_for`` seconds after its first frame (on a
    busy machine that frame may take a while), save the window, quit. Where the experiment
    does not run (settings the form refuses, a run that fails), the window is saved at once
    and the line says ``run failed: <why>`` (exit status 1): nothing waits for a person."""

    def __init__(self, controller: App, path: str, run_for: float) -> None:
        super().__init__()
        self.controller = controller
        self.path = path
        self.run_for = run_for
        self.exit_code = 1
        self._timing = False
        controller.lab.torchReady.connect(self._on_ready)
        controller.session.snapshotShown.connect(self._on_frame)
        controller.loader.failed.connect(self._on_failed)
        controller.session.failed.connect(self._on_run_failed)
        self._failure = ""
        self._captured = False
        QTimer.singleShot(int(SCREENSHOT_LOAD_TIMEOUT_S * 1000), self._on_timeout)

    @Slot()
    def _on_ready(self) -> None:
        self.controller.start()
        if not self.controller.session.state.going:  # refused: the error dialog says why
            dialog = self.controller.error_dialog
            self._on_run_failed(dialog.sentence if dialog else "the run did not start", "")

    @Slot(str, str)
    def _on_run_failed(self, sentence: str, _details: str) -> None:
        if not self._failure:
            self._failure = sentence.strip().rstrip(".") or "the run failed"
            QTimer.singleShot(0, self._capture)  # the window as it says so

    @Slot(object)
    def _on_frame(self, _snapshot: object) -> None:
        from gradviz.gui.run.session import RunState

        if not self._timing and self.controller.session.state is RunState.RUNNING:
            self._timing = True
            QTimer.singleShot(int(self.run_for * 1000), self._capture)

    @Slot()
    def _capture(self) -> None:
        from gradviz.gui.shell.window_line import screenshot_line

        if self._captured:  # a failure after the frame's timer was set: one picture
            return
        self._captured = True
        window = self.controller.window
        image = window.grab()  # the live window, run still going
        session = self.controller.session
        # Read before stopping: the line says what the saved picture shows.
        line = screenshot_line(
            self.path, image.width(), image.height(), window, session, self._failure
        )
        session.stop()
        if image.save(self.path):
            print(line, flush=True)  # one line a script can read (see window_line)
            self.exit_code = 1 if self._failure else 0
        else:
            print(f"gradviz gui: error: could not write {self.path!r}.", file=sys.stderr)
        self.controller.shutdown()
        QApplication.instance().quit()

    @Slot(str, str)
    def _on_failed(self, sentence: str, _details: str) -> None:
        print(f"gradviz gui: error: {sentence}", file=sys.stderr)
        self.controller.shutdown()
        QApplication.instance().quit()

    @Slot()
    def _on_timeout(self) -> None:
        if not self.controller.torch_ready:
            self._on_failed("torch did not load in time.", "")


def first_launch_size() -> tuple[int, int]:
    """The default window size, shrunk to the screen's free area: on a 1024 x 700 screen
    the first window fits the screen instead of being cut off at its right and bottom."""
    from PySide6.QtGui import QGuiApplication

    from gradviz.gui.shell.main_window import DEFAULT_SIZE, MIN_WINDOW_SIZE

    screen = QGuiApplication.primaryScreen()
    if screen is None:
        return DEFAULT_SIZE
    free = screen.availableGeometry()
    width = max(MIN_WINDOW_SIZE[0], min(DEFAULT_SIZE[0], free.width()))
    height = max(MIN_WINDOW_SIZE[1], min(DEFAULT_SIZE[1], free.height()))
    return width, height


def parse_window_size(text: str) -> tuple[int, int]:
    """``"1024x700"`` -> (1024, 700); a GradvizError names what is wrong otherwise."""
    from gradviz.core.common.errors import GradvizError
    from gradviz.gui.shell.main_window import MIN_WINDOW_SIZE

    parts = text.lower().replace("×", "x").split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise GradvizError(f"--window-size must look like 1024x700 (width x height), got {text!r}.")
    width, height = (int(p) for p in parts)
    if width < MIN_WINDOW_SIZE[0] or height < MIN_WINDOW_SIZE[1]:
        raise GradvizError(
            f"--window-size must be at least {MIN_WINDOW_SIZE[0]}x{MIN_WINDOW_SIZE[1]}, "
            f"got {width}x{height}."
        )
    return width, height


def main(
    experiment: str | None = None,
    screenshot: str | None = None,
    run_for: float = 3.0,
    window_size: tuple[int, int] | None = None,
    recording: str | None = None,
    model: str | None = None,
    page: str | None = None,
) -> int:
    """Open the app; returns the exit code. ``window_size`` (width, height) in pixels
    overrides the remembered size; a screenshot without it is taken at the default size.
    ``model``: a model file to open; ``page``: the page to show (a key of the pages table,
    ``shell.page_table.PAGES``)."""
    started = time.perf_counter()
    log_path = setup_logging()
    app = create_application()
    config = live = None
    if experiment:
        from gradviz.core.settings.compact import experiment_from

        config, live = experiment_from(experiment)  # GradvizError: exit 2 via the CLI
    controller = build_controller(config, live, log_path=str(log_path))
    hook = ExceptionHook(controller.report_exception)
    hook.install()
    app.aboutToQuit.connect(controller.shutdown)
    chosen = None
    if page is not None:
        from gradviz.gui.shell.launch import PageOnOpen

        chosen = PageOnOpen(controller, page)
    if recording:
        director = _open_recording(controller, recording, screenshot, run_for)
    elif model:
        from gradviz.gui.shell.launch import ModelScreenshot

        director = ModelScreenshot(controller, screenshot, run_for, chosen) if screenshot else None
        QTimer.singleShot(0, lambda: controller.models.opener.open_path(model))
    else:
        director = ScreenshotDirector(controller, screenshot, run_for) if screenshot else None
    if window_size is not None or screenshot:
        from gradviz.gui.shell.main_window import DEFAULT_SIZE

        controller.window.resize(*(window_size or DEFAULT_SIZE))
    elif controller.settings.value("window/geometry") is None:
        controller.window.resize(*first_launch_size())  # no size of the user's yet
    controller.window.show()
    log.info("window shown %.2f s after start", time.perf_counter() - started)
    if os.environ.get("GRADVIZ_EXIT_WHEN_SHOWN"):  # launch-time benchmark
        QTimer.singleShot(0, _report_shown_and_quit)
    elif (recording or model) and screenshot:
        pass  # a picture of a file: no run (a model's reading loads torch itself)
    else:
        from gradviz.gui.shell.startup import StartupWatch

        watch = StartupWatch(  # noqa: F841 - parented to the window
            controller.window,
            controller.session,
            controller.window.actions["start"],
            controller.start_loading,
        )
    try:
        code = app.exec()
    finally:
        controller.shutdown()
        hook.uninstall()
    return director.exit_code if director is not None else int(code)


def _open_recording(controller: App, path: str, screenshot: str | None, run_for: float):
    """Open ``path`` once the window shows; with ``screenshot``, the director that saves it."""
    director = None
    if screenshot:
        from gradviz.gui.shell.screenshot import RecordingScreenshot

        director = RecordingScreenshot(
            controller.recordings, controller.window, screenshot, run_for
        )
    QTimer.singleShot(0, lambda: controller.recordings.open(path))
    return director


def _report_shown_and_quit() -> None:
    print("window-shown", flush=True)
    QApplication.instance().quit()
