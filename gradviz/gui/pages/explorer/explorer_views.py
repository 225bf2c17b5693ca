"""The explorer's Jacobian views: labelled heatmaps of J, the full batch Jacobian with its
block grid, the across-batch statistics with their verdict, the gradient field and the
per-sample input gradients. Each takes numpy arrays from an ExplorerResult; none computes
a derivative.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Slot
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.explorer.jobs import ExplorerResult
from gradviz.gui.widgets.arrays import ladder_ceil
from gradviz.gui.widgets.heatmap import HeatmapView
from gradviz.gui.widgets.panel import format_value

#: Tick labels drawn at most per axis; beyond that every k-th entry is labelled.
MAX_TICKS = 16


def index_ticks(labels: list[str], max_ticks: int = MAX_TICKS) -> list[list[tuple[float, str]]]:
    """pyqtgraph ticks at the centres of entries, every k-th labelled when there are many."""
    step = max(1, int(np.ceil(len(labels) / max_ticks)))
    return [[(k + 0.5, labels[k]) for k in range(0, len(labels), step)]]


def wrapped_label(text: str = "") -> QLabel:
    """A label that wraps instead of widening its panel."""
    label = QLabel(text)
    label.setWordWrap(True)
    label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    label.setMinimumWidth(0)
    return label


class LabelledHeatmap(HeatmapView):
    """A HeatmapView whose rows and columns have names (``f2``, ``x0``, ``sample 5``), used
    by the hover readout and, when there are few, as axis ticks."""

    def __init__(self, value_label: str, x_label: str, y_label: str, **kwargs) -> None:
        super().__init__(value_label, x_label=x_label, y_label=y_label, **kwargs)
        self.row_names: list[str] = []
        self.col_names: list[str] = []

    def set_labelled(
        self,
        values: np.ndarray | None,
        row_names: list[str],
        col_names: list[str],
        row_ticks: bool | list[str] = True,
        col_ticks: bool | list[str] = True,
    ) -> None:
        """Show ``values`` (R, C) with one name per row and column (for the readout).

        Ticks: True labels entries with their names, a list with those short labels,
        False leaves pyqtgraph's numeric ticks.
        """
        self.row_names, self.col_names = list(row_names), list(col_names)
        for side, ticks, names in (
            ("left", row_ticks, row_names),
            ("bottom", col_ticks, col_names),
        ):
            labels = list(names) if ticks is True else ticks
            self.plot.getAxis(side).setTicks(index_ticks(labels) if labels else None)
        self.set_matrix(values)

    def _readout(self, i: int, j: int) -> str:
        if self._values is None:
            return ""
        row = self.row_names[i] if i < len(self.row_names) else f"row {i}"
        col = self.col_names[j] if j < len(self.col_names) else f"column {j}"
        value = format_value(float(self._values[i, j]))
        return f"{row}, {col}:  {self.value_label} = {value}"


def _names(prefix: str, indices: list[int]) -> list[str]:
    return [f"{prefix}{k}" for k in indices]


class SampleJacobianView(QWidget):
    """J[b] (m x n) of the selected sample b: row i = output f_i, column j = input x_j."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heatmap = LabelledHeatmap(
            "df_i/dx_j", x_label="input x_j", y_label="output f_i", diverging=True
        )
        self.sample_box = QSpinBox()
        self.sample_box.setPrefix("sample ")
        self.sample_box.setToolTip("Which input of the batch to show")
        self.sample_box.setKeyboardTracking(False)
        self.heatmap.controls.insertWidget(0, self.sample_box)
        self.info = wrapped_label()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.heatmap, stretch=1)
        layout.addWidget(self.info)
        self._result: ExplorerResult | None = None
        self._rows: list[int] = []
        self._cols: list[int] = []
        self.sample_box.valueChanged.connect(self._on_sample_changed)

    def show_result(self, result: ExplorerResult, rows: list[int], cols: list[int]) -> None:
        self._result, self._rows, self._cols = result, rows, cols
        self.sample_box.setRange(0, result.batch - 1)
        self._draw()

    def sample(self) -> int:
        return self.sample_box.value()

    @Slot(int)
    def _on_sample_changed(self, _value: int) -> None:
        if self._result is not None:
            self._draw()

    def _draw(self) -> None:
        result, b = self._result, self.sample()
        matrix = result.jacobians[b][np.ix_(self._rows, self._cols)]
        self.heatmap.set_labelled(matrix, _names("f", self._rows), _names("x", self._cols))
        x = ", ".join(format_value(v) for v in result.inputs[b][:8])
        y = ", ".join(format_value(v) for v in result.outputs[b][:8])
        more_x = ", …" if result.inputs.shape[1] > 8 else ""
        more_y = ", …" if result.outputs.shape[1] > 8 else ""
        self.info.setText(f"sample {b}:  x = ({x}{more_x})   f(x) = ({y}{more_y})")


class AllSamplesView(QWidget):
    """Every sample's Jacobian at once: row b = sample, column = entry (i, j) in row-major
    order of the selected outputs and inputs (B x m·n)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heatmap = LabelledHeatmap(
            "df_i/dx_j", x_label="entry (output i, input j)", y_label="sample b", diverging=True
        )
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.heatmap)

    def show_result(self, result: ExplorerResult, rows: list[int], cols: list[int]) -> None:
        block = result.jacobians[:, rows][:, :, cols]
        matrix = block.reshape(result.batch, len(rows) * len(cols))
        entries = [f"df{i}/dx{j}" for i in rows for j in cols]
        samples = [f"sample {b}" for b in range(result.batch)]
        short = [f"{i},{j}" for i in rows for j in cols]
        numbers = [str(b) for b in range(result.batch)]
        self.heatmap.set_labelled(matrix, samples, entries, row_ticks=numbers, col_ticks=short)


class FullBatchView(QWidget):
    """The full batch Jacobian (B·m x B·n) with its (m x n) block grid and max_off_block."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heatmap = LabelledHeatmap(
            "df(X)[b,i]/dX[c,j]",
            x_label="input entry (c, j)",
            y_label="output entry (b, i)",
            diverging=True,
        )
        self.grid_box = QComboBox()
        self.grid_box.addItems(["block grid", "no grid"])
        self.grid_box.setToolTip("Draw the boundaries of the per-sample (m x n) blocks")
        self.heatmap.controls.insertWidget(0, self.grid_box)
        self.grid = pg.PlotCurveItem(connect="pairs", pen=pg.mkPen(255, 255, 255, 110, width=1))
        self.grid.setZValue(15)
        self.heatmap.plot.addItem(self.grid)
        self.summary = wrapped_label()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.summary)
        layout.addWidget(self.heatmap, stretch=1)
        self.grid_box.currentIndexChanged.connect(self._on_grid_toggled)

    def show_result(self, result: ExplorerResult) -> None:
        if result.full is None:
            self.heatmap.clear()
            self.grid.setData([], [])
            self.summary.setText(result.full_note)
            return
        batch, (m, n) = result.batch, result.shape
        rows = [f"sample {b}, f{i}" for b in range(batch) for i in range(m)]
        cols = [f"sample {c}, x{j}" for c in range(batch) for j in range(n)]
        self.heatmap.set_labelled(result.full, rows, cols, row_ticks=False, col_ticks=False)
        self._set_grid(batch, m, n)
        self.summary.setText(full_batch_summary(result.max_off_block, batch, m, n))

    def _set_grid(self, batch: int, m: int, n: int) -> None:
        xs, ys = [], []
        for k in range(1, batch):
            xs += [k * n, k * n, 0, batch * n]
            ys += [0, batch * m, k * m, k * m]
        self.grid.setData(np.array(xs, dtype=float), np.array(ys, dtype=float))
        self.grid.setVisible(self.grid_box.currentIndex() == 0)

    @Slot(int)
    def _on_grid_toggled(self, index: int) -> None:
        self.grid.setVisible(index == 0)


def full_batch_summary(largest: float | None, batch: int, m: int, n: int) -> str:
    """The sentence under the full batch Jacobian."""
    shape = f"{batch * m} x {batch * n} (B = {batch} blocks of {m} x {n})"
    if largest is None:
        return shape
    if not np.isfinite(largest):
        verdict = (
            f"<b>max_off_block = {format_value(largest)}</b>: the full Jacobian holds "
            "non-finite entries off the diagonal blocks, so this batch says nothing about "
            "whether samples interact."
        )
    elif largest == 0.0:
        verdict = (
            "<b>max_off_block = 0</b> exactly: no output of one sample depends on another "
            "sample's input, so J is block-diagonal and the per-input Jacobians are its blocks."
        )
    else:
        verdict = (
            f"<b>max_off_block = {format_value(largest)}</b>: samples interact (e.g. BatchNorm "
            "in training mode), so one sample's output depends on other samples' inputs."
        )
    return f"{shape}. {verdict}"


def verdict_text(result: ExplorerResult) -> str:
    """The across-batch verdict in words; careful to speak of this batch only."""
    batch = result.batch
    if batch == 1:
        return (
            "Only one input: there is nothing to compare, so the batch says nothing about "
            "whether the network is linear."
        )
    if result.constant:
        return (
            f"Every input has the same Jacobian: this network is linear on this batch "
            f"(all {batch} Jacobians agree to within {format_value(result.tolerance)}). "
            "A piecewise-linear net whose inputs share one linear region looks the same."
        )
    if not np.isfinite(result.jacobians).all():
        return (
            "The Jacobians hold NaN or Inf values, so they cannot be compared: this batch "
            "gives no verdict on linearity."
        )
    spread = float(np.nanmax(result.std))
    return (
        f"The Jacobian changes from input to input: this network is not linear on this batch "
        f"(largest standard deviation of an entry across the {batch} inputs: "
        f"{format_value(spread)})."
    )


class AcrossBatchView(QWidget):
    """Standard deviation (and mean) of each Jacobian entry across the batch, with the
    verdict in words."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.verdict = wrapped_label()
        self.verdict.setObjectName("explorer-verdict")
        font = self.verdict.font()
        font.setPointSizeF(font.pointSizeF() * 1.15)
        self.verdict.setFont(font)
        self.std = SpreadHeatmap("std across batch", x_label="input x_j", y_label="output f_i")
        self.mean = LabelledHeatmap(
            "mean across batch", x_label="input x_j", y_label="output f_i", diverging=True
        )
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.std)
        row.addWidget(self.mean)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.verdict)
        layout.addLayout(row, stretch=1)

    def show_result(self, result: ExplorerResult, rows: list[int], cols: list[int]) -> None:
        pick = np.ix_(rows, cols)
        names = _names("f", rows), _names("x", cols)
        self.std.set_labelled(result.std[pick], *names)
        self.mean.set_labelled(result.mean[pick], *names)
        colour = "#56B4E9" if result.constant else "#E69F00"
        self.verdict.setText(f'<span style="color:{colour}">&#9679;</span> {verdict_text(result)}')


class SpreadHeatmap(LabelledHeatmap):
    """Non-negative values (a standard deviation) on levels from 0, so that an all-zero
    matrix shows as the colormap's low end rather than its middle."""

    def _auto_levels(self, shown: np.ndarray) -> tuple[float, float]:
        finite = shown[np.isfinite(shown)]
        top = float(finite.max()) if finite.size else 0.0
        return (0.0, ladder_ceil(top)) if top > 0 else (0.0, 1.0)


class FieldHeatmap(LabelledHeatmap):
    """d f_i / d x_j over the grid; hover names the grid point by its coordinates."""

    def __init__(self) -> None:
        super().__init__("df_i/dx_j", x_label="x", y_label="y", diverging=True, lock_aspect=True)


class GradientFieldView(QWidget):
    """The 2-D gradient field of one chosen Jacobian entry over the grid of two inputs."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heatmap = FieldHeatmap()
        self.output_box = QComboBox()
        self.output_box.setToolTip("Output f_i of the entry df_i/dx_j")
        self.input_box = QComboBox()
        self.input_box.setToolTip("Input x_j of the entry df_i/dx_j")
        self.heatmap.controls.insertWidget(0, self.input_box)
        self.heatmap.controls.insertWidget(0, self.output_box)
        self.note = wrapped_label()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addWidget(self.heatmap, stretch=1)
        self._result: ExplorerResult | None = None
        self.output_box.currentIndexChanged.connect(self._on_entry_changed)
        self.input_box.currentIndexChanged.connect(self._on_entry_changed)

    def show_result(self, result: ExplorerResult) -> None:
        self._result = result
        m, n = result.shape
        _refill(self.output_box, [f"f{i}" for i in range(m)])
        _refill(self.input_box, [f"x{j}" for j in range(n)])
        self._draw()

    def entry(self) -> tuple[int, int]:
        return max(self.output_box.currentIndex(), 0), max(self.input_box.currentIndex(), 0)

    def set_entry(self, out_index: int, in_index: int) -> None:
        self.output_box.setCurrentIndex(out_index)
        self.input_box.setCurrentIndex(in_index)

    def image(self) -> np.ndarray | None:
        """The (H, W) field of the chosen entry, or None."""
        result = self._result
        if result is None or result.field is None:
            return None
        i, j = self.entry()
        # Rows reversed: the largest y on top, as on a plot of the input plane.
        return np.ascontiguousarray(result.field[::-1, :, i, j], dtype=np.float32)

    @Slot(int)
    def _on_entry_changed(self, _index: int) -> None:
        if self._result is not None:
            self._draw()

    def _draw(self) -> None:
        result = self._result
        if result.field is None:
            self.heatmap.clear()
            self.note.setText(result.field_note)
            return
        a, b = result.field_dims
        i, j = self.entry()
        self.heatmap.value_label = f"df{i}/dx{j}"
        self.heatmap.colorbar.setLabel("left", f"df{i}/dx{j}")
        self.heatmap.plot.setLabel("bottom", f"x{a}")
        self.heatmap.plot.setLabel("left", f"x{b}")
        xs = [f"x{a} = {format_value(v)}" for v in result.field_xs]
        ys = [f"x{b} = {format_value(v)}" for v in result.field_ys[::-1]]
        self.heatmap.set_labelled(self.image(), ys, xs, row_ticks=False, col_ticks=False)
        _coordinate_ticks(self.heatmap, result.field_xs, result.field_ys[::-1])
        height, width = result.field.shape[:2]
        self.note.setText(
            f"df{i}/dx{j} over a {height} x {width} grid of inputs x{a} (across) and x{b} (up); "
            "the other inputs are held at their fixed values."
        )


def _coordinate_ticks(view: LabelledHeatmap, xs: np.ndarray, ys: np.ndarray) -> None:
    """Axis ticks at round input values (entry k of an axis sits at k + 0.5)."""
    for axis, values in (("bottom", xs), ("left", ys)):
        view.plot.getAxis(axis).setTicks([coordinate_ticks(values)])


def coordinate_ticks(values: np.ndarray, count: int = 5) -> list[tuple[float, str]]:
    """(position, label) ticks at ``count`` evenly spaced values between the ends of an
    evenly spaced axis ``values`` (ascending or descending)."""
    first, last = float(values[0]), float(values[-1])
    if len(values) < 2 or first == last:
        return [(0.5, f"{first:.3g}")]
    step = (last - first) / (len(values) - 1)
    ticks = []
    for value in np.linspace(min(first, last), max(first, last), count):
        value = 0.0 if abs(value) < 1e-12 * max(abs(first), abs(last)) else value
        ticks.append(((value - first) / step + 0.5, f"{value:.3g}"))
    return ticks


def _refill(box: QComboBox, items: list[str]) -> None:
    """Replace a combo's items, keeping the current index where it still exists."""
    current = box.currentIndex()
    if [box.itemText(k) for k in range(box.count())] == items:
        return
    box.blockSignals(True)
    box.clear()
    box.addItems(items)
    box.setCurrentIndex(current if 0 <= current < len(items) else 0)
    box.blockSignals(False)


class SaliencyView(QWidget):
    """Per-sample input gradient of one output (or of the sum of outputs): row b = sample,
    column j = input; d f_i(x_b) / d x_b, or d sum_i f_i(x_b) / d x_b."""

    SUM = "sum of outputs"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heatmap = LabelledHeatmap(
            "df/dx_j", x_label="input x_j", y_label="sample b", diverging=True
        )
        self.output_box = QComboBox()
        self.output_box.setToolTip("Which output's input gradient to show")
        self.heatmap.controls.insertWidget(0, self.output_box)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.heatmap)
        self._result: ExplorerResult | None = None
        self._cols: list[int] = []
        self.output_box.currentIndexChanged.connect(self._on_output_changed)

    def show_result(self, result: ExplorerResult, cols: list[int]) -> None:
        self._result, self._cols = result, cols
        _refill(self.output_box, [self.SUM] + [f"f{i}" for i in range(result.shape[0])])
        self._draw()

    def saliency(self) -> np.ndarray | None:
        """(B, selected inputs) gradients of the chosen output."""
        result = self._result
        if result is None:
            return None
        k = max(self.output_box.currentIndex(), 0)
        grads = result.jacobians.sum(axis=1) if k == 0 else result.jacobians[:, k - 1]
        return grads[:, self._cols]

    @Slot(int)
    def _on_output_changed(self, _index: int) -> None:
        if self._result is not None:
            self._draw()

    def _draw(self) -> None:
        k = max(self.output_box.currentIndex(), 0)
        name = "d(sum f)/dx_j" if k == 0 else f"df{k - 1}/dx_j"
        self.heatmap.value_label = name
        self.heatmap.colorbar.setLabel("left", name)
        batch = self._result.batch
        samples = [f"sample {b}" for b in range(batch)]
        numbers = [str(b) for b in range(batch)]
        self.heatmap.set_labelled(
            self.saliency(), samples, _names("x", self._cols), row_ticks=numbers
        )
