"""File > Open with model class…: weights (a state_dict or safetensors file) and the user's
own class that runs them, with its constructor arguments and the shape of one input sample.

Shown with ``open()``; ``chosen(ModelClassChoice)`` once the fields are valid and OK is
pressed. Nothing is imported here: the opener asks for trust first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QWidget,
)

from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.batches import parse_sample_shape
from gradviz.core.modelio.formats import FORMATS, file_filter

#: The formats whose named tensors a model class of the user's own can run.
WEIGHTS_FILTER = file_filter("Weights", tuple(f for f in FORMATS if f.weights is not None))
CODE_FILTER = "Python files (*.py);;All files (*)"


@dataclass(frozen=True)
class ModelClassChoice:
    """``model_class`` as load_model takes it (``file.py:Net`` or ``package.module:Net``),
    ``code_path`` the Python file (None for a module on Python's path), ``model_args`` JSON,
    ``in_shape`` one sample's shape (None: from the first 2-D weight)."""

    weights: str
    model_class: str
    code_path: str | None
    model_args: str
    in_shape: tuple[int, ...] | None


def _browse_row(edit: QLineEdit, on_browse) -> QWidget:
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(edit, stretch=1)
    button = QPushButton("Browse…")
    button.clicked.connect(on_browse)
    layout.addWidget(button)
    return row


class ModelClassDialog(QDialog):
    """Weights file, Python file or module, class name, arguments (JSON), input shape."""

    chosen = Signal(object)  # ModelClassChoice

    def __init__(self, parent: QWidget | None = None, weights: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Open with model class")
        self.setObjectName("model-class-dialog")
        self.weights_edit = QLineEdit(weights)
        self.weights_edit.setPlaceholderText("state_dict (.pt) or safetensors file")
        self.code_edit = QLineEdit()
        self.code_edit.setPlaceholderText("path/to/model.py or package.module")
        self.class_edit = QLineEdit()
        self.class_edit.setPlaceholderText("Net")
        self.args_edit = QLineEdit("{}")
        self.args_edit.setToolTip("Constructor arguments: a JSON object (keywords) or list")
        self.shape_edit = QLineEdit()
        self.shape_edit.setPlaceholderText("e.g. 3,32,32; empty: from the first layer")
        self.message = QLabel()
        self.message.setObjectName("model-class-message")
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #c0392b;")
        form = QFormLayout(self)
        form.addRow("Weights", _browse_row(self.weights_edit, self._on_browse_weights))
        form.addRow("Python file or module", _browse_row(self.code_edit, self._on_browse_code))
        form.addRow("Class", self.class_edit)
        form.addRow("Arguments (JSON)", self.args_edit)
        form.addRow("Input shape", self.shape_edit)
        note = QLabel("Opening runs your code: gradviz asks before it imports it.")
        note.setWordWrap(True)
        form.addRow(note)
        form.addRow(self.message)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.ok_button = buttons.button(QDialogButtonBox.StandardButton.Ok)
        buttons.accepted.connect(self._on_ok)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.setMinimumWidth(520)

    def choice(self) -> ModelClassChoice:
        """The fields as a choice; GradvizError with one sentence for a bad field."""
        from gradviz.core.modelio.user_class import parse_args

        weights = self.weights_edit.text().strip()
        code = self.code_edit.text().strip()
        name = self.class_edit.text().strip()
        if not weights or not os.path.isfile(weights):
            raise GradvizError("Choose the weights file (a state_dict or safetensors file).")
        if not code or not name:
            raise GradvizError("Give the Python file (or module) and the name of its class.")
        is_file = code.endswith(".py") or os.sep in code
        if is_file and not os.path.isfile(code):
            raise GradvizError(f"The Python file {code!r} does not exist.")
        args = self.args_edit.text().strip() or "{}"
        parse_args(args)  # JSON checked before anything is imported
        shape = parse_sample_shape(self.shape_edit.text())
        code_path = os.path.abspath(code) if is_file else None
        return ModelClassChoice(
            weights=os.path.abspath(weights),
            model_class=f"{code_path or code}:{name}",
            code_path=code_path,
            model_args=args,
            in_shape=shape,
        )

    @Slot()
    def _on_ok(self) -> None:
        try:
            choice = self.choice()
        except GradvizError as exc:
            self.message.setText(str(exc))
            return
        self.message.setText("")
        self.accept()
        self.chosen.emit(choice)

    @Slot()
    def _on_browse_weights(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Weights", "", WEIGHTS_FILTER)
        if path:
            self.weights_edit.setText(path)

    @Slot()
    def _on_browse_code(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Model code", "", CODE_FILTER)
        if path:
            self.code_edit.setText(path)
