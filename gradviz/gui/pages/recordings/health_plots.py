"""The plots of the Model health page: health over time, the loss on the same step axis, and
one tensor's NaN-aware histogram. Each plot takes numpy arrays and knows nothing of files.

Columns are recorded steps (index i spans x in [i, i + 1]); the bottom axes label them with
the step numbers, so the heatmap and the loss share one x axis even where the recording
interval changed.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication, QVBoxLayout, QWidget

from gradviz.core.common.health import HEALTH_LABELS, LOST, Health, norm_words
from gradviz.core.record import layout as L
from gradviz.gui.widgets.axes import AxisItem, PlotItem
from gradviz.gui.widgets.nonfinite_marks import NonfiniteMarks
from gradviz.gui.widgets.palette import OKABE_ITO, health_lut
from gradviz.gui.widgets.panel import ElidedLabel, format_value
from gradviz.gui.widgets.plot_csv import set_csv_data

#: Brightness of the weakest and strongest finite gradient norm of the page (dark = small).
DIM, BRIGHT = 0.3, 1.0
#: Cells whose statistics a damaged recording lost: a light grey no health category uses.
MISSING_COLOUR = (200, 200, 200, 255)
#: The readout under the map before a cell of the recording shown was hovered.
READOUT_HINT = (
    "hover a cell for its numbers; click it for its histogram; Ctrl+click or Shift+click: "
    "more tensors"
)


class StepAxis(AxisItem):
    """A bottom axis over recorded-step columns that reads the users' step numbers.

    Column i spans x in [i, i + 1] and its value (a loss point, the cursor) sits at its
    centre, so each tick stands at a column's centre too: a tick at the column's left edge
    read as if the cursor and the loss sat half a recording interval right of their step.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.steps = np.zeros(0, dtype=np.int64)
        # Its labels are step numbers, never scaled: an empty axis read "step (x0.001)".
        self.enableAutoSIPrefix(False)

    def tickValues(self, minVal, maxVal, size):  # noqa: N802, N803 - pyqtgraph override
        levels = super().tickValues(minVal - 0.5, maxVal - 0.5, size)
        centres = []
        for spacing, values in levels:
            whole = [v + 0.5 for v in values if float(v).is_integer()]
            centres.append((max(spacing, 1.0), whole))
        return centres

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph override
        return [self.step_of(v) for v in values]

    def label_room(self, lo: float, hi: float, spacing: float) -> float:
        """Room for the widest step number (the labels are steps, not column indices)."""
        widest = str(int(self.steps.max())) if len(self.steps) else "0"
        font = self.style["tickFont"] or QApplication.font()
        return QFontMetrics(font).horizontalAdvance(widest) + 10

    def step_of(self, x: float) -> str:
        """The step number of the column whose centre is at ``x`` ("" between columns)."""
        i = int(np.floor(x))
        centred = abs(x - (i + 0.5)) < 0.01
        return str(int(self.steps[i])) if 0 <= i < len(self.steps) and centred else ""

    def tick_positions(self) -> list[tuple[float, str]]:
        """(x, label) of every labelled tick that would be drawn over the current range."""
        lo, hi = self.range
        out = []
        for _spacing, values in self.tickValues(lo, hi, max(self.width(), 100)):
            out += [(float(v), self.step_of(v)) for v in values if self.step_of(v)]
        return sorted(set(out))


def health_rgba(
    worst: np.ndarray, grad_norm: np.ndarray, missing: np.ndarray | None = None
) -> np.ndarray:
    """(T, S) Health codes and gradient norms -> (T, S, 4) uint8 colours.

    The category picks the Okabe-Ito colour (colour-blind safe); finite gradients are drawn
    brighter the larger their norm (log scale over the whole page), so a vanishing gradient
    reads dark. Alarms (NaN, +-Inf) are always at full brightness. ``missing`` (T, S) bool
    cells (lost from a damaged recording) take ``MISSING_COLOUR``, never a category's.
    """
    rgba = health_lut("Okabe-Ito")[worst].astype(np.float64)  # other codes: transparent
    with np.errstate(divide="ignore", invalid="ignore"):
        logn = np.log10(grad_norm)
    lost = np.zeros(worst.shape, bool) if missing is None else np.asarray(missing, bool)
    finite = (worst == Health.FINITE) & np.isfinite(logn) & ~lost
    if finite.any():
        lo, hi = logn[finite].min(), logn[finite].max()
        scale = (logn - lo) / (hi - lo) if hi > lo else np.ones_like(logn)
        factor = np.where(finite, DIM + (BRIGHT - DIM) * np.nan_to_num(scale), 1.0)
        rgba[..., :3] *= factor[..., None]
    rgba[lost] = MISSING_COLOUR
    return rgba.astype(np.uint8)


def _plot(name: str, axis: StepAxis | None = None) -> pg.PlotWidget:
    item = PlotItem(axisItems={"bottom": axis} if axis is not None else None)
    widget = pg.PlotWidget(plotItem=item)
    widget.setObjectName(name)
    item.hideButtons()
    return widget


class HealthOverTime(QWidget):
    """One row per watched tensor, one column per recorded step; ``cellClicked(t, i)`` (a
    plain click), ``cellAdded(t, i, span)`` (Ctrl+click: ``t`` toggled in the selection;
    Shift+click, ``span`` True: the rows from the selection's first to ``t``). The selected
    rows (``set_selection``) are outlined."""

    cellClicked = Signal(int, int)
    cellAdded = Signal(int, int, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.axis = StepAxis("bottom")
        self.plot = _plot("health-over-time", self.axis)
        self.plot.getPlotItem().invertY(True)
        self.plot.setLabel("bottom", "step")
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.cursor = pg.InfiniteLine(angle=90, pen=pg.mkPen("w", width=1))
        self.cursor.setVisible(False)  # until a step is shown (an empty page has none)
        self.plot.addItem(self.cursor)
        # One item outlines every selected run of rows (rectangles split by NaN).
        self.selection = pg.PlotDataItem(pen=pg.mkPen("w", width=2), connect="finite")
        self.plot.addItem(self.selection)
        self.selected_rows: tuple[int, ...] = ()
        self.readout = ElidedLabel(READOUT_HINT)
        self.readout.setObjectName("health-readout")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.readout)
        self.tensors: tuple[str, ...] = ()
        self.left_width = 60  # px of the tensor names' axis
        self.worst = np.zeros((0, 0), np.uint8)
        self.grad_norm = np.zeros((0, 0))
        self.counts = np.zeros((0, 0, 5), np.int64)
        self.missing = np.zeros((0, 0), bool)
        self.plot.scene().sigMouseMoved.connect(self._on_moved)
        self.plot.scene().sigMouseClicked.connect(self._on_clicked)

    def set_data(self, tensors, steps, worst, grad_norm, counts, missing=None) -> None:
        self.tensors = tuple(tensors)
        self.worst, self.grad_norm, self.counts = worst, grad_norm, counts
        self.missing = np.zeros(worst.shape, bool) if missing is None else missing
        self.axis.steps = np.asarray(steps)
        rgba = health_rgba(worst, grad_norm, self.missing)
        self.image.setImage(rgba, autoLevels=False, levels=(0, 255))
        left = self.plot.getAxis("left")
        left.setTicks([[(t + 0.5, name) for t, name in enumerate(self.tensors)]])
        self.left_width = min(12 + 7 * max((len(n) for n in self.tensors), default=4), 220)
        left.setWidth(self.left_width)
        self.plot.getPlotItem().setLimits(xMin=-0.5, xMax=max(worst.shape[1], 1) + 0.5)
        self.plot.getPlotItem().autoRange(padding=0)

    def set_cursor(self, index: int) -> None:
        self.cursor.setPos(index + 0.5)
        self.cursor.setVisible(True)

    def readouts(self) -> dict:
        """The cursor's x and the step under it, and the hover/selected readout line."""
        x = float(self.cursor.value())
        return {"cursor_x": x, "cursor_step": self.axis.step_of(x), "readout": self.readout.text()}

    def set_selection(self, rows) -> None:
        """Outline the rows ``rows`` (tensor indices) across every step."""
        self.selected_rows = tuple(sorted(set(int(r) for r in rows)))
        width = max(self.worst.shape[1], 1)
        xs, ys = [], []
        for first, last in _runs(self.selected_rows):
            xs += [0, width, width, 0, 0, np.nan]
            ys += [first, first, last + 1, last + 1, first, np.nan]
        self.selection.setData(np.asarray(xs, float), np.asarray(ys, float))

    def cell_at(self, scene_pos: QPointF) -> tuple[int, int] | None:
        point = self.plot.getPlotItem().vb.mapSceneToView(scene_pos)
        t, i = int(np.floor(point.y())), int(np.floor(point.x()))
        if 0 <= t < self.worst.shape[0] and 0 <= i < self.worst.shape[1]:
            return t, i
        return None

    def describe(self, t: int, i: int) -> str:
        if self.missing[t, i]:
            return (
                f"{self.tensors[t]} @ step {int(self.axis.steps[i])}: {LOST} "
                "(lost from a damaged recording)"
            )
        finite, zero, nan, pinf, ninf = (int(c) for c in self.counts[t, i])
        return (
            f"{self.tensors[t]} @ step {int(self.axis.steps[i])}: "
            f"{HEALTH_LABELS[Health(int(self.worst[t, i]))]}, "
            f"|grad| {norm_words(float(self.grad_norm[t, i]), nan, pinf + ninf, format_value)}; "
            f"finite {finite}, zero {zero}, NaN {nan}, +Inf {pinf}, -Inf {ninf}"
        )

    def _on_moved(self, pos: QPointF) -> None:
        cell = self.cell_at(pos)
        if cell is not None:
            self.readout.setText(self.describe(*cell))

    def _on_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return  # the right button opens the menu
        cell = self.cell_at(event.scenePos())
        if cell is None:
            return
        modifiers = event.modifiers()
        if modifiers & Qt.KeyboardModifier.ShiftModifier:
            self.cellAdded.emit(*cell, True)
        elif modifiers & Qt.KeyboardModifier.ControlModifier:
            self.cellAdded.emit(*cell, False)
        else:
            self.cellClicked.emit(*cell)


def _runs(rows: tuple[int, ...]) -> list[tuple[int, int]]:
    """Sorted rows as (first, last) runs of consecutive rows: (1, 2, 3, 7) -> [(1, 3), (7, 7)]."""
    runs: list[tuple[int, int]] = []
    for row in rows:
        if runs and row == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], row)
        else:
            runs.append((row, row))
    return runs


class StepLoss(QWidget):
    """The loss at each recorded step, on the health map's step axis (log y by default).

    A loss the log axis cannot draw is not dropped: a NaN or Inf one is a mark at the
    plot's edge (``NonfiniteMarks``, as on the lab's loss plot and the Runs page), and the
    CSV export writes every logged step's loss, ``nan`` and ``inf`` included. A step
    without a logged loss is neither drawn nor marked.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.axis = StepAxis("bottom")
        self.plot = _plot("step-loss", self.axis)
        self.plot.setLabel("left", "loss")
        self.plot.getAxis("left").enableAutoSIPrefix(False)  # the log axis reads 1e-16 itself
        self.plot.setLogMode(y=True)
        self.curve = self.plot.plot([], [], pen=pg.mkPen("#E69F00", width=2), name="loss")
        self.marks = NonfiniteMarks(self.plot, "loss")
        self.cursor = pg.InfiniteLine(angle=90, pen=pg.mkPen("w", width=1))
        self.cursor.setVisible(False)  # until a step is shown (an empty page has none)
        self.plot.addItem(self.cursor)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)

    def set_data(
        self, steps: np.ndarray, losses: np.ndarray, logged: np.ndarray | None = None
    ) -> None:
        """(S,) step numbers and their (S,) losses; ``logged`` (S,) bool says which steps'
        losses were logged (default: every one; an unlogged loss reads NaN)."""
        self.axis.steps = np.asarray(steps)
        losses = np.asarray(losses, dtype=np.float64)
        logged = np.ones(len(losses), bool) if logged is None else np.asarray(logged, bool)
        x = np.arange(len(losses)) + 0.5  # column centres
        ok = logged & np.isfinite(losses) & (losses > 0)  # log axis: positive finite only
        self.curve.setData(x[ok], losses[ok])
        set_csv_data(self.curve, x[logged], losses[logged])
        self.marks.set_data(x[logged], losses[logged], np.asarray(steps)[logged])

    def set_cursor(self, index: int) -> None:
        self.cursor.setPos(index + 0.5)
        self.cursor.setVisible(True)

    def readouts(self) -> dict:
        """The curve's points as (x, loss) and the cursor's x, with the steps they sit at,
        and the steps of the non-finite losses marked (as drawn, by kind)."""
        x, y = self.curve.getData()
        x = np.zeros(0) if x is None else np.asarray(x)
        cursor = float(self.cursor.value())
        marked = {
            kind: [self.axis.step_of(float(v)) for v in self.marks.positions(kind)[0]]
            for kind in self.marks.items
        }
        return {
            "points": len(x),
            "point_steps": [self.axis.step_of(float(v)) for v in x[:50]],
            "cursor_x": cursor,
            "cursor_step": self.axis.step_of(cursor),
            "nonfinite_steps": [self.axis.step_of(float(v)) for v in self.marks.drawn_x()],
            "nonfinite": marked,
        }


def bin_ticks() -> list[tuple[int, str]]:
    """Tick labels of the histogram's fixed bins (every twentieth decade, NaN, Inf and zero)."""
    ticks = [(L.NAN_BIN, "NaN"), (L.NEG_INF_BIN, "-Inf"), (L.ZERO_BIN, "0"),
             (L.POS_INF_BIN, "+Inf")]  # fmt: skip
    for k in range(L.DECADES):
        decade = L.LOWEST_DECADE + k
        if decade % 20 == 0 and abs(decade) < 40:  # +-1e-40 would crowd the zero bar
            ticks.append((L.FIRST_POSITIVE_BIN + k, f"1e{decade}"))
            ticks.append((L.ZERO_BIN - 1 - k, f"-1e{decade}"))
    return sorted(ticks)


def bin_colours() -> list[str]:
    """One colour per bin: the alarm colours for NaN and Inf, sky blue for zero."""
    colours = [OKABE_ITO[Health.FINITE]] * L.BINS
    colours[L.NAN_BIN] = OKABE_ITO[Health.NAN]
    colours[L.NEG_INF_BIN] = OKABE_ITO[Health.NEG_INF]
    colours[L.POS_INF_BIN] = OKABE_ITO[Health.POS_INF]
    colours[L.ZERO_BIN] = OKABE_ITO[Health.ZERO]
    return colours


class TensorHistogram(QWidget):
    """One tensor's gradient entries at one step in the recording's fixed signed-decade bins,
    NaN and the infinities as bars of their own, and its counts."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot = _plot("tensor-histogram")
        self.plot.setLabel("left", "entries")
        self.plot.getAxis("bottom").setTicks([bin_ticks()])
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.9, brushes=[])
        self.plot.addItem(self.bars)
        self.title = ElidedLabel("click a cell of the health map")
        self.title.setObjectName("histogram-counts")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.plot, 1)
        self.histogram = np.zeros(0, np.int64)

    def set_histogram(self, title: str, histogram: np.ndarray) -> None:
        """``histogram`` (BINS,) counts in the layout's bins; ``title`` the counts line."""
        self.histogram = np.asarray(histogram)
        x = np.arange(L.BINS)
        self.bars.setOpts(x=x, height=self.histogram, brushes=bin_colours())
        self.title.setText(title)
        self.plot.setXRange(-1, L.BINS, padding=0)  # every bin: NaN and Inf stay in view
        self.plot.setYRange(0, max(int(self.histogram.max(initial=0)), 1) * 1.05)
