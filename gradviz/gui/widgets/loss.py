"""The loss curve: log scale, non-finite steps marked at the edge, classical-MDS reference line."""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QVBoxLayout, QWidget

from gradviz.core.common.health import Health
from gradviz.core.common.step_series import nonfinite_stretches
from gradviz.gui.widgets import axes, palette
from gradviz.gui.widgets.loss_earlier import EarlierCurves
from gradviz.gui.widgets.loss_legend import LossLegend
from gradviz.gui.widgets.nonfinite_marks import NonfiniteMarks
from gradviz.gui.widgets.panel import status_label
from gradviz.gui.widgets.plot_csv import set_csv_data
from gradviz.gui.widgets.steady import SteadyBox

_NONFINITE_COLOUR = palette.OKABE_ITO[Health.NAN]  # as NaN in the gradient mask


def nonfinite_runs(history: np.ndarray, steps: np.ndarray | None = None) -> np.ndarray:
    """``(R, 2)`` int array of [first, last] steps (0-based) of each run of non-finite
    losses; ``steps`` (S,) are the steps of ``history``'s entries (None: entry k is step k;
    a thinned history keeps both ends of every run, see core.step_series)."""
    if steps is None:
        steps = np.arange(len(history), dtype=np.int64)
    return nonfinite_stretches(steps, history)


class LossView(QWidget):
    """Loss per step on a log axis.

    Only finite, positive losses reach the log axis. Steps whose loss is NaN or Inf are drawn
    as marks at the plot's edge (``NonfiniteMarks``, as on the Runs page: NaN and +Inf at the
    top, -Inf at the bottom), and a dashed line marks the first one. The classical-MDS loss
    (the best reachable loss, when known) is a horizontal line. The last few runs before
    this one may be drawn faint beneath it (``earlier``, set by the lab); the legend
    (``LossLegend``) folds them into one row in a small plot.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._length = -1
        self._reference: float | None = None
        self._history: np.ndarray = np.zeros(0)
        self._steps: np.ndarray = np.zeros(0, dtype=np.int64)
        self._range_fresh = True  # the next history sets the range from scratch

        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.ci.setContentsMargins(2, 2, 2, 2)
        self.plot = axes.PlotItem(enableMenu=False)
        self.graphics.addItem(self.plot)
        self.plot.setLogMode(x=False, y=True)
        # The range grows in steps instead of following every frame: a new range redraws
        # the axes, which is the most expensive part of a frame here.
        self.plot.disableAutoRange()
        self.plot.hideButtons()
        self._follow = True  # False once the user zooms or pans; a double-click resets
        self.plot.getViewBox().sigRangeChangedManually.connect(self._on_user_zoomed)
        self.graphics.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.setLabel("bottom", "step")
        self.plot.setLabel("left", "loss")
        # A legend that fits a small plot (folds the earlier runs; click to unfold).
        self.legend = LossLegend(self.plot)
        self.curve = self.plot.plot(pen=pg.mkPen("#56B4E9", width=2), name="loss")
        self.curve.setClipToView(True)
        self.curve.setDownsampling(auto=True, method="peak")
        self.legend.set_current(self.curve, "loss")
        self.marks = NonfiniteMarks(self.plot, "loss")
        # The runs before this one, faint (set by the lab; a new run does not clear them).
        self.earlier = EarlierCurves(self.plot, self.legend)
        self.first_bad_line = pg.InfiniteLine(
            angle=90,
            pen=pg.mkPen(_NONFINITE_COLOUR, width=1, style=Qt.PenStyle.DashLine),
            label="first non-finite",
            labelOpts={"position": 0.15, "color": _NONFINITE_COLOUR},
        )
        self.first_bad_line.setVisible(False)
        self.plot.addItem(self.first_bad_line, ignoreBounds=True)
        self.reference_line = pg.InfiniteLine(
            angle=0,
            pen=pg.mkPen("#E69F00", width=1.5, style=Qt.PenStyle.DashLine),
            label="classical MDS",
            labelOpts={"position": 0.08, "color": "#E69F00", "anchors": [(0, 1), (0, 1)]},
        )
        self.reference_line.setVisible(False)
        self.plot.addItem(self.reference_line, ignoreBounds=True)
        self.summary = status_label("no run yet")
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.summary.setWordWrap(True)
        self.summary.linkActivated.connect(lambda _link: self.legend.toggle())
        self._summary_words = "no run yet"
        self.legend.foldChanged.connect(self._show_summary)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(2)
        layout.addWidget(self.graphics, stretch=1)
        layout.addWidget(SteadyBox(self.summary))  # its text changes every frame

    def set_history(
        self,
        history: np.ndarray,
        reference: float | None = None,
        steps: np.ndarray | None = None,
    ) -> None:
        """Show ``(S,)`` losses: the loss computed in each of ``steps`` (0-based, before its
        update; None: entry k is step k, as the CLI's per-step ``loss`` array). NaN/Inf
        are marked, never logged."""
        history = np.asarray(history, dtype=np.float64)
        if steps is None:
            steps = np.arange(len(history), dtype=np.int64)
        last = int(steps[-1]) + 1 if len(steps) else 0
        if last == self._length and reference == self._reference:
            return  # nothing new since the last frame
        self._length = last
        self._reference = reference
        self._history, self._steps = history, np.asarray(steps, dtype=np.int64)
        x = self._steps.astype(np.float64)
        finite = np.isfinite(history)
        drawable = finite & (history > 0)
        self.curve.setData(x[drawable], history[drawable])
        set_csv_data(self.curve, x, history)  # its CSV: every kept step, NaN and Inf included
        if self._follow:
            self._extend_range(last, history[drawable], reference)
        self._draw_nonfinite(x, history)
        self._draw_reference(reference)
        self._summary_words = self._summary_text(history, self._steps, reference)
        self._show_summary()
        tooltip = reference_tooltip(reference)
        if self.summary.toolTip() != tooltip:
            self.summary.setToolTip(tooltip)

    def _extend_range(self, steps: int, drawn: np.ndarray, reference: float | None) -> None:
        """Grow the view so that every step and every drawn loss fits, with room to spare.

        x grows to 1.5 times the steps when they run past the right edge; y (log10 units)
        grows by a quarter decade beyond the lowest/highest loss or reference.
        """
        (x0, x1), (y0, y1) = self.plot.getViewBox().viewRange()
        fresh = self._range_fresh
        new_x = (0.0, max(10.0, 1.5 * steps)) if fresh or steps > x1 else (x0, x1)
        logs = np.log10(drawn) if len(drawn) else np.zeros(0)
        if reference is not None and math.isfinite(reference) and reference > 0:
            logs = np.append(logs, math.log10(reference))
        new_y = (y0, y1)
        if len(logs):
            lo, hi = float(logs.min()), float(logs.max())
            if fresh or lo < y0 or hi > y1:
                new_y = (
                    (min(lo, y0) if not fresh else lo) - 0.25,
                    (max(hi, y1) if not fresh else hi) + 0.25,
                )
        if fresh or new_x != (x0, x1) or new_y != (y0, y1):
            self.plot.setRange(xRange=new_x, yRange=new_y, padding=0)
            # Only a loss sets the y range afresh: step 0 (no loss yet) must not keep the
            # previous run's range for the next one.
            self._range_fresh = fresh and not len(logs)

    @Slot(object)
    def _on_user_zoomed(self, _mask) -> None:
        self._follow = False

    @Slot(object)
    def _on_mouse_clicked(self, event) -> None:
        if event.double():
            self._follow = True
            self._range_fresh = True
            if len(self._history):
                finite = self._history[np.isfinite(self._history) & (self._history > 0)]
                self._extend_range(self._length, finite, self._reference)

    def clear(self) -> None:
        self._range_fresh = True
        self._follow = True
        self._length = -1
        self._reference = None
        self._history = np.zeros(0)
        self._steps = np.zeros(0, dtype=np.int64)
        self.curve.setData([], [])
        set_csv_data(self.curve, np.zeros(0), np.zeros(0))
        self.marks.clear()
        self.first_bad_line.setVisible(False)
        self.reference_line.setVisible(False)
        self._summary_words = "no run yet"
        self._show_summary()
        self.summary.setToolTip("")

    def _show_summary(self) -> None:
        """The summary, and the legend's fold link where the legend has one."""
        link = self.legend.toggle_words()
        text = self._summary_words
        if link:
            # It may wrap between its words, as the summary does, never before its arrow.
            words = html.escape(link).replace(" ▸", "&nbsp;▸").replace(" ◂", "&nbsp;◂")
            text += f' | <a href="legend">{words}</a>'
        if self.summary.text() != text:
            self.summary.setText(text)

    @property
    def history(self) -> np.ndarray:
        """(S,) the losses on screen, of the steps ``steps``."""
        return self._history

    @property
    def steps(self) -> np.ndarray:
        """(S,) int64: the step of each loss on screen (all steps, or a long run's kept ones)."""
        return self._steps

    def nonfinite_steps(self) -> np.ndarray:
        """(M,) int steps (0-based, as the CLI counts) whose loss is shown as non-finite:
        read from the marks drawn (each at its step's x), not from the history they were
        made from."""
        return np.rint(self.marks.drawn_x()).astype(np.int64)

    def _draw_nonfinite(self, x: np.ndarray, history: np.ndarray):
        runs = nonfinite_runs(history, self._steps)
        self.marks.set_data(x, history)
        if not len(runs):
            self.first_bad_line.setVisible(False)
            return
        self.first_bad_line.setValue(float(runs[0, 0]))
        self.first_bad_line.label.setFormat(f"first non-finite loss: step {runs[0, 0]}")
        self.first_bad_line.setVisible(True)

    def _draw_reference(self, reference: float | None) -> None:
        if reference is not None and math.isfinite(reference) and reference > 0:
            self.reference_line.setValue(math.log10(reference))
            self.reference_line.setVisible(True)
        else:
            self.reference_line.setVisible(False)

    @staticmethod
    def _summary_text(history: np.ndarray, steps: np.ndarray, reference: float | None) -> str:
        parts = []
        if len(history):
            parts.append(_phrase(f"loss of step {int(steps[-1]):,} = {history[-1]:.4g}"))
        else:
            parts.append(_phrase("no step taken"))
        if reference is not None:
            parts.append(_phrase(f"classical MDS = {reference:.4g}", "#E69F00"))
        runs = nonfinite_runs(history, steps)
        bad = int((runs[:, 1] - runs[:, 0] + 1).sum())  # every step of each run (exact)
        if bad:
            text = f"{bad:,} non-finite losses (first at step {int(runs[0, 0]):,})"
            parts.append(_phrase(text, palette.ALARM_TEXT))
        # A narrow dock wraps the summary between its parts rather than cutting it off.
        return " | ".join(parts)


def reference_tooltip(reference: float | None) -> str:
    """What "classical MDS = x" (orange, as its line) stands for; empty when not known."""
    if reference is None:
        return ""
    what = (
        "classical MDS: the loss of the target's classical-MDS embedding in D dimensions, "
        "the reference for the lowest loss a fit of these distances can reach."
    )
    if not math.isfinite(reference):
        return f"{what} It could not be computed for this target."
    if reference <= 0:
        return (
            f"{what} It is {reference:g} here: the target's points lie in D dimensions, so a "
            "fit can match their distances exactly. A log axis has no 0, so no line is drawn."
        )
    return f"{what} The dashed orange line on the plot."


def _phrase(text: str, colour: str | None = None) -> str:
    """``text`` as rich text, in ``colour`` if given, that a narrow panel wraps only after
    an "=" ("classical MDS" stays together; a long number may go to the next line)."""
    escaped = html.escape(text).replace(" ", "&nbsp;").replace("=&nbsp;", "= ")
    return escaped if colour is None else f'<span style="color:{colour}">{escaped}</span>'
