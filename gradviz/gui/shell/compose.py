"""The composition root: the window, the parts the pages share, then each page of
``PAGES`` in tab order, the links between pages, and what is the window's own (Help,
exports, errors, closing).

The shared parts, by the names a page's needs use:

- ``window``: the ``MainWindow`` (menus, actions, status bar, docks, pages' tabs);
- ``session``: the lab's ``RunSession``, which the Runs page and the model files read too;
- ``settings``, ``log_path``: the settings file and the log file;
- ``show_error(sentence, details[, title])`` and ``confirm(title, question)``: the app's
  error dialog and yes/no question;
- ``exports``: the window's exports (``add_plot(name, plot)``);
- ``models``: the model files (File > Open model, Save network; ``panel``, ``opener``);
- ``compare_window(base_config)``: Run > Compare's window;
- ``config``, ``live``: the experiment the app was opened with (None: the remembered one).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QSettings, Slot
from PySide6.QtWidgets import QMessageBox

from gradviz.core.settings.config import FitConfig
from gradviz.gui.common import settings as settings_store
from gradviz.gui.pages.compare.window import CompareWindow
from gradviz.gui.pages.models.wiring import ModelActions
from gradviz.gui.run.session import RunSession
from gradviz.gui.run.worker import describe_run_failure
from gradviz.gui.shell.dialogs import ErrorDialog
from gradviz.gui.shell.help_menu import HelpMenu, documentation_url
from gradviz.gui.shell.links import link_pages
from gradviz.gui.shell.main_window import MainWindow
from gradviz.gui.shell.page_table import PAGES
from gradviz.gui.shell.view_export import ViewExports
from gradviz.gui.widgets.settings_form import LiveSettings

log = logging.getLogger(__name__)


class App(QObject):
    """The app, composed: ``window``, ``session``, ``pages`` (key -> page, tab order) and
    the pages by name (``lab``, ``recordings`` (Model health's), ``runs``, ``graph``,
    ``explorer``), ``models``, ``exports``, ``help``.

    ``confirm(title, question)`` asks the user (tests replace it); ``show_error`` shows a
    failure without blocking. ``run_factory`` builds the core run from a FitConfig (on the
    worker thread; None: the real one).
    """

    def __init__(
        self,
        config: FitConfig | None = None,
        live: LiveSettings | None = None,
        run_factory: Callable[[FitConfig], Any] | None = None,
        log_path: str = "",
        settings: QSettings | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings or settings_store.open_settings()
        self.log_path = log_path
        self.error_dialog: ErrorDialog | None = None
        self._shut_down = False
        self.window = MainWindow()
        self.window.close_guard = self._on_close_requested
        self.window.actions["quit"].triggered.connect(self.window.close)
        self.window.actions["reset_layout"].triggered.connect(self.window.reset_layout)
        self.session = RunSession(run_factory, available=False, parent=self)
        parts = self._shared_parts(config, live)
        self.pages: dict[str, Any] = {}
        for entry in PAGES:
            page = entry.factory(**{need: parts[need] for need in entry.needs})
            self.window.pages.add_page(entry.title, page)
            self.pages[entry.key] = parts[entry.key] = page
        self.links = link_pages(self.pages, self.window)
        self.help = HelpMenu(self.window, self.log_path, documentation_url())
        self.window.keep_default_layout()

    def _shared_parts(self, config: FitConfig | None, live: LiveSettings | None) -> dict:
        self.exports = ViewExports(self.window, self._show_error)
        self.models = ModelActions(self.window, self.settings, self.session, self._show_error)
        return {
            "window": self.window,
            "session": self.session,
            "settings": self.settings,
            "log_path": self.log_path,
            "show_error": self._show_error,
            "confirm": self._confirm,
            "exports": self.exports,
            "models": self.models,
            "compare_window": CompareWindow,
            "config": config,
            "live": live,
        }

    # ---- the pages by name -------------------------------------------------------------------
    @property
    def lab(self) -> Any:
        return self.pages["lab"]

    @property
    def recordings(self) -> Any:
        """Model health's page object, which opens the recordings."""
        return self.pages["health"]

    @property
    def runs(self) -> Any:
        return self.pages["runs"]

    @property
    def graph(self) -> Any:
        return self.pages["graph"]

    @property
    def explorer(self) -> Any:
        """The Jacobian explorer (the ``ExplorerTab`` on its page)."""
        return self.pages["explorer"].explorer

    def page_index(self, key: str) -> int:
        """The index of page ``key`` among the window's pages (tab order)."""
        return self.window.pages.index_of(self.pages[key])

    # ---- the lab's, as scripts and tests drive them ------------------------------------------
    @property
    def form(self) -> Any:
        return self.lab.form

    @property
    def views(self) -> Any:
        return self.lab.views

    @property
    def investigations(self) -> Any:
        return self.lab.investigations

    @property
    def experiments(self) -> Any:
        return self.lab.experiments

    @property
    def loader(self) -> Any:
        return self.lab.loader

    @property
    def torch_ready(self) -> bool:
        return self.lab.torch_ready

    def start_loading(self) -> None:
        self.lab.start_loading()

    def start(self) -> None:
        self.lab.start()

    def pause(self) -> None:
        self.lab.pause()

    def step_once(self) -> None:
        self.lab.step_once()

    def reset(self) -> None:
        self.lab.reset()

    # ---- questions and errors ----------------------------------------------------------------
    # What the pages are given: bound methods (a Qt connection holds them weakly, where a
    # closure would keep the app alive) that look the app's own up at each call (tests
    # replace ``confirm`` and ``show_error``).
    def _confirm(self, title: str, question: str) -> bool:
        return self.confirm(title, question)

    def _show_error(self, sentence: str, details: str, title: str = ErrorDialog.TITLE):
        return self.show_error(sentence, details, title)

    def confirm(self, title: str, question: str) -> bool:
        """Ask the user a yes/no question (tests replace this)."""
        answer = QMessageBox.question(self.window, title, question)
        return answer == QMessageBox.StandardButton.Yes

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
        going = any(getattr(page, "going", False) for page in self.pages.values())
        if going and not self.confirm("Quit gradviz?", "A run is going. Stop it and quit?"):
            return False
        self.shutdown()
        return True

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Save settings, stop every worker and join its thread (idempotent): the session's
        (the lab's runs) first, then each page's in tab order (the lab remembers its layout,
        shown), then the model files'."""
        if self._shut_down:
            return
        self._shut_down = True
        self.window.pages.show_page(0)  # save the lab's layout, not another page's
        if self.error_dialog is not None:
            self.error_dialog.close()
        self.help.shutdown()
        self.session.shutdown(timeout_s)
        for page in self.pages.values():
            if hasattr(page, "shutdown"):
                page.shutdown(timeout_s)
        self.models.shutdown(timeout_s)

    @property
    def thread_count(self) -> int:
        """Worker threads still held (0 after every run has been joined)."""
        held = (getattr(page, "thread_count", 0) for page in self.pages.values())
        return len(self.session.workers()) + sum(held)
