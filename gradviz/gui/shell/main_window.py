"""The main window: menus, toolbar, status bar, the pages' tabs and a place for docks.
Layout only, no behaviour.

The pages (``shell.page_table``) connect the actions, put their docks in (``add_dock``) and
fill the status bar; the window knows nothing of runs. Every dock has an object name so the
layout can be saved and restored.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QByteArray, QMimeData, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QLabel,
    QMainWindow,
    QWidget,
)

from gradviz.gui.common.settings import fill_recent_menu
from gradviz.gui.shell.dock_tabs import hide_stray_tab_bars, keep_tab_titles_whole
from gradviz.gui.shell.workspace import WorkspacePages
from gradviz.gui.widgets.panel import ElidedLabel
from gradviz.gui.widgets.steady import SteadyBox

DEFAULT_SIZE = (1440, 900)
#: The smallest window the layout is made for (the lab at 1024 x 700 still reads).
MIN_WINDOW_SIZE = (960, 600)


class MainWindow(QMainWindow):
    """gradviz's window. ``actions`` maps a name to its QAction, ``docks`` a name to its
    dock, ``pages`` holds the pages' tabs."""

    recentChosen = Signal(str)
    recentModelChosen = Signal(str)
    #: A file dropped onto the window (a model to open).
    fileDropped = Signal(str)
    #: The window is shown for the first time, at its real size.
    firstShown = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle("gradviz — distance-fit lab")
        self.setObjectName("gradviz-main-window")
        self.setDockNestingEnabled(True)
        self.setMinimumSize(*MIN_WINDOW_SIZE)
        self.resize(*DEFAULT_SIZE)
        self.setAcceptDrops(True)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)  # the one-key shortcuts' home
        #: Asked before closing; returns False to keep the window open.
        self.close_guard: Callable[[], bool] = lambda: True
        self.actions: dict[str, QAction] = {}
        self.docks: dict[str, QDockWidget] = {}
        self._make_actions()
        self._make_menus()
        self._make_status_bar()
        #: The pages' tab bar; the pages are added from the pages table (``shell.page_table``).
        self.pages = WorkspacePages(self)
        self.default_state = self.saveState()
        self._sized = False

    # ---- actions and menus -----------------------------------------------------------------
    def add_action(
        self, name: str, text: str, shortcut: str | None = None, tip: str = ""
    ) -> QAction:
        """A window-wide action ``actions[name]``; its shortcut works anywhere in the window
        while the action is visible."""
        action = QAction(text, self)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.setToolTip(tip or text)
        action.setStatusTip(tip or text)
        self.addAction(action)
        self.actions[name] = action
        return action

    def _make_actions(self) -> None:
        self.add_action("open", "&Open experiment…", "Ctrl+O", "Open settings from a JSON file")
        self.add_action("save", "&Save experiment as…", "Ctrl+S", "Save the settings as JSON")
        self.add_action("open_model", "Open &model…", "Ctrl+M", "Open a saved PyTorch model file")
        self.add_action(
            "open_model_class",
            "Open with model c&lass…",
            None,
            "Open a state_dict or safetensors file with your own model class (runs your code)",
        )
        self.add_action("save_network", "Save &network…", None, "Save the network as a model file")
        self.actions["save_network"].setEnabled(False)
        self.add_action("quit", "&Quit", "Ctrl+Q")
        self.add_action(
            "copy_command", "&Copy as command", "Ctrl+Shift+C",
            "Copy the gradviz fit command line that repeats this setup headless",
        )  # fmt: skip
        self.add_action(
            "copy_experiment", "Copy as e&xperiment line", None,
            "Copy this setup in one line, for gradviz gui --experiment",
        )  # fmt: skip
        self.add_action("reset_layout", "Reset &layout", None, "Put every panel back")
        self.add_action("docs", "&Documentation", "F1", "Open gradviz's documentation")
        self.add_action(
            "shortcuts", "&Keyboard shortcuts", None, "Every shortcut of the window, and its menu"
        )
        self.add_action("about", "&About gradviz")

    def _make_menus(self) -> None:
        bar = self.menuBar()
        self.file_menu = file_menu = bar.addMenu("&File")
        file_menu.addAction(self.actions["open"])
        self.recent_menu = file_menu.addMenu("Open &recent")
        file_menu.addAction(self.actions["save"])
        file_menu.addSeparator()
        file_menu.addAction(self.actions["open_model"])
        file_menu.addAction(self.actions["open_model_class"])
        self.recent_models_menu = file_menu.addMenu("Recent mo&dels")
        self.recent_models_menu.setEnabled(False)
        file_menu.addAction(self.actions["save_network"])
        file_menu.addSeparator()
        file_menu.addAction(self.actions["quit"])
        self.edit_menu = edit_menu = bar.addMenu("&Edit")
        edit_menu.addAction(self.actions["copy_command"])
        edit_menu.addAction(self.actions["copy_experiment"])
        self.view_menu = bar.addMenu("&View")
        self._view_separator = self.view_menu.addSeparator()  # the docks' entries go above
        self.view_menu.addAction(self.actions["reset_layout"])
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self.actions["docs"])
        help_menu.addAction(self.actions["shortcuts"])
        help_menu.addSeparator()
        help_menu.addAction(self.actions["about"])

    def set_recent_files(self, paths: list[str]) -> None:
        fill_recent_menu(self.recent_menu, paths, self.recentChosen.emit)

    def set_recent_models(self, paths: list[str]) -> None:
        fill_recent_menu(self.recent_models_menu, paths, self.recentModelChosen.emit)

    # ---- drag and drop: a local file dropped anywhere on the window ------------------------
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt override
        if _dropped_file(event.mimeData()) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt override
        path = _dropped_file(event.mimeData())
        if path is not None:
            event.acceptProposedAction()
            self.fileDropped.emit(path)

    def _make_status_bar(self) -> None:
        bar = self.statusBar()
        self.status_labels: dict[str, QLabel] = {}
        for name, width in (
            ("state", 120),
            ("step", 120),
            ("loss", 190),
            ("speed", 100),
            ("device", 120),
            ("nan", 220),
        ):
            # The last one (first non-finite steps) takes the room left and ends in "…"
            # with the whole text as its tooltip where even that is too little.
            label = ElidedLabel("") if name == "nan" else QLabel("")
            label.setMinimumWidth(width)
            label.setObjectName(f"status-{name}")
            # In a box: their text changes every frame (see SteadyBox).
            bar.addPermanentWidget(SteadyBox(label), 1 if name == "nan" else 0)
            self.status_labels[name] = label

    # ---- docks: the pages put theirs here -------------------------------------------------
    def add_dock(self, name: str, title: str, widget: QWidget) -> QDockWidget:
        """A dock named ``dock-<name>`` (the saved layout finds it by that name) holding
        ``widget``, with its entry in the View menu; where it goes is the caller's."""
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock-{name}")
        dock.setWidget(widget)
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
            | QDockWidget.DockWidgetFeature.DockWidgetClosable
        )
        self.docks[name] = dock
        self.view_menu.insertAction(self._view_separator, dock.toggleViewAction())
        return dock

    def keep_default_layout(self) -> None:
        """The layout View > Reset layout puts back: the docks as they are now."""
        self.default_state = self.saveState()

    def readouts(self) -> dict:
        """What the page in focus says, as data (see ``gradviz.gui.common.readouts``)."""
        from gradviz.gui.common.readouts import window_readouts

        return window_readouts(self)

    def reset_layout(self) -> None:
        """View > Reset layout: the lab's page with every panel back in its place."""
        self.pages.show_page(0)
        self.restoreState(self.default_state)
        for dock in self.docks.values():
            dock.show()

    def restoreState(self, state: QByteArray, version: int = 0) -> bool:  # noqa: N802
        restored = super().restoreState(state, version)
        QTimer.singleShot(0, self._tidy_tab_bars)  # a rebuilt layout leaves stray tab bars
        return restored

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        QTimer.singleShot(0, self._tidy_tab_bars)

    def _tidy_tab_bars(self) -> None:
        hide_stray_tab_bars(self)
        keep_tab_titles_whole(self)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        QTimer.singleShot(0, self._tidy_tab_bars)
        if not self._sized:
            self._sized = True
            self.firstShown.emit()  # pages size their docks: only now at the real size
            self.default_state = self.saveState()

    # ---- closing -----------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        if self.close_guard():
            event.accept()
        else:
            event.ignore()


def _dropped_file(mime: QMimeData) -> str | None:
    """The first local file among the dropped URLs, or None."""
    for url in mime.urls() if mime.hasUrls() else []:
        if url.isLocalFile():
            return url.toLocalFile()
    return None
