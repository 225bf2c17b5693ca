"""NaN and Inf values of a curve, drawn as marks at the plot's edge instead of being dropped.

A curve cannot draw a NaN or an infinite value (and a log axis no zero or negative one
either), yet those are the steps a user of a gradient debugger looks for. ``NonfiniteMarks``
puts one mark per such point at the edge of the visible range: NaN as a diamond and +Inf as
an upward triangle along the top edge, -Inf as a downward triangle along the bottom edge,
each outlined in its Health colour, with a tooltip naming the run, the step and the value.
The marks follow the view (zoom, pan, a growing range) and never widen its range.

The lab's loss plot, Model health's loss plot and the Runs page use this one module, so the
marks read the same; a plot's CSV leaves them out (``plot_csv``: they are positions, not data).
"""

from __future__ import annotations

import weakref

import numpy as np
import pyqtgraph as pg

from gradviz.core.common.health import Health
from gradviz.gui.widgets import palette
from gradviz.gui.widgets.plot_csv import not_data

#: kind -> (symbol, outline colour, words); NaN and +Inf at the top edge, -Inf at the bottom.
KINDS = {
    "nan": ("d", palette.OKABE_ITO[Health.NAN], "NaN"),
    "+inf": ("t1", palette.OKABE_ITO[Health.POS_INF], "+Inf"),
    "-inf": ("t", palette.OKABE_ITO[Health.NEG_INF], "-Inf"),
}
#: Where the marks sit, as a fraction of the view's height from its top (or bottom) edge.
EDGE_INSET = 0.04
_GLYPHS = {"nan": "◆", "+inf": "▲", "-inf": "▼"}
#: The legend of the marks, as rich text for a label beside the plot (each glyph on the
#: plot's dark background: NaN's yellow is unreadable on the window's light one).
LEGEND_HTML = " ".join(
    f'<span style="background-color:#000000;color:{colour}">&nbsp;{_GLYPHS[kind]}&nbsp;</span>'
    f"&nbsp;{words}"
    for kind, (_, colour, words) in KINDS.items()
)


def nonfinite_kinds(values: np.ndarray) -> dict[str, np.ndarray]:
    """(K,) values -> kind -> (K,) bool: where each value is NaN, +Inf or -Inf."""
    values = np.asarray(values, dtype=np.float64)
    return {"nan": np.isnan(values), "+inf": values == np.inf, "-inf": values == -np.inf}


class NonfiniteMarks:
    """The non-finite points of one curve on ``plot`` (a pyqtgraph PlotItem).

    ``set_data(x, values, step_of=...)`` takes the curve's (K,) x positions (as drawn) and
    its (K,) values; ``fill`` colours the marks (a run's colour; default: the kind's)."""

    def __init__(self, plot: pg.PlotItem, name: str = "", fill: str | None = None) -> None:
        self.plot = plot
        self.name = name
        self.items: dict[str, pg.ScatterPlotItem] = {}
        self._x: dict[str, np.ndarray] = {}
        self._tips: dict[str, list[str]] = {}
        for kind, (symbol, colour, _words) in KINDS.items():
            item = pg.ScatterPlotItem(
                symbol=symbol,
                size=11,
                pen=pg.mkPen(colour, width=2),
                brush=pg.mkBrush(fill or colour),
                hoverable=True,
                tip=self._tip,
            )
            item.setZValue(40)  # above the curves
            not_data(item)  # edge positions, not values: a CSV writes the curve's own
            plot.addItem(item, ignoreBounds=True)  # never widens the view's range
            self.items[kind] = item
            self._x[kind], self._tips[kind] = np.zeros(0), []
        # Referred to weakly: the view box outlives a run removed from a plot.
        ref = weakref.ref(self)
        plot.getViewBox().sigRangeChanged.connect(lambda *_: (m := ref()) and m._place())

    def set_data(self, x: np.ndarray, values: np.ndarray, steps: np.ndarray | None = None):
        """Mark each non-finite value at its ``x``; ``steps`` (K,) names it in the tooltip
        (default: x)."""
        x = np.asarray(x, dtype=np.float64)
        steps = x if steps is None else np.asarray(steps)
        label = f"{self.name}: " if self.name else ""
        for kind, where in nonfinite_kinds(values).items():
            words = KINDS[kind][2]
            self._x[kind] = x[where]
            # The tooltips once per new data, not on every zoom or pan (``_place``).
            self._tips[kind] = [f"{label}{words} at step {_step_text(s)}" for s in steps[where]]
        self._place()

    def clear(self) -> None:
        self.set_data(np.zeros(0), np.zeros(0))

    def setVisible(self, visible: bool) -> None:  # noqa: N802 (as a Qt item)
        for item in self.items.values():
            item.setVisible(visible)

    def counts(self) -> dict[str, int]:
        """How many points of each kind are marked."""
        return {kind: len(x) for kind, x in self._x.items()}

    def drawn_x(self) -> np.ndarray:
        """(M,) sorted x of every mark drawn (shown), of all kinds: what a readout of the
        non-finite points reads, rather than the data they were made from."""
        drawn = [self.positions(kind)[0] for kind, item in self.items.items() if item.isVisible()]
        return np.sort(np.concatenate([np.zeros(0), *drawn]))

    def positions(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """The marks of ``kind`` as drawn: (x, y) in view coordinates."""
        x, y = self.items[kind].getData()
        return np.asarray(x), np.asarray(y)

    def _place(self) -> None:
        (_, _), (y0, y1) = self.plot.getViewBox().viewRange()
        inset = EDGE_INSET * (y1 - y0)
        edge = {"nan": y1 - inset, "+inf": y1 - inset, "-inf": y0 + inset}
        for kind, item in self.items.items():
            x = self._x[kind]
            if not len(x) and not len(item.data):
                continue  # none before, none now: the lab's loss plot calls this every frame
            item.setData(x=x, y=np.full(len(x), edge[kind]), data=self._tips[kind])

    @staticmethod
    def _tip(x, y, data) -> str:
        return str(data)


def _step_text(step) -> str:
    value = float(step)
    return f"{int(value):,}" if value.is_integer() else f"{value:g}"
