"""Help > About: gradviz's version, the versions of the libraries it runs on (torch, the Qt
binding, pyqtgraph, ...) and the compute devices torch sees here, as selectable text."""

from __future__ import annotations

import sys

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.common.about import versions

TAGLINE = "See gradients: NaN gradients of distance matrices and per-input Jacobians, live."


def devices_text() -> str:
    """The devices torch sees, or a note while torch is still loading (never blocks on it)."""
    if "torch" not in sys.modules:
        return "(torch is still loading)"
    from gradviz.core.common.about import devices_seen

    return ", ".join(devices_seen())


def about_rows() -> list[tuple[str, str]]:
    """(name, value) rows: every version, then the devices."""
    rows = [(name, version or "not installed") for name, version in versions().items()]
    rows.append(("Devices", devices_text()))
    return rows


class AboutDialog(QDialog):
    """Versions and devices in a two-column table; Copy puts them on the clipboard for a bug
    report. Shown with ``open()``: it never blocks the caller."""

    def __init__(self, log_path: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About gradviz")
        self.setObjectName("gradviz-about")
        self.rows = about_rows()
        title = QLabel(f"<h2>gradviz {self.rows[0][1]}</h2><p>{TAGLINE}</p>")
        title.setWordWrap(True)
        table = "".join(
            f"<tr><td style='padding-right:18px; color:#555'>{name}</td>"
            f"<td><b>{value}</b></td></tr>"
            for name, value in self.rows
        )
        self.table = QLabel(f"<table>{table}</table>")
        self.table.setObjectName("about-versions")
        self.table.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.log_label = QLabel(f"Log file: {log_path}" if log_path else "")
        self.log_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.log_label.setStyleSheet("color: #555;")
        self.log_label.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy")
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        self.copy_button.clicked.connect(self.copy)
        layout = QVBoxLayout(self)
        layout.addWidget(title)
        layout.addWidget(self.table)
        layout.addWidget(self.log_label)
        layout.addWidget(buttons)
        self.setMinimumWidth(460)

    def plain_text(self) -> str:
        return "\n".join(f"{name} {value}" for name, value in self.rows)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.plain_text())
