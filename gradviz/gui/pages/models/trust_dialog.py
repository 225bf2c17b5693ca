"""The question asked before a model file that can run code is opened.

Shown with ``open()`` (window-modal, never blocks the caller); ``answered(bool)`` says what
the user chose. Cancel is the default button: pressing Enter does not trust the file.
"""

from __future__ import annotations

import os

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.modelio.formats import BY_NAME

#: The "format" of a trust question about the user's own model class (a Python file).
MODEL_CLASS = "model_class"


def trust_reason(format_name: str, runs_as: str | None = None) -> str:
    """Why this format needs trust, in one sentence; ``runs_as``: what will run, where the
    file's own code does not (a whole pickled module rebuilt from installed classes)."""
    if runs_as:
        return (
            f"{runs_as} Importing an installed package runs its code with your permissions. "
            "Go on only if you trust that package."
        )
    if format_name == MODEL_CLASS:
        return (
            "Opening the weights with this model class imports this Python code, which runs "
            "with your permissions. Go on only if you trust it."
        )
    what = BY_NAME[format_name].title if format_name in BY_NAME else "a program"
    return (
        f"This file is {what}. Opening it can run code stored in the file, with your "
        "permissions. Open it only if you trust where it came from."
    )


class TrustDialog(QDialog):
    """Names the file, its SHA-256 and why trust is needed; Cancel is the default."""

    answered = Signal(bool)

    def __init__(
        self,
        path: str,
        sha256: str,
        format_name: str,
        parent: QWidget | None = None,
        runs_as: str | None = None,
    ):
        super().__init__(parent)
        code = format_name == MODEL_CLASS
        self.setWindowTitle("Trust this Python code?" if code else "Trust this model file?")
        self.setObjectName("trust-dialog")
        self.path = path
        self.sha256 = sha256
        name = QLabel(f"<b>{os.path.basename(path)}</b>")
        where = QLabel(path)
        digest = QLabel(f"SHA-256: <code>{sha256}</code>")
        self.reason = QLabel(trust_reason(format_name, runs_as))
        self.reason.setWordWrap(True)
        for label in (where, digest):
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        note = QLabel("gradviz asks every time; the answer is not remembered.")
        note.setStyleSheet("color: palette(mid);")
        buttons = QDialogButtonBox()
        self.open_button = buttons.addButton(
            "Trust and open", QDialogButtonBox.ButtonRole.AcceptRole
        )
        self.cancel_button = buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.open_button.setAutoDefault(False)
        self.cancel_button.setDefault(True)
        self.cancel_button.setFocus()
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        for widget in (name, where, digest, self.reason, note, buttons):
            layout.addWidget(widget)
        self.setMinimumWidth(560)
        self.finished.connect(self._on_finished)

    @Slot(int)
    def _on_finished(self, result: int) -> None:
        self.answered.emit(result == QDialog.DialogCode.Accepted)
