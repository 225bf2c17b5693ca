"""Help > Keyboard shortcuts: every shortcut of the window, read from its actions.

The list is built from the QActions themselves each time the dialog opens (their text,
their shortcuts and the menu that holds them), never written by hand, so it cannot drift
from what the keys do.
"""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QMenu,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

#: Where an action with a shortcut but in no menu lives (the pages' Ctrl+1, Ctrl+2, ...).
NO_MENU = "Window"
COLUMNS = ("Keys", "Action", "Menu")


def plain_text(text: str) -> str:
    """A menu text without its mnemonic ``&`` and trailing ``…``."""
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…").strip()


def keys_text(action: QAction) -> str:
    """The action's shortcuts as the platform writes them, e.g. ``"Ctrl+O"``."""
    return ", ".join(s.toString(QKeySequence.SequenceFormat.NativeText) for s in action.shortcuts())


def menu_of(action: QAction) -> str:
    """The title of the menu that holds ``action`` (``NO_MENU`` where none does)."""
    for holder in action.associatedObjects():
        if isinstance(holder, QMenu) and holder.title():
            return plain_text(holder.title())
    return NO_MENU


def shortcut_rows(window: QWidget) -> list[tuple[str, str, str]]:
    """(keys, action, menu) for every action of ``window`` that has a shortcut, in menu
    order (the menu bar's, then the rest), each action once."""
    actions = [a for a in window.findChildren(QAction) if not a.shortcut().isEmpty()]
    places: dict[int, tuple[int, int]] = {}  # id(action) -> (menu, position in it)
    for m, menu_action in enumerate(window.menuBar().actions()):
        menu = menu_action.menu()
        for k, action in enumerate(menu.actions() if menu is not None else []):
            places.setdefault(id(action), (m, k))
    last = len(window.menuBar().actions())
    ordered = sorted(enumerate(actions), key=lambda pair: places.get(id(pair[1]), (last, pair[0])))
    return [(keys_text(a), plain_text(a.text()), menu_of(a)) for _, a in ordered]


class ShortcutsDialog(QDialog):
    """The shortcuts of ``window`` in a table (``table``): keys, action, menu."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.setWindowTitle("Keyboard shortcuts")
        self.setObjectName("gradviz-shortcuts")
        self.rows = shortcut_rows(window)
        self.table = QTableWidget(len(self.rows), len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        for r, row in enumerate(self.rows):
            for c, text in enumerate(row):
                self.table.setItem(r, c, QTableWidgetItem(text))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
        self.resize(520, 520)

    def table_rows(self) -> list[tuple[str, ...]]:
        """The table as it reads."""
        return [
            tuple(self.table.item(r, c).text() for c in range(self.table.columnCount()))
            for r in range(self.table.rowCount())
        ]
