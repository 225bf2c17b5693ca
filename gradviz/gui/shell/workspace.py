"""Pages beside a dock-based main window: "Distance-fit lab" (its docks) and full-window pages
such as the Jacobian explorer, chosen with a tab bar under the menu.

The lab is the window's docks, so it cannot sit inside a QTabWidget without rebuilding the
window. Instead the other pages live in a stacked central widget that is hidden while the
lab shows. Showing a page saves the window state and hides the visible docks; showing the
lab again shows them and restores that state (sizes, raised tabs). Before the window
closes the lab is put back, so the saved layout never records the docks as hidden.
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QEvent, QObject, Qt, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QStackedWidget, QTabBar, QToolBar


class WorkspacePages(QObject):
    """Adds a tab bar to ``window``; ``add_page`` puts each page behind its tab, in order.

    A page is an object with ``widget``: the page's content, or None for the page that is
    the window's docks (the lab; the first page). ``show_page(k)`` shows the k-th page
    (0-based, the lab at 0). Ctrl+1, Ctrl+2, ... switch too.
    """

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.bar = QTabBar()
        self.bar.setObjectName("workspace-tabs")
        self.bar.setDrawBase(False)
        self.bar.setExpanding(False)
        self.stack = QStackedWidget()
        self.toolbar = QToolBar("Workspaces")
        self.toolbar.setObjectName("workspace-toolbar")
        self.toolbar.setMovable(False)
        self.toolbar.addWidget(self.bar)
        window.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.toolbar)
        window.setCentralWidget(self.stack)
        self.stack.hide()  # the lab's docks fill the window
        #: The page objects, in tab order.
        self.pages: list[object] = []
        self._hidden_docks: list[QDockWidget] = []
        self._lab_state = QByteArray()
        self.actions: list[QAction] = []
        self.bar.currentChanged.connect(self._on_tab_changed)
        window.installEventFilter(self)

    def _add_shortcut(self, k: int) -> None:
        action = QAction(f"Show {self.bar.tabText(k)}", self.window)
        action.setShortcut(QKeySequence(f"Ctrl+{k + 1}"))
        action.setData(k)
        action.triggered.connect(self._on_shortcut)
        self.window.addAction(action)
        self.actions.append(action)

    def add_page(self, title: str, page: object) -> int:
        """Add ``page`` after the others under ``title``; returns its index for
        ``show_page``. Only the first page may be the window's docks (``widget`` None)."""
        widget = getattr(page, "widget", None)
        if widget is None and self.pages:
            raise ValueError(f"page {title!r} has no widget: only the first page is docks")
        if widget is not None:
            if not self.pages:
                raise ValueError("the first page is the window's docks (widget None)")
            self.stack.addWidget(widget)
        self.pages.append(page)
        blocked = self.bar.blockSignals(True)  # the first tab is current without a change
        index = self.bar.addTab(title)
        self.bar.blockSignals(blocked)
        self._add_shortcut(index)
        self._say_current(self.current())
        return index

    def index_of(self, page: object) -> int:
        """The index of ``page`` (as added) among the pages."""
        return next(k for k, p in enumerate(self.pages) if p is page)

    def current(self) -> int:
        return self.bar.currentIndex()

    def page(self, index: int | None = None) -> object | None:
        """What stands for the page at ``index`` (the current one by default): its widget,
        or the page object where the page is the window's docks."""
        index = self.current() if index is None else index
        if not 0 <= index < len(self.pages):
            return None
        page = self.pages[index]
        widget = getattr(page, "widget", None)
        return page if widget is None else widget

    def show_page(self, index: int) -> None:
        self.bar.setCurrentIndex(index)  # _on_tab_changed does the work

    @Slot(int)
    def _on_tab_changed(self, index: int) -> None:
        self._show_content(index)
        self._say_current(index)

    def _say_current(self, index: int) -> None:
        """The window's title names the page; each page that has ``set_current(bool)``
        hears whether it is the one shown (the lab shows its run's toolbar, Run menu and
        status only then)."""
        self.window.setWindowTitle(f"gradviz — {self.bar.tabText(index)}")
        for k, page in enumerate(self.pages):
            set_current = getattr(page, "set_current", None)
            if set_current is not None:
                set_current(k == index)

    def _show_content(self, index: int) -> None:
        if index == 0:
            if self.stack.isVisible():
                self.stack.hide()
                # Visibility, sizes and raised tabs as the user left them.
                if not self.window.restoreState(self._lab_state):
                    for dock in self._hidden_docks:
                        dock.show()
                for dock in self._hidden_docks:  # the tab on top of each group, as it was
                    if self.window.tabifiedDockWidgets(dock):
                        dock.raise_()
                self._hidden_docks = []
            return
        if not self.stack.isVisible():
            self._lab_state = self.window.saveState()
            docks = self.window.findChildren(QDockWidget)
            self._hidden_docks = [d for d in docks if d.isVisible()]
            for dock in self._hidden_docks:
                dock.hide()
        self.stack.setCurrentIndex(index - 1)
        self.stack.show()

    @Slot()
    def _on_shortcut(self) -> None:
        action = self.sender()
        if isinstance(action, QAction):
            self.show_page(int(action.data()))

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if obj is self.window and event.type() == QEvent.Type.Close:
            self.show_page(0)  # the saved layout must hold the docks as the user left them
        return False
