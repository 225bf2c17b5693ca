"""The error dialog: a plain sentence, the details on demand, and where the log is."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics, QGuiApplication
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLayout,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

#: The narrowest error dialog (px): its sentence reads in a few lines.
MIN_WIDTH = 520
#: Room a title bar takes beside its title (px): icon, close, maximise and minimise.
TITLE_BAR_EXTRA = 180


def title_width(title: str) -> int:
    """Width (px) of ``title`` in a bold application font, as title bars draw it."""
    font = QApplication.font()
    font.setBold(True)
    return QFontMetrics(font).horizontalAdvance(title)


class ErrorDialog(QDialog):
    """Says what went wrong in one sentence; "Copy details" puts the traceback on the
    clipboard for a bug report. Shown with ``open()`` (window-modal, never blocks the
    caller), so the run's last good state stays on screen behind it."""

    #: Its title unless the caller names what failed (a run: ``RUN_STOPPED_TITLE``).
    TITLE = "gradviz: something went wrong"
    RUN_STOPPED_TITLE = "gradviz: the run stopped"

    def __init__(
        self,
        sentence: str,
        details: str,
        log_path: str,
        parent: QWidget | None = None,
        title: str = TITLE,
    ):
        super().__init__(parent)
        self.sentence = sentence
        self.details = details
        self.message = message = QLabel(sentence)
        message.setWordWrap(True)
        message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        font = message.font()
        font.setPointSizeF(font.pointSizeF() * 1.1)
        message.setFont(font)
        self.log_label = QLabel(f"Details are also in the log file:\n{log_path}")
        self.log_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.log_label.setStyleSheet("color: palette(mid);")
        self.details_box = QPlainTextEdit(details)
        self.details_box.setReadOnly(True)
        self.details_box.setVisible(False)
        self.details_box.setMinimumHeight(180)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy details")
        self.show_button = QPushButton("Show details")
        self.show_button.setCheckable(True)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.show_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        self.copy_button.clicked.connect(self.copy_details)
        self.show_button.toggled.connect(self.details_box.setVisible)
        layout = QVBoxLayout(self)
        # The dialog grows with the details instead of squeezing them over the buttons.
        layout.setSizeConstraint(QLayout.SizeConstraint.SetMinimumSize)
        layout.addWidget(message)
        layout.addWidget(self.log_label)
        layout.addWidget(self.details_box)
        layout.addWidget(buttons)
        self.setWindowTitle(title)

    def setWindowTitle(self, title: str) -> None:  # noqa: N802 - Qt override
        """The title, and room for it: the window manager cuts a title wider than the
        dialog ("gradviz: the mod... d not be opened"), so the dialog is at least as wide
        as its title in the title bar's (bold) font plus the bar's buttons."""
        super().setWindowTitle(title)
        # The layout sizes the dialog from its contents (SetMinimumSize overrides the
        # dialog's own minimum width, which left it 294 px wide): the sentence holds it.
        margins = self.layout().contentsMargins()
        width = max(MIN_WIDTH, title_width(title) + TITLE_BAR_EXTRA)
        self.message.setMinimumWidth(width - margins.left() - margins.right())
        self.layout().activate()  # a dialog already shown widens now

    def copy_details(self) -> None:
        QGuiApplication.clipboard().setText(f"{self.sentence}\n\n{self.details}")
