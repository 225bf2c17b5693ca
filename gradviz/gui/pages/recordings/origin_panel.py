"""Where the first non-finite value of a recording started, as a small panel: phase,
module, operation, source line (selectable, to copy into an editor), cause and entries.

It shows the ``origin`` of a recording's ``first_nonfinite`` (``gradviz.watch``'s
module-level origin: phase, module, cause) and whatever more an origin holds (the full
tracer's op, source line and entries); a field the origin does not know reads "-".
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFormLayout, QGroupBox, QLabel, QLineEdit, QWidget

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
        self.fields: dict[str, QLabel | QLineEdit] = {}
        form = QFormLayout(self)
        for key, label in FIELDS:
            if key == "source":  # a line edit: selectable and copyable as one piece
                field = QLineEdit()
                field.setReadOnly(True)
            else:
                field = QLabel()
                field.setWordWrap(True)
                field.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            if key == "cause":  # a sentence or two: room for three lines, never cut mid-line
                field.setMinimumHeight(3 * field.fontMetrics().lineSpacing())
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
