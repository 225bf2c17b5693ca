"""Where the first non-finite value of a recording started, as a small panel: phase,
module, operation, source line (selectable, to copy into an editor), cause and entries.

It shows the ``origin`` of a recording's ``first_nonfinite`` (``gradviz.watch``'s
module-level origin: phase, module, cause) and whatever more an origin holds (the full
tracer's op, source line and entries); a field the origin does not know reads "-".
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QWidget,
)

from gradviz.core.record.origin_place import unnamed_place

#: The panel's rows: (origin key, label).
FIELDS = (
    ("phase", "phase"),
    ("module", "module"),
    ("op", "operation"),
    ("source", "source line"),
    ("cause", "cause"),
    ("entries", "entries"),
)


class OriginPanel(QGroupBox):
    """``show_origin(origin)`` fills it (hidden for None); ``values()`` reads it back."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Where it started", parent)
        self.setObjectName("origin-panel")
        self.fields: dict[str, QLabel | QLineEdit | CauseText] = {}
        form = QFormLayout(self)
        for key, label in FIELDS:
            if key == "source":  # a line edit: selectable and copyable as one piece
                field = QLineEdit()
                field.setReadOnly(True)
            elif key == "cause":  # several sentences at times: scrolls, never cut off
                field = CauseText()
            else:
                field = QLabel()
                field.setWordWrap(True)
                field.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            field.setObjectName(f"origin-{key}")
            self.fields[key] = field
            form.addRow(label, field)
        self.hide()

    def show_origin(self, origin: dict | None) -> None:
        self.setVisible(origin is not None)
        if origin is None:
            return
        for key, field in self.fields.items():
            text = _text(key, origin)
            field.setText(text)
            field.setToolTip(text)  # the whole text, where the panel is too narrow for it
        self.fields["source"].setCursorPosition(0)

    def values(self) -> dict[str, str]:
        """What each row shows (the readout of the panel)."""
        return {key: field.text() for key, field in self.fields.items()}


class CauseText(QPlainTextEdit):
    """The cause, read-only: room for four lines, and a scroll bar where it needs more (a
    label cut its fourth line in half at the panel's usual height)."""

    def __init__(self) -> None:
        super().__init__()
        self.setReadOnly(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        # It reads as the labels around it do: no background, its text where theirs is.
        self.viewport().setAutoFillBackground(False)
        self.document().setDocumentMargin(0)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # it wraps
        self.setMinimumHeight(4 * self.fontMetrics().lineSpacing())

    def text(self) -> str:
        return self.toPlainText()

    def setText(self, text: str) -> None:  # noqa: N802 - as QLabel's, which the panel calls
        self.setPlainText(text)


def _text(key: str, origin: dict) -> str:
    if key == "module":
        return origin.get("module") or _no_module(origin)
    if key == "entries":
        if not origin.get("indices"):
            return "-"
        shown = ", ".join(str(tuple(i)) for i in origin["indices"])
        return f"{origin.get('count', '?'):,} of {origin.get('numel', '?'):,}; first {shown}"
    value = origin.get(key)
    if key == "phase" and value is not None and origin.get("step") is not None:
        return f"{value} (step {origin['step']})"
    return "-" if value in (None, "") else str(value)


def _no_module(origin: dict) -> str:
    """The module row of an origin that names no submodule."""
    place = unnamed_place(origin)
    ambiguous = place == "no submodule"
    return f"(none: {place}; the cause says where)" if ambiguous else f"(none: {place})"
