"""The explorer's settings panel: network, inputs, what to show, histogram loss.

Plain widgets in group boxes; ``changed`` fires on any edit that should recompute. The spec
field is validated on every keystroke with ``NetworkSpec.parse`` (no torch), the message
shown right under it; the network editor under it is the same network, drawn and edited by
clicks (a click writes the spec field as if typed). Nothing here computes.
"""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.batches import (
    INPUT_KINDS,
    MAX_BATCH,
    MAX_GRID_SIDE,
    InputSettings,
    parse_floats,
)
from gradviz.core.nets.networks import NetworkSpec
from gradviz.core.settings.config import HISTOGRAM_LOSSES, MAX_FULL_BATCH
from gradviz.gui.pages.explorer.image_inputs import IMAGE_FILES
from gradviz.gui.widgets.network_editor import NetworkEditor

DEFAULT_SPEC = "2-20-20-4:tanh"
ERROR_COLOUR = "#E69F00"  # Okabe-Ito orange: readable on light and dark backgrounds
OK_COLOUR = "#56B4E9"
POINT_FILES = "Points (*.csv *.npy *.txt);;All files (*)"


def message_label() -> QLabel:
    label = QLabel()
    label.setWordWrap(True)
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    label.setMinimumWidth(0)
    return label


def show_message(label: QLabel, text: str, ok: bool) -> None:
    colour = OK_COLOUR if ok else ERROR_COLOUR
    label.setText(f'<span style="color:{colour}">{text}</span>' if text else "")
    label.setToolTip(text)


def _spin(lo: int, hi: int, value: int, tip: str) -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    box.setValue(value)
    box.setToolTip(tip)
    box.setKeyboardTracking(False)  # recompute on Enter or focus-out, not every digit
    return box


def _double(value: float, tip: str) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(-1e4, 1e4)
    box.setDecimals(2)
    box.setValue(value)
    box.setToolTip(tip)
    box.setKeyboardTracking(False)
    return box


class FileField(QWidget):
    """A path line edit with a Browse… button."""

    pathChanged = Signal(str)

    def __init__(
        self,
        placeholder: str,
        title: str,
        parent: QWidget | None = None,
        file_filter: str = POINT_FILES,
    ) -> None:
        super().__init__(parent)
        self.title = title
        self.file_filter = file_filter
        self.edit = QLineEdit()
        self.edit.setPlaceholderText(placeholder)
        self.edit.setMinimumWidth(60)
        self.button = QPushButton("Browse…")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, stretch=1)
        layout.addWidget(self.button)
        self.button.clicked.connect(self._on_browse)
        self.edit.editingFinished.connect(self._on_edited)

    def path(self) -> str:
        return self.edit.text().strip()

    def set_path(self, path: str) -> None:
        self.edit.setText(path)
        self.pathChanged.emit(self.path())

    @Slot()
    def _on_browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.title, self.path(), self.file_filter)
        if path:
            self.set_path(path)

    @Slot()
    def _on_edited(self) -> None:
        self.pathChanged.emit(self.path())


class ExplorerSettings(QWidget):
    """Network, inputs, selection and histogram settings of the explorer.

    ``changed`` fires when something that needs a recompute changed; ``specEdited`` when
    the user typed in the spec field (the tab then takes the network from the spec);
    ``selectionChanged`` when only the shown outputs/inputs changed (no recompute).
    """

    changed = Signal()
    specEdited = Signal()
    selectionChanged = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec: NetworkSpec | None = None
        #: one input sample's shape where the explored model declares one, else None
        self.sample_shape: tuple[int, ...] | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self._network_group())
        layout.addWidget(self._inputs_group())
        layout.addWidget(self._show_group())
        layout.addWidget(self._histogram_group())
        layout.addStretch(1)
        self._on_kind_changed()
        self.set_sample_shape(None)
        self._on_spec_text_changed(self.spec_edit.text())

    # ---- groups ------------------------------------------------------------------------
    def _network_group(self) -> QGroupBox:
        group = QGroupBox("Network")
        form = QFormLayout(group)
        self.source_label = message_label()
        self.spec_edit = QLineEdit(DEFAULT_SPEC)
        self.spec_edit.setPlaceholderText("widths-joined-by-dashes[:activation], e.g. 2-20-20-4")
        self.spec_edit.setToolTip(
            "Widths joined by '-', optionally ':activation' after every hidden layer\n"
            "(identity, relu, tanh, sigmoid, gelu, softplus), or one after a hidden width\n"
            "(2-20:tanh-20:relu-4); or the JSON form.\n"
            "2-20-20-4 is purely linear; 2-20-20-4:sigmoid is not."
        )
        self.spec_message = message_label()
        self.spec_message.setObjectName("explorer-spec-message")
        self.net_seed = _spin(0, 999_999, 0, "Seed of the network's initial weights")
        self.dtype_box = QComboBox()
        self.dtype_box.addItems(["float32", "float64"])
        self.dtype_box.setToolTip("Precision of the network and its Jacobians")
        self.network_editor = NetworkEditor(_input_words, _output_words)
        self.network_editor.setObjectName("explorer-network-editor")
        self.network_editor.show_gradients(None, "")
        form.addRow("Source", self.source_label)
        form.addRow("Spec", self.spec_edit)
        form.addRow(self.spec_message)
        form.addRow(self.network_editor)
        form.addRow("Weights seed", self.net_seed)
        form.addRow("Precision", self.dtype_box)
        self.spec_edit.textChanged.connect(self._on_spec_text_changed)
        self.spec_edit.textEdited.connect(self._on_spec_typed)
        self.network_editor.specEdited.connect(self._on_spec_clicked)
        self.net_seed.valueChanged.connect(self._on_changed)
        self.dtype_box.currentIndexChanged.connect(self._on_changed)
        return group

    def _inputs_group(self) -> QGroupBox:
        group = QGroupBox("Inputs")
        form = QFormLayout(group)
        self.inputs_form = form
        self.kind_box = QComboBox()
        for key, text in INPUT_KINDS.items():
            self.kind_box.addItem(text, key)
        self.batch_box = _spin(
            1, MAX_BATCH, 64, f"Batch size B (the full batch view needs B <= {MAX_FULL_BATCH})"
        )
        self.seed_box = _spin(0, 999_999, 0, "Seed of the random batch")
        self.file_field = FileField("CSV rows, or NPY of shape (B, ...)", "Open inputs")
        self.image_field = FileField(
            "PNG or JPEG: one sample", "Open image", file_filter=IMAGE_FILES
        )
        dims = QHBoxLayout()
        self.dim_a = _spin(0, 9_999, 0, "Input varied across the grid (x axis)")
        self.dim_b = _spin(0, 9_999, 1, "Input varied up the grid (y axis)")
        dims.addWidget(QLabel("x"))
        dims.addWidget(self.dim_a)
        dims.addWidget(QLabel("y"))
        dims.addWidget(self.dim_b)
        self.x_lo, self.x_hi = _double(-2.0, "x from"), _double(2.0, "x to")
        self.y_lo, self.y_hi = _double(-2.0, "y from"), _double(2.0, "y to")
        self.side_box = _spin(2, MAX_GRID_SIDE, 48, "Grid points along each side")
        self.base_edit = QLineEdit("0")
        self.base_edit.setToolTip(
            "Values of the inputs not on the grid: one number for all, or one per input"
        )
        self.inputs_message = message_label()
        self.shape_label = QLabel()
        self.shape_label.setObjectName("explorer-sample-shape")
        self.shape_label.setToolTip("The shape of one input sample, as the model takes it")
        form.addRow("Source", self.kind_box)
        form.addRow("Sample shape", self.shape_label)
        form.addRow("Batch B", self.batch_box)
        form.addRow("Batch seed", self.seed_box)
        form.addRow("File", self.file_field)
        form.addRow("Image", self.image_field)
        form.addRow("Grid inputs", dims)
        form.addRow("x range", _pair(self.x_lo, self.x_hi))
        form.addRow("y range", _pair(self.y_lo, self.y_hi))
        form.addRow("Grid side", self.side_box)
        form.addRow("Other inputs", self.base_edit)
        form.addRow(self.inputs_message)
        self.kind_box.currentIndexChanged.connect(self._on_kind_changed)
        for box in (self.batch_box, self.seed_box, self.dim_a, self.dim_b, self.side_box):
            box.valueChanged.connect(self._on_changed)
        for box in (self.x_lo, self.x_hi, self.y_lo, self.y_hi):
            box.valueChanged.connect(self._on_changed)
        self.base_edit.editingFinished.connect(self._on_changed)
        self.file_field.pathChanged.connect(self._on_path_changed)
        self.image_field.pathChanged.connect(self._on_path_changed)
        return group

    def _show_group(self) -> QGroupBox:
        group = QGroupBox("Show")
        form = QFormLayout(group)
        self.outputs_edit = QLineEdit("all")
        self.outputs_edit.setToolTip("Outputs f_i to show: all, or indices like 0-3, 7")
        self.inputs_edit = QLineEdit("all")
        self.inputs_edit.setToolTip("Inputs x_j to show: all, or indices like 0-3, 7")
        self.selection_message = message_label()
        form.addRow("Outputs", self.outputs_edit)
        form.addRow("Inputs", self.inputs_edit)
        form.addRow(self.selection_message)
        self.outputs_edit.editingFinished.connect(self._on_selection_changed)
        self.inputs_edit.editingFinished.connect(self._on_selection_changed)
        return group

    def _histogram_group(self) -> QGroupBox:
        group = QGroupBox("Parameter gradients")
        form = QFormLayout(group)
        self.loss_box = QComboBox()
        for key, text in HISTOGRAM_LOSSES.items():
            self.loss_box.addItem(text, key)
        self.loss_box.setToolTip("The loss whose gradient the histograms show")
        self.target_field = FileField("target: one row of m values per input", "Open target")
        self.bins_box = _spin(1, 500, 30, "Bins of the finite values")
        form.addRow("Loss", self.loss_box)
        form.addRow("Target", self.target_field)
        form.addRow("Bins", self.bins_box)
        self.loss_box.currentIndexChanged.connect(self._on_changed)
        self.bins_box.valueChanged.connect(self._on_changed)
        self.target_field.pathChanged.connect(self._on_path_changed)
        return group

    # ---- values ------------------------------------------------------------------------
    def input_settings(self) -> InputSettings:
        """The inputs as set; GradvizError (shown inline) for unreadable fixed values."""
        base = parse_floats(self.base_edit.text(), "list of fixed input values")
        kind = self.kind_box.currentData()
        field = self.image_field if kind == "image" else self.file_field
        return InputSettings(
            kind=self.kind_box.currentData(),
            batch=self.batch_box.value(),
            seed=self.seed_box.value(),
            dims=(self.dim_a.value(), self.dim_b.value()),
            x_range=(self.x_lo.value(), self.x_hi.value()),
            y_range=(self.y_lo.value(), self.y_hi.value()),
            side=self.side_box.value(),
            base=base,
            path=field.path(),
        )

    def set_sample_shape(self, shape: tuple[int, ...] | None) -> None:
        """The shape of one input sample of the explored model (None: a width, (B, n))."""
        self.sample_shape = shape
        text = "" if shape is None else "×".join(str(s) for s in shape)
        self.shape_label.setText(text)
        self.inputs_form.setRowVisible(self.shape_label, shape is not None)

    def loss(self) -> str:
        return self.loss_box.currentData()

    def set_source(self, text: str) -> None:
        show_message(self.source_label, text, ok=True)

    def set_spec_text(self, text: str) -> None:
        """Put a spec in the field as if the app typed it (validated, no edit signal)."""
        self.spec_edit.setText(text)

    def show_outside_network(self, spec: NetworkSpec | None, label: str) -> None:
        """A network set from outside (``label``): its spec drawn where it has one."""
        note = "" if spec is not None else f"{label} has no spec to draw; type one to explore it."
        self.network_editor.set_spec(spec, note)

    def show_inputs_problem(self, text: str) -> None:
        show_message(self.inputs_message, text, ok=False)

    def show_selection_problem(self, text: str) -> None:
        show_message(self.selection_message, text, ok=False)

    # ---- handlers ----------------------------------------------------------------------
    @Slot(str)
    def _on_spec_text_changed(self, text: str) -> None:
        try:
            self.spec = NetworkSpec.parse(text)
        except GradvizError as exc:
            self.spec = None
            show_message(self.spec_message, str(exc), ok=False)
            self.network_editor.set_stale(str(exc))
            return
        spec = self.spec
        self.network_editor.set_spec(spec)
        show_message(
            self.spec_message,
            f"{spec.in_dim} inputs → {spec.out_dim} outputs, {len(spec.linears)} Linear layers, "
            f"{spec.parameter_count:,} parameters",
            ok=True,
        )

    @Slot(str)
    def _on_spec_typed(self, _text: str) -> None:
        self.specEdited.emit()

    @Slot(str)
    def _on_spec_clicked(self, text: str) -> None:
        """The network editor made a new spec: into the field, as if typed."""
        self.spec_edit.setText(text)
        self.specEdited.emit()

    @Slot()
    def _on_kind_changed(self, *_args) -> None:
        kind = self.kind_box.currentData()
        form = self.inputs_form
        form.setRowVisible(self.batch_box, kind == "random")
        form.setRowVisible(self.seed_box, kind == "random")
        form.setRowVisible(self.file_field, kind == "file")
        form.setRowVisible(self.image_field, kind == "image")
        self.changed.emit()

    @Slot(str)
    def _on_path_changed(self, _path: str) -> None:
        self.changed.emit()

    @Slot()
    def _on_changed(self, *_args) -> None:
        self.changed.emit()

    @Slot()
    def _on_selection_changed(self) -> None:
        self.selectionChanged.emit()


def _input_words(width: int) -> str:
    return (
        f"{width:,} input{'s' if width != 1 else ''} per sample, from the Inputs below "
        "(a random batch, a grid or a file)"
    )


def _output_words(width: int) -> str:
    return f"{width:,} per sample: each Jacobian has {width:,} row{'s' if width != 1 else ''}"


def _pair(a: QWidget, b: QWidget) -> QHBoxLayout:
    row = QHBoxLayout()
    row.addWidget(a)
    row.addWidget(QLabel("to"))
    row.addWidget(b)
    return row
