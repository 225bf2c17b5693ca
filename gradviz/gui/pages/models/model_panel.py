"""The model panel: which file is open, what gradviz assumed, the activation, the layers.

Sits beside the Jacobian explorer. ``activationChosen(name)`` asks for a reload with that
activation (only offered where the activation had to be assumed); ``orderConfirmed()`` asks
for a reload that runs a module of a class of its own in the listed layer order;
``modelClassWanted()`` for running the file's weights in the user's own class.
"""

from __future__ import annotations

import os

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QFrame,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.modelio import ModelInfo
from gradviz.core.modelio.formats import BY_NAME
from gradviz.core.settings.config import ACTIVATIONS
from gradviz.gui.pages.models.layer_list import LayerTable
from gradviz.gui.pages.models.order_confirm import OrderConfirmation

#: The layer table's least height: the panel scrolls rather than squeeze it or the text.
LAYERS_MIN_HEIGHT = 160
#: The panel's least width, whatever it shows (its splitter handle still folds it away).
PANEL_MIN_WIDTH = 220


class ModelPanel(QWidget):
    """Shows a ModelInfo: summary, assumptions, reason it cannot run, layer table."""

    activationChosen = Signal(str)
    orderConfirmed = Signal()
    modelClassWanted = Signal()
    installedClassWanted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("model-panel")
        self.title = QLabel("No model file open. File > Open model…, or drop a file here.")
        self.title.setWordWrap(True)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        self.runs_as = QLabel("")
        self.runs_as.setObjectName("model-runs-as")
        self.runs_as.setWordWrap(True)
        self.tree = QLabel("")
        self.tree.setObjectName("model-tree")
        self.tree.setTextFormat(Qt.TextFormat.PlainText)
        self.tree.setToolTip("The module tree the file holds, with each module's class")
        self.assumptions = QLabel("")
        self.assumptions.setObjectName("model-assumptions")
        self.assumptions.setWordWrap(True)
        self.assumptions.setStyleSheet("color: #8a5a00;")
        self.reason = QLabel("")
        self.reason.setObjectName("model-not-runnable")
        self.reason.setWordWrap(True)
        self.reason.setStyleSheet("color: #c0392b;")
        self.activation = QComboBox()
        self.activation.addItems(ACTIVATIONS)
        self.activation.setToolTip(
            "Weights do not record the activation between layers: choose it here (reloads)"
        )
        self.activation_row = QWidget()
        row = QFormLayout(self.activation_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addRow("Activation between layers", self.activation)
        self.order = OrderConfirmation()
        self.layers = LayerTable()
        self.layers.setMinimumHeight(LAYERS_MIN_HEIGHT)
        # Everything scrolls in a narrow or short panel: squeezed below the height their
        # wrapped text needs, the labels drew over each other.
        self.body = QWidget()
        layout = QVBoxLayout(self.body)
        layout.setContentsMargins(4, 4, 4, 4)
        for widget in (
            self.title,
            self.summary,
            self.runs_as,
            self.tree,
            self.assumptions,
            self.reason,
        ):
            layout.addWidget(widget)
        layout.addWidget(self.order)
        layout.addWidget(self.activation_row)
        layout.addWidget(self.layers, stretch=1)
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setWidget(self.body)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.scroll)
        self.activation_row.setVisible(False)
        self.order.setVisible(False)
        self.order.confirmed.connect(self.orderConfirmed)
        self.order.classWanted.connect(self.modelClassWanted)
        self.order.installedWanted.connect(self.installedClassWanted)
        self.activation.activated.connect(self._on_activation_activated)
        self.setMinimumWidth(PANEL_MIN_WIDTH)

    def show_info(self, info: ModelInfo, activation: str | None = None) -> None:
        """Fill the panel from ``info``; ``activation`` is the one the model was built with."""
        self.title.setText(f"<b>{os.path.basename(info.path)}</b> ({info.format})")
        dims = info.widths_line()
        self.summary.setText(
            f"{len(info.layers)} layers, {info.parameters:,} parameters; {dims}"
            + (f"; network {info.spec}" if info.spec and not info.spec.startswith("{") else "")
        )
        self.runs_as.setText(f"Runs as: {info.runs_as}" if info.runs_as else "")
        self.runs_as.setVisible(bool(info.runs_as))
        self.tree.setText(tree_text(info))
        self.tree.setVisible(bool(info.modules))
        notes = [_in_app_words(note) for note in info.assumptions]
        if info.nonfinite_weights:
            notes.append("NaN or Inf in " + ", ".join(info.nonfinite_weights) + " (flagged below).")
        self.assumptions.setText("\n".join(f"• {n}" for n in notes))
        self.assumptions.setVisible(bool(notes))
        self.reason.setText(
            "" if info.runnable else f"Cannot run: {info.not_runnable_reason or 'unknown'}"
        )
        self.reason.setVisible(not info.runnable)
        if info.order_to_confirm and not info.runnable:
            self.reason.setText("Cannot run until you confirm the order of its layers.")
            installed = info.runs_as if info.needs_trust else None
            self.order.show_order(info.order_to_confirm, installed)
        self.order.setVisible(bool(info.order_to_confirm) and not info.runnable)
        # Offered where the activation is the caller's (not where the file had modules).
        rebuilt = info.format in BY_NAME and BY_NAME[info.format].rebuilt
        choosable = rebuilt and info.runnable and info.activation_from_caller
        self.activation_row.setVisible(choosable)
        if activation in ACTIVATIONS:
            self.activation.setCurrentText(activation)
        self.layers.show_info(info)
        self._keep_wide_enough()

    def show_not_explored(self, label: str) -> None:
        """The explorer shows ``label``, not the file described here: say so, and offer no
        activation (a choice here would replace the network the explorer shows)."""
        self.reason.setText(
            f"The explorer now shows {label}, not this file. Open the file again to explore it."
        )
        self.reason.setVisible(True)
        self.activation_row.setVisible(False)
        self.order.setVisible(False)

    def show_cancelled(self, name: str) -> None:
        """Opening ``name`` was cancelled and its program's process stopped: say so (the
        panel and the explorer keep what they showed before)."""
        self.reason.setText(f"Opening {name} was cancelled: its program was stopped.")
        self.reason.setVisible(True)

    def _keep_wide_enough(self) -> None:
        """At least as wide as the buttons' whole labels and the layer table's counts need:
        the body does not scroll sideways, so anything wider than the panel was cut
        ("hese layers in this", a Parameters column behind a scroll bar)."""
        layout = self.body.layout()
        margins = layout.contentsMargins().left() + layout.contentsMargins().right()
        bar = self.scroll.verticalScrollBar().sizeHint().width()
        needed = max(self.body.minimumSizeHint().width(), self.layers.fitting_width() + margins)
        self.setMinimumWidth(max(PANEL_MIN_WIDTH, needed + bar))

    @Slot(int)
    def _on_activation_activated(self, _index: int) -> None:
        self.activationChosen.emit(self.activation.currentText())


def tree_text(info: ModelInfo, most: int = 200) -> str:
    """A pickled module's tree, one module a line, indented by depth: ``0: Linear``
    (the class's own name; the full name is in ``gradviz inspect``)."""
    lines = []
    for name, cls in info.modules[:most]:
        depth = 0 if name == "(top)" else name.count(".") + 1
        lines.append(f"{'    ' * depth}{name}: {cls.rpartition('.')[2]}")
    if len(info.modules) > most:
        lines.append(f"… and {len(info.modules) - most:,} more modules")
    return "\n".join(lines)


#: The core's notes name the CLI's options; in the app the choice is made on this panel.
_APP_WORDS = {
    "(choose another with --activation)": "(choose another below)",
    "given by you (--in-dim)": "given by you",
    "given by you (--input-shape)": "given by you",
    "(from --model-class)": "(your model class)",
}


def _in_app_words(note: str) -> str:
    for cli, app in _APP_WORDS.items():
        note = note.replace(cli, app)
    return note
