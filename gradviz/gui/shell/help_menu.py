"""The window's Help menu: About gradviz."""

from __future__ import annotations

from PySide6.QtCore import QObject, Slot

from gradviz.gui.shell.about_dialog import AboutDialog


class HelpMenu(QObject):
    """Answers the Help menu's entries of ``window``; ``about_dialog`` is the last About
    shown (None before)."""

    def __init__(self, window, log_path: str) -> None:
        super().__init__(window)
        self.window, self.log_path = window, log_path
        self.about_dialog: AboutDialog | None = None
        window.actions["about"].triggered.connect(self.show_about)

    @Slot()
    def show_about(self) -> AboutDialog:
        if self.about_dialog is not None:
            self.about_dialog.close()
            self.about_dialog.deleteLater()
        self.about_dialog = AboutDialog(self.log_path, self.window)
        self.about_dialog.open()
        return self.about_dialog

    def shutdown(self) -> None:
        if self.about_dialog is not None:
            self.about_dialog.close()
