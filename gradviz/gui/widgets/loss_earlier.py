"""Earlier runs on the loss plot: the loss curves of the last few runs, drawn faint.

The lab restarts its run at each change of the setup; the run before stays on the plot as
a thin grey curve, so the effect of the change is seen against it. Each curve is named in
the legend by the settings that tell it apart (in a small plot "earlier k", or folded:
loss_legend), and its tooltip gives all its settings. Only
finite, positive losses are drawn (the axis is logarithmic); the curves never set the
plot's range, which follows the current run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg

from gradviz.gui.widgets.loss_legend import LossLegend
from gradviz.gui.widgets.plot_csv import not_data

#: The newest earlier run is the least faint; older ones fade further.
_ALPHAS = (120, 80, 55, 40)


@dataclass(frozen=True)
class EarlierRun:
    """One run before the current one: ``losses`` (S,) float64, entry k the loss of step
    k; ``label`` a few words for the legend, ``details`` its settings for the tooltip."""

    losses: np.ndarray
    label: str
    details: str


class EarlierCurves:
    """Faint curves of earlier runs on ``plot`` (a pyqtgraph PlotItem), listed in ``legend``
    (a LossLegend) where given."""

    def __init__(self, plot: pg.PlotItem, legend: LossLegend | None = None) -> None:
        self.plot = plot
        self.legend = legend
        self._items: list[pg.PlotDataItem] = []
        self._runs: list[EarlierRun] = []

    def show_runs(self, runs: list[EarlierRun]) -> None:
        """Draw ``runs``, newest first (what was drawn before is replaced)."""
        for item in self._items:
            self.plot.removeItem(item)  # its legend row goes at set_earlier below
        self._items = []
        self._runs = list(runs)
        for age, run in enumerate(self._runs):
            alpha = _ALPHAS[min(age, len(_ALPHAS) - 1)]
            losses = np.asarray(run.losses, dtype=np.float64)
            steps = np.arange(len(losses), dtype=np.float64)
            drawable = np.isfinite(losses) & (losses > 0)
            item = pg.PlotDataItem(
                steps[drawable],
                losses[drawable],
                pen=pg.mkPen(200, 200, 200, alpha, width=1),
                name=run.label,
            )
            item.setZValue(-10)  # under the current run's curve and its marks
            item.curve.setToolTip(run.details)
            not_data(item)  # the plot's CSV is the current run's losses
            self.plot.addItem(item, ignoreBounds=True)
            self._items.append(item)
        if self.legend is not None:
            self.legend.set_earlier(
                [(item, run.label) for item, run in zip(self._items, self._runs, strict=True)]
            )

    def readouts(self) -> list[dict]:
        """The earlier runs drawn, newest first: their label, tooltip and step count."""
        return [
            {"label": run.label, "details": run.details, "losses": len(run.losses)}
            for run in self._runs
        ]
