"""A plot's CSV is its data: the data curves only, each with every value it stands for.

pyqtgraph's CSV exporter writes every item that holds plot data, as drawn: the scatter items
that mark NaN and Inf losses at a plot's edge became columns of their own (edge positions,
not data) with empty cells below the shorter ones, and a curve on a log axis wrote only the
finite, positive points it could draw, so the NaN steps a user exports to look at were gone.
``PlotDataCSV`` leaves out the items marked ``not_data`` and writes a curve's ``set_csv_data``
values where it has them, NaN and Inf written as ``nan``, ``inf``, ``-inf``.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph.exporters as exporters
from pyqtgraph.exporters.Exporter import Exporter

_NOT_DATA = "_gradviz_not_data"
_CSV_DATA = "_gradviz_csv_data"


def not_data(item) -> None:
    """Leave ``item`` (marks, cursors drawn from data already exported) out of the CSV."""
    setattr(item, _NOT_DATA, True)


def set_csv_data(curve, x: np.ndarray, y: np.ndarray) -> None:
    """The (K,) x and (K,) y the CSV writes for ``curve`` (a PlotDataItem): every point it
    stands for, including those it cannot draw (NaN, Inf, a log axis' zeros)."""
    setattr(curve, _CSV_DATA, (np.asarray(x, np.float64), np.asarray(y, np.float64)))


class _Dataset:
    """What pyqtgraph's exporter asks of a curve: its name and its data."""

    def __init__(self, name: str | None, data: tuple[np.ndarray, np.ndarray]) -> None:
        self._name, self._data = name, data

    def name(self) -> str | None:
        return self._name

    def getOriginalDataset(self):  # noqa: N802 (pyqtgraph's name)
        return self._data


class PlotDataCSV(exporters.CSVExporter):
    """pyqtgraph's CSV exporter, writing only the plot's data curves (see the module)."""

    Name = "CSV of the plot's data (NaN and Inf included)"

    def _exportPlotDataItem(self, plotDataItem) -> None:  # noqa: N802 (pyqtgraph's name)
        if getattr(plotDataItem, _NOT_DATA, False):
            return None
        data = getattr(plotDataItem, _CSV_DATA, None)
        if data is not None:
            plotDataItem = _Dataset(plotDataItem.name(), data)
        return super()._exportPlotDataItem(plotDataItem)


def use_for_the_export_dialog() -> None:
    """Offer ``PlotDataCSV`` in pyqtgraph's own Export dialog (a plot's right-click menu)
    in the place of the stock CSV exporter, so both ways of exporting write the same."""
    found = Exporter.Exporters
    if PlotDataCSV in found:
        return
    if exporters.CSVExporter in found:
        found[found.index(exporters.CSVExporter)] = PlotDataCSV
    else:
        found.append(PlotDataCSV)
