"""The window's Help menu: Documentation, Keyboard shortcuts, About gradviz.

Documentation opens the documentation beside this copy of gradviz, through the desktop
(``QDesktopServices``): the built site (``site/index.html``, made by ``mkdocs build``), else
the documentation's sources (``docs/``), else the README. An installed package carries none
of them: the entry is then off and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QUrl, Slot
from PySide6.QtGui import QDesktopServices

import gradviz
from gradviz.gui.shell.about_dialog import AboutDialog
from gradviz.gui.shell.shortcuts import ShortcutsDialog

#: The folder that holds the gradviz package, where this is a checkout of the project.
PROJECT_ROOT = Path(gradviz.__file__).resolve().parent.parent
#: Where the documentation may be, best first (relative to the project's root).
DOCUMENTATION = ("site/index.html", "docs", "README.md")


def documentation_url(root: Path = PROJECT_ROOT) -> QUrl | None:
    """The documentation beside the gradviz package at ``root`` (a checkout: it holds
    ``pyproject.toml`` and ``gradviz/``), or None where there is none."""
    if not ((root / "pyproject.toml").is_file() and (root / "gradviz").is_dir()):
        return None
    for place in DOCUMENTATION:
        if (root / place).exists():
            return QUrl.fromLocalFile(str(root / place))
    return None


class HelpMenu(QObject):
    """Answers the Help menu's entries of ``window``. ``docs_url`` is what Documentation
    opens (None: the entry is off); ``open_url(url)`` opens it (the desktop's; tests
    replace it). ``about_dialog`` and ``shortcuts_dialog``: the last shown (None before)."""

    def __init__(self, window, log_path: str, docs_url: QUrl | None = None) -> None:
        super().__init__(window)
        self.window, self.log_path = window, log_path
        self.about_dialog: AboutDialog | None = None
        self.shortcuts_dialog: ShortcutsDialog | None = None
        self.open_url: Callable[[QUrl], bool] = QDesktopServices.openUrl
        self.docs_url = docs_url
        docs = window.actions["docs"]
        docs.setEnabled(docs_url is not None)
        if docs_url is None:
            docs.setToolTip(
                "No documentation beside this installation of gradviz (it is in the project's "
                "docs/ folder)"
            )
        docs.triggered.connect(self.open_documentation)
        window.actions["shortcuts"].triggered.connect(self.show_shortcuts)
        window.actions["about"].triggered.connect(self.show_about)

    @Slot()
    def open_documentation(self) -> bool:
        return self.docs_url is not None and bool(self.open_url(self.docs_url))

    @Slot()
    def show_shortcuts(self) -> ShortcutsDialog:
        self._close(self.shortcuts_dialog)
        self.shortcuts_dialog = ShortcutsDialog(self.window)
        self.shortcuts_dialog.open()
        return self.shortcuts_dialog

    @Slot()
    def show_about(self) -> AboutDialog:
        self._close(self.about_dialog)
        self.about_dialog = AboutDialog(self.log_path, self.window)
        self.about_dialog.open()
        return self.about_dialog

    @staticmethod
    def _close(dialog) -> None:
        if dialog is not None:
            dialog.close()
            dialog.deleteLater()

    def shutdown(self) -> None:
        for dialog in (self.about_dialog, self.shortcuts_dialog):
            if dialog is not None:
                dialog.close()
