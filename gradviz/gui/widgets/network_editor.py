"""The network editor: a diagram of a network that is edited by clicks.

Used by the lab's setup panel (the coordinate network) and by the Jacobian explorer (the
network explored). The diagram (``NetworkDiagram``) shows the network input to output; under
each column a width box with + / - buttons, under each hidden column the activation that
follows it and a button that removes it; "+" and "-" beside "hidden layers" add one before
the output or remove the last. Every click makes a new spec (``gradviz.core.nets.chain_edits``)
and emits its text as ``specEdited``; the owner puts it in its spec field, whose own edits
come back through ``set_spec``, so the text and the diagram never disagree. A spec text that
does not parse leaves the diagram on the last valid network (``set_stale``).

While a run of the network shown is on screen, ``show_gradients`` draws each layer's weight
and bias gradient (see network_diagram), and a click on a layer says ``layerClicked``;
``readouts()`` returns everything shown as data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.common.errors import GradvizError
from gradviz.core.common.health import HEALTH_LABELS
from gradviz.core.nets.chain_edits import Chain, spec_text
from gradviz.core.nets.layer_gradients import LayerGradient, ParamGradient
from gradviz.core.nets.networks import MAX_WIDTH, NetworkSpec
from gradviz.core.settings.config import ACTIVATIONS
from gradviz.gui.widgets.network_diagram import (
    GradientLegend,
    NetworkDiagram,
    drawn_units,
    health_colour,
    thickness,
)
from gradviz.gui.widgets.wheel import wheel_scrolls_past

_COLUMN_WIDTH = 68  # room for a width box and the longest activation name
NO_GRADIENTS = "Gradients appear here while a run of this network is on screen."


class NetworkEditor(QWidget):
    """Diagram and controls of one network; see the module docstring.

    ``input_words(width)`` and ``output_words(width)`` say what the input and output widths
    are in the owner's terms. ``output_lock``, when not empty, says why the output width is
    not edited here (the lab's follows D).
    """

    specEdited = Signal(str)
    layerClicked = Signal(int)  # Linear layer k (0 = the first) clicked in the diagram

    def __init__(
        self,
        input_words: Callable[[int], str] = lambda w: f"{w:,} inputs",
        output_words: Callable[[int], str] = lambda w: f"{w:,} outputs",
        output_lock: str = "",
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.input_words, self.output_words = input_words, output_words
        self.output_lock = output_lock
        self.spec: NetworkSpec | None = None
        self.chain: Chain | None = None
        self._stale = ""
        self._gradients: list[LayerGradient] | None = None
        self._gradient_note = NO_GRADIENTS
        self._columns: list[dict[str, QWidget]] = []
        self._build()

    # ---- layout -----------------------------------------------------------------------------
    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(3)
        header = QHBoxLayout()
        self.hidden_label = QLabel()
        self.remove_layer = _tool("−", "Remove the last hidden layer", "remove-last-layer")
        self.add_layer = _tool("+", "Add a hidden layer before the output", "add-layer")
        self.summary = QLabel()
        self.summary.setObjectName("network-summary")
        header.addWidget(self.hidden_label)
        header.addWidget(self.remove_layer)
        header.addWidget(self.add_layer)
        header.addStretch(1)
        header.addWidget(self.summary)
        layout.addLayout(header)
        self.host = QWidget()
        self.grid = QGridLayout(self.host)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setHorizontalSpacing(2)
        self.grid.setVerticalSpacing(2)
        self.diagram = NetworkDiagram()
        self.diagram.centres = self._column_centres
        self.diagram.layerClicked.connect(self.layerClicked)
        self.scroll = QScrollArea()
        self.scroll.setWidget(self.host)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout.addWidget(self.scroll)
        self.words = QLabel()
        self.words.setWordWrap(True)
        self.words.setObjectName("network-words")
        self.note = QLabel(NO_GRADIENTS)
        self.note.setWordWrap(True)
        self.note.setObjectName("network-note")
        self.legend = GradientLegend()
        self.legend.hide()
        for label in (self.words, self.note):
            label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
            label.setMinimumWidth(0)
        layout.addWidget(self.words)
        layout.addWidget(self.note)
        layout.addWidget(self.legend)
        self.add_layer.clicked.connect(self._on_add_layer)
        self.remove_layer.clicked.connect(self._on_remove_last_layer)

    def _column_centres(self) -> list[float]:
        """The x of each column's controls in the diagram (they share the grid's columns)."""
        origin = self.diagram.x()
        return [
            self.grid.cellRect(1, i).center().x() - origin
            for i in range(len(self._columns))
            if self.grid.cellRect(1, i).isValid()
        ]

    def _rebuild_columns(self, count: int) -> None:
        """Controls for ``count`` columns (widgets of columns no longer there are deleted)."""
        for column in self._columns:
            for name in ("box", "activation", "remove"):
                if name in column:
                    column[name].hide()
                    column[name].deleteLater()
        self._columns = []
        self.grid.removeWidget(self.diagram)
        self.grid.addWidget(self.diagram, 0, 0, 1, max(count, 1))
        for i in range(count):
            self._columns.append(self._column_controls(i, count))
            self.grid.setColumnStretch(i, 1)
            self.grid.setColumnMinimumWidth(i, _COLUMN_WIDTH)
        for i in range(count, self.grid.columnCount()):
            self.grid.setColumnStretch(i, 0)
            self.grid.setColumnMinimumWidth(i, 0)
        self.host.setMinimumWidth(count * (_COLUMN_WIDTH + 2))
        self.scroll.setFixedHeight(self.host.sizeHint().height() + 16)

    def _column_controls(self, i: int, count: int) -> dict[str, QWidget]:
        width = QSpinBox()
        width.setObjectName(f"width-{i}")
        width.setRange(1, MAX_WIDTH)
        width.setButtonSymbols(QAbstractSpinBox.ButtonSymbols.NoButtons)
        width.setKeyboardTracking(False)  # a typed width applies on Enter, not per digit
        width.setAlignment(Qt.AlignmentFlag.AlignCenter)
        width.setMinimumWidth(28)
        width.valueChanged.connect(lambda value, i=i: self._on_width(i, value))
        wheel_scrolls_past(width)
        less = _tool("−", "One unit fewer", f"fewer-{i}")
        more = _tool("+", "One unit more", f"more-{i}")
        less.clicked.connect(width.stepDown)
        more.clicked.connect(width.stepUp)
        for button in (less, more):
            button.setAutoRepeat(True)
            button.setFixedWidth(17)
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(1)
        row.addWidget(less)
        row.addWidget(width, stretch=1)
        row.addWidget(more)
        self.grid.addWidget(box, 1, i)
        controls: dict[str, QWidget] = {"width": width, "less": less, "more": more, "box": box}
        if 0 < i < count - 1:
            activation = QComboBox()
            activation.setObjectName(f"activation-{i}")
            activation.addItems(list(ACTIVATIONS))
            activation.setToolTip(f"The activation after hidden layer {i}")
            activation.activated.connect(lambda _index, i=i: self._on_activation(i))
            wheel_scrolls_past(activation)
            remove = _tool("✕", f"Remove hidden layer {i}", f"remove-{i}")
            remove.clicked.connect(lambda _checked=False, i=i: self._on_remove(i))
            self.grid.addWidget(activation, 2, i)
            self.grid.addWidget(remove, 3, i, Qt.AlignmentFlag.AlignHCenter)
            controls |= {"activation": activation, "remove": remove}
        return controls

    # ---- what is shown ----------------------------------------------------------------------
    def set_spec(self, spec: NetworkSpec | None, note: str = "") -> None:
        """Show ``spec`` (None: no network to edit, ``note`` says why); clears ``set_stale``."""
        self._stale = ""
        if spec == self.spec and spec is not None:
            self._show_words()
            return
        self.spec = spec
        self.chain = Chain.of(spec) if spec is not None else None
        widths = spec.widths() if spec is not None else []
        if len(widths) != len(self._columns):
            self._rebuild_columns(len(widths))
        self._show_values(widths)
        self._show_words(note)

    def set_stale(self, problem: str) -> None:
        """The spec text does not parse (``problem``): keep the last valid network, say so."""
        self._stale = problem
        self._show_words()

    def _show_values(self, widths: list[int]) -> None:
        activations = list(self.chain.activations) if self.chain else []
        editable = self.chain is not None
        for i, column in enumerate(self._columns):
            box = column["width"]
            box.blockSignals(True)
            box.setValue(widths[i])
            box.blockSignals(False)
            locked = bool(self.output_lock) and i == len(widths) - 1
            column["box"].setEnabled(editable and not locked)
            box.setToolTip(self.output_lock if locked else self._width_tip(i, len(widths)))
            column["box"].setToolTip(box.toolTip())
            if "activation" in column:
                combo = column["activation"]
                combo.setCurrentText(activations[i - 1] if activations else "identity")
                combo.setEnabled(editable)
                column["remove"].setEnabled(editable)
        hidden = max(0, len(widths) - 2)
        self.hidden_label.setText(f"hidden layers: {hidden}")
        self.add_layer.setEnabled(editable)
        self.remove_layer.setEnabled(editable and hidden > 0)
        self.diagram.set_network(widths, activations)
        if self.spec is not None:
            self.summary.setText(f"{self.spec.parameter_count:,} parameters")
        else:
            self.summary.setText("")

    def _width_tip(self, i: int, count: int) -> str:
        if i == 0:
            return "The input width: " + self.input_words(self.spec.in_dim if self.spec else 0)
        if i == count - 1:
            return "The output width"
        return f"Units of hidden layer {i}: + / - or type a number"

    def _show_words(self, note: str = "") -> None:
        spec = self.spec
        parts = []
        if spec is not None:
            parts = [
                f"Input: {self.input_words(spec.in_dim)}.",
                f"Output: {self.output_words(spec.out_dim)}.",
            ]
            if self.chain is None:
                parts.append("Its activations are not one per hidden layer: edit it as text.")
        if note:
            parts.append(note)
        if self._stale:
            parts.append("The spec text has a problem: this is the last valid network.")
        self.words.setText(" ".join(parts))

    @property
    def gradients(self) -> list[LayerGradient] | None:
        """Each layer's gradients drawn now (None: none, ``gradient_note`` says why)."""
        return self._gradients

    @property
    def gradient_note(self) -> str:
        return self._gradient_note

    def show_gradients(self, gradients: list[LayerGradient] | None, words: str) -> None:
        """Draw each layer's gradients (``words``: which picture they are of), or clear them
        with ``words`` as the note where ``gradients`` is None."""
        self._gradients = gradients
        self._gradient_note = words if gradients is None else f"Gradients of {words}."
        self.note.setText(self._gradient_note)
        self.note.setVisible(bool(self._gradient_note))
        self.legend.setVisible(gradients is not None)
        self.diagram.set_gradients(gradients, words if gradients is not None else "")

    # ---- edits ------------------------------------------------------------------------------
    def _apply(self, edit: Callable[[Chain], Chain]) -> None:
        if self.chain is None:
            return
        try:
            spec = edit(self.chain).spec()
        except GradvizError as exc:  # the controls keep within the limits; say it anyway
            self.words.setText(str(exc))
            return
        self.set_spec(spec)
        self.specEdited.emit(spec_text(spec))

    def _on_width(self, i: int, value: int) -> None:
        self._apply(lambda chain: chain.with_width(i, value))

    def _on_activation(self, i: int) -> None:
        name = self._columns[i]["activation"].currentText()
        self._apply(lambda chain: chain.with_activation(i - 1, name))

    def _on_remove(self, i: int) -> None:
        self._apply(lambda chain: chain.with_hidden_removed(i))

    @Slot()
    def _on_add_layer(self) -> None:
        self._apply(lambda chain: chain.with_hidden_added())

    @Slot()
    def _on_remove_last_layer(self) -> None:
        if self.chain is not None and self.chain.hidden_count:
            self._apply(lambda chain: chain.with_hidden_removed(chain.hidden_count))

    # ---- for tests and scripts --------------------------------------------------------------
    def column(self, i: int) -> dict[str, QWidget]:
        """The controls under column ``i``: "width" (its box), "less" and "more" (its - and +
        buttons), and "activation" and "remove" under a hidden column."""
        return self._columns[i]

    def readouts(self) -> dict[str, Any]:
        """What the editor shows, as data."""
        spec = self.spec
        widths = spec.widths() if spec is not None else []
        return {
            "text": spec_text(spec) if spec is not None else "",
            "widths": widths,
            "activations": list(self.chain.activations) if self.chain else None,
            "shown_widths": [column["width"].value() for column in self._columns],
            "shown_activations": [
                c["activation"].currentText() for c in self._columns if "activation" in c
            ],
            "units_drawn": [drawn_units(w) for w in widths],
            "editable": self.chain is not None,
            "output_locked": bool(self.output_lock),
            "words": self.words.text(),
            "stale": bool(self._stale),
            "gradient_note": self._gradient_note,
            "gradients": [_layer_readout(g) for g in self._gradients or []],
        }


def _layer_readout(layer: LayerGradient) -> dict[str, Any]:
    return {
        "layer": layer.layer + 1,
        "weight": _param_readout(layer.weight),
        "bias": _param_readout(layer.bias) if layer.bias else None,
    }


def _param_readout(gradient: ParamGradient) -> dict[str, Any]:
    return {
        "name": gradient.name,
        "norm": gradient.norm,
        "health": HEALTH_LABELS[gradient.health],
        "colour": health_colour(gradient),
        "thickness": thickness(gradient.norm),
    }


def _tool(text: str, tip: str, name: str) -> QToolButton:
    button = QToolButton()
    button.setText(text)
    button.setToolTip(tip)
    button.setObjectName(name)
    button.setAutoRaise(False)
    return button
