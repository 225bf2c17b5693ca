"""The Runs page: any logged scalar (or a gradient norm) of several runs on one plot, each
followed while it grows: recordings still being written, and the lab's live run.

Per run a faint raw curve and, with smoothing, TensorBoard's debiased EMA over it; NaN and
Inf drawn as marks at the plot's edge (``NonfiniteMarks``), never dropped; x by step, wall
time or time since the run's first step; a hover readout of every run at the pointer's x.
``readouts()`` says what the page shows as data; Export data as CSV writes it as drawn.

``add_recording(path)`` follows a recording (a ``RecordingSource`` per run, read off the
GUI thread); ``add_live(session)`` follows the lab's current run (a ``LiveFeed``).
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidgetItem,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.record.run_series import X_AXES, RunSeries, quantity_text, read_runs
from gradviz.gui.pages.runs.controls import RunsControls
from gradviz.gui.pages.runs.runs_drawn import (
    EMPTY,
    Drawn,
    nearest,
    number_text,
    points,
    run_readout,
    write_csv,
)
from gradviz.gui.pages.runs.runs_drawn import notes as run_notes
from gradviz.gui.pages.runs.runs_live import LiveFeed
from gradviz.gui.run.follower import FollowState, RecordingSource
from gradviz.gui.widgets.axes import AxisItem, PlotItem
from gradviz.gui.widgets.nonfinite_marks import LEGEND_HTML, NonfiniteMarks

PAGE_TITLE = "Runs"
#: Okabe-Ito colours, one per run in turn (colour-blind safe; yellow, which NaN marks use,
#: last).
RUN_COLOURS = ("#E69F00", "#56B4E9", "#009E73", "#CC79A7", "#0072B2", "#D55E00", "#F0E442")
#: Redraws of runs that grew are gathered for this long (ms).
DRAW_MS = 100


class TimeAxis(AxisItem):
    """The x axis: numbers, or clock times (``clock``) for wall time."""

    clock = False

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph API)
        if not self.clock:
            return super().tickStrings(values, scale, spacing)
        fmt = "%H:%M:%S" if spacing < 3600 else "%m-%d %H:%M"
        return [time.strftime(fmt, time.localtime(v)) for v in values]


@dataclass
class OverlaidRun:
    """One run on the page: its curves, marks, list entry and what it was drawn from."""

    key: str
    colour: str
    curve: pg.PlotDataItem  # the smoothed curve (the raw one when smoothing is off)
    raw: pg.PlotDataItem  # the raw values, faint behind the smoothed curve
    marks: NonfiniteMarks
    item: QListWidgetItem
    series: RunSeries | None = None
    state: str = FollowState.READING.label
    feed: object = None  # its RecordingSource or LiveFeed
    drawn: Drawn = EMPTY  # its points as drawn now
    notes: list = field(default_factory=list)  # what the plot cannot show of it

    @property
    def label(self) -> str:
        s = self.series
        if s is not None and s.source != "live" and len(s.ranks) > 1:
            return f"{self.key} (rank {s.rank})"
        return self.key


class RunsOverlay(QWidget):
    """``addRecordingRequested`` (the "Add recording…" button), ``addLiveRequested``;
    ``redrawn`` after each redraw (a run grew, a control changed)."""

    addRecordingRequested = Signal()
    addLiveRequested = Signal()
    redrawn = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("runs-page")
        self.runs: dict[str, OverlaidRun] = {}
        self.time_axis = TimeAxis("bottom")
        self.plot = pg.PlotWidget(plotItem=PlotItem(axisItems={"bottom": self.time_axis}))
        self.plot.setObjectName("runs-plot")
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        # Below the marks of NaN and +Inf, which run along the top edge.
        self.legend = self.plot.addLegend(offset=(-10, 36))
        self.plot.getPlotItem().export_csv = _weak_method(self.write_csv)
        self.plot.scene().sigMouseMoved.connect(self._on_mouse_moved)
        # Where the hover readout reads: a thin line at the pointer's x.
        self.cursor = pg.InfiniteLine(angle=90, pen=pg.mkPen("#bbbbbb", width=1))
        self.cursor.setVisible(False)
        self.plot.addItem(self.cursor, ignoreBounds=True)
        self.hover = QLabel("Point at the plot for every run's value there.")
        self.hover.setObjectName("runs-hover")
        self.hover.setWordWrap(True)
        self.hover.setTextFormat(Qt.TextFormat.RichText)
        self.note = QLabel(f"Marks at the edge: {LEGEND_HTML}")
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.RichText)
        self.side = RunsControls()
        self.side.changed.connect(self._redraw)
        self.side.addRecordingRequested.connect(self.addRecordingRequested)
        self.side.addLiveRequested.connect(self.addLiveRequested)
        self.side.list.itemChanged.connect(self._on_item_changed)
        side = self.side
        self.list, self.quantity, self.x_axis = side.list, side.quantity, side.x_axis
        self.smoothing, self.smoothing_label, self.log_y = (
            side.smoothing, side.smoothing_label, side.log_y,
        )  # fmt: skip
        left = QWidget()
        column = QVBoxLayout(left)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.plot, 1)
        column.addWidget(self.hover)
        column.addWidget(self.note)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(self.side)
        split.setStretchFactor(0, 4)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(split)
        self._hover_x: float | None = None
        self._dirty: set[str] = set()
        self._draw_timer = QTimer(self)
        self._draw_timer.setSingleShot(True)
        self._draw_timer.setInterval(DRAW_MS)
        self._draw_timer.timeout.connect(self._draw_dirty)
        self._redraw()

    # ---- runs ----------------------------------------------------------------------------------
    def add_recording(self, path: str) -> OverlaidRun:
        """Follow the recording at ``path`` (read off the GUI thread; nothing if added)."""
        if path in self.runs:
            return self.runs[path]
        run = self._new_run(path)
        source = RecordingSource(path, self, read=read_runs)
        ref = weakref.ref(self)
        source.loaded.connect(lambda s, k=path: (p := ref()) and p.set_series(k, s))
        source.stateChanged.connect(lambda st, k=path: (p := ref()) and p._set_state(k, st.label))
        source.failed.connect(lambda *_, k=path: (p := ref()) and p._set_state(k, "unreadable"))
        run.feed = source
        source.start()
        return run

    def add_live(self, session) -> OverlaidRun:
        """Follow the lab's current run (its loss and gradient norms, every step)."""
        feed = LiveFeed(session, self)
        run = self.runs.get(feed.label) or self._new_run(feed.label)
        if isinstance(run.feed, LiveFeed):
            run.feed.following = False
        run.feed = feed
        run.state = "following"
        self._show_state(run)
        ref, key = weakref.ref(self), feed.label
        feed.loaded.connect(lambda s: (p := ref()) and p.set_series(key, s))
        feed.ended.connect(lambda: (p := ref()) and p._set_state(key, "ended"))
        feed.start()
        return run

    def set_series(self, key: str, series: RunSeries) -> None:
        """Show ``series`` as run ``key`` (a new read of it)."""
        run = self.runs.get(key)
        if run is None:
            return
        run.series = series
        self._show_state(run)
        self._offer_quantities()
        self._mark_dirty(key)

    def visible_runs(self) -> list[str]:
        return [k for k, r in self.runs.items() if r.item.checkState() == Qt.CheckState.Checked]

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop following (wait for reads in flight)."""
        for run in self.runs.values():
            if isinstance(run.feed, RecordingSource):
                run.feed.close(timeout_s)

    def _new_run(self, key: str) -> OverlaidRun:
        colour = RUN_COLOURS[len(self.runs) % len(RUN_COLOURS)]
        faint = pg.mkColor(colour)
        faint.setAlpha(70)
        raw = self.plot.plot([], [], pen=pg.mkPen(faint, width=1), connect="finite")
        curve = self.plot.plot([], [], pen=pg.mkPen(colour, width=2), name=key, connect="finite")
        for line in (raw, curve):  # a long run: draw what is in view, a peak per pixel
            line.setClipToView(True)
            line.setDownsampling(auto=True, method="peak")
        item = QListWidgetItem(key)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Checked)
        item.setForeground(pg.mkColor(colour))
        marks = NonfiniteMarks(self.plot.getPlotItem(), key, fill=colour)
        run = OverlaidRun(key, colour, curve, raw, marks, item)
        self.runs[key] = run
        self.list.addItem(item)
        self._show_state(run)
        return run

    def _set_state(self, key: str, state: str) -> None:
        if key in self.runs:
            self.runs[key].state = state
            self._show_state(self.runs[key])
            self._mark_dirty(key)

    @staticmethod
    def _show_state(run: OverlaidRun) -> None:
        """The list names the run and where it stands (following, complete, ...)."""
        blocked = run.item.listWidget().blockSignals(True) if run.item.listWidget() else None
        run.item.setText(f"{run.label}  ({run.state})")
        run.item.setToolTip(f"{run.label}: {run.state}. Tick to show its curve.")
        if blocked is not None:
            run.item.listWidget().blockSignals(blocked)

    def _offer_quantities(self) -> None:
        """The picker lists every quantity some run has (the chosen one stays)."""
        series = [r.series for r in self.runs.values() if r.series is not None]
        self.side.offer(key for s in series for key in s.keys())  # noqa: SIM118 - not a dict

    # ---- drawing -------------------------------------------------------------------------------
    def quantity_key(self) -> str:
        return self.side.quantity_key()

    def x_kind(self) -> str:
        return self.side.x_kind()

    def weight(self) -> float:
        return self.side.weight()

    @Slot()
    def _redraw(self) -> None:
        """Draw every run afresh (a control changed)."""
        key, kind, log = self.quantity_key(), self.x_kind(), self.log_y.isChecked()
        self.smoothing_label.setText(f"smoothing {self.weight():.2f}")
        item = self.plot.getPlotItem()
        item.setLogMode(y=log)
        item.setLabel("left", quantity_text(key))
        self.time_axis.clock = kind == "wall"
        self.time_axis.enableAutoSIPrefix(kind != "wall")  # never "wall time (x1e+09)"
        item.setLabel("bottom", X_AXES[kind])
        self.time_axis.picture = None  # the tick strings change with the kind
        self._dirty = set(self.runs)
        self._draw_dirty()

    def _mark_dirty(self, key: str) -> None:
        """Redraw run ``key`` soon: a live run shows a new frame 30 times a second and a
        followed recording grows every 0.5 s; their redraws are gathered (``DRAW_MS``)."""
        self._dirty.add(key)
        if not self._draw_timer.isActive():
            self._draw_timer.start()

    @Slot()
    def _draw_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for key in dirty:
            if key in self.runs:
                self._draw_run(self.runs[key])
        notes = [note for run in self.runs.values() for note in run.notes]
        self.note.setText("<br>".join([*notes, f"Marks at the edge: {LEGEND_HTML}"]))
        if self._hover_x is not None:
            self.hover.setText(self.hover_text(self._hover_x))
        self.redrawn.emit()

    def _draw_run(self, run: OverlaidRun) -> None:
        """``run``'s curves and marks from its series, as the controls say."""
        key, kind, log, weight = (
            self.quantity_key(),
            self.x_kind(),
            self.log_y.isChecked(),
            self.weight(),
        )
        run.drawn = drawn = points(run.series, key, kind, weight)
        steps, x, raw, smooth = drawn
        # A log axis draws positive values only; NaN leaves a gap (and gets a mark).
        shown = np.where(np.isfinite(raw) & ((raw > 0) if log else True), raw, np.nan)
        smooth_shown = np.where(
            np.isfinite(smooth) & ((smooth > 0) if log else True), smooth, np.nan
        )
        run.raw.setData(x, shown)
        run.curve.setData(x, smooth_shown if weight > 0 else shown)
        run.marks.set_data(x, raw, steps)
        visible = run.item.checkState() == Qt.CheckState.Checked
        run.curve.setVisible(visible)
        run.raw.setVisible(visible and weight > 0)
        run.marks.setVisible(visible)
        run.notes = run_notes(run.label, run.state, run.series, key, kind, log, drawn)

    @Slot(QListWidgetItem)
    def _on_item_changed(self, item: QListWidgetItem) -> None:
        key = next((k for k, r in self.runs.items() if r.item is item), None)
        if key is not None:
            self._dirty.add(key)
            self._draw_dirty()

    # ---- hover readout, readouts, CSV -------------------------------------------------------
    @Slot(object)
    def _on_mouse_moved(self, position) -> None:
        vb = self.plot.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(position):
            return
        self._hover_x = float(vb.mapSceneToView(position).x())
        self.cursor.setValue(self._hover_x)
        self.cursor.setVisible(True)
        self.hover.setText(self.hover_text(self._hover_x))

    def hover_values(self, x: float) -> list[tuple[str, int, float, float]]:
        """Every shown run's point nearest to ``x``: (run key, step, raw value, smoothed
        value); a run
        whose points all lie well away from ``x`` (before its start, after its end) has none."""
        (x0, x1), _ = self.plot.getPlotItem().getViewBox().viewRange()
        found = []
        for key in self.visible_runs():
            point = nearest(self.runs[key].drawn, x, slack=0.02 * (x1 - x0))
            if point is not None:
                found.append((key, *point))
        return found

    def hover_text(self, x: float) -> str:
        """The hover readout at ``x``: every shown run's value there (NaN says nan)."""
        parts = []
        smoothing = self.weight() > 0
        for key, step, value, smoothed in self.hover_values(x):
            run = self.runs[key]
            swatch = f'<span style="color:{run.colour}">■</span>'
            text = f"{swatch} {run.label}: step {step:,} = {number_text(value)}"
            if smoothing and np.isfinite(value):
                text += f" (smoothed {number_text(smoothed)})"
            parts.append(text)
        return " | ".join(parts) or "No run has a point here."

    def readouts(self) -> dict:
        """What the page shows, as data: the quantity, x axis, log axis and smoothing, and
        per run (``runs_drawn.run_readout``) its name, source, points, last step and value
        (None for NaN) and non-finite count."""
        key, kind, weight = self.quantity_key(), self.x_kind(), self.weight()
        visible = self.visible_runs()
        runs = [
            run_readout(r.label, r.state, k in visible, r.series, r.drawn, key, kind, weight)
            for k, r in self.runs.items()
        ]
        return {
            "page": PAGE_TITLE,
            "scalar": quantity_text(key),
            "x_axis": kind,
            "log_y": self.log_y.isChecked(),
            "smoothing": weight,
            "runs": runs,
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The shown runs' points as drawn, for File > Export view data (NPY): per run i
        ``run<i>.steps``, ``run<i>.x``, ``run<i>.values`` and ``run<i>.smoothed`` (K,)."""
        out = {}
        for i, key in enumerate(self.visible_runs()):
            for name, array in zip(("steps", "x", "values", "smoothed"), self.runs[key].drawn):
                out[f"run{i}.{name}"] = np.asarray(array)
        return out

    def write_csv(self, path: str) -> None:
        """The data as drawn now (see ``runs_drawn.write_csv``): the shown runs' points."""
        shown = [(self.runs[k].label, self.runs[k].drawn) for k in self.visible_runs()]
        write_csv(path, self.quantity_key(), self.x_kind(), shown)


def _weak_method(method):
    """A callable that calls ``method`` while its object lives (held by a Qt item)."""
    ref = weakref.WeakMethod(method)
    return lambda *args: (m := ref()) and m(*args)
