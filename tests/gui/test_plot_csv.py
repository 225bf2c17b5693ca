"""A plot's CSV is its data, and its non-finite marks are what its readouts report: the lab's
loss plot and Model health's loss plot, each with NaN, +Inf and -Inf losses."""

from __future__ import annotations

import csv

import numpy as np
import pyqtgraph as pg

from gradviz.gui.pages.recordings.health_plots import StepLoss
from gradviz.gui.widgets.loss import LossView
from gradviz.gui.widgets.plot_csv import PlotDataCSV, use_for_the_export_dialog
from gradviz.gui.widgets.plot_export import export_plot

LOSSES = np.array([1.0, 0.5, np.nan, 0.25, np.inf, -np.inf, 0.0, 0.125])


def _table(path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def test_the_lab_loss_plots_csv_holds_every_steps_loss_and_no_marks(qtbot, tmp_path):
    """The marks of the NaN and Inf losses were written as columns of their own (edge
    positions, with empty cells below them), and the NaN steps were not in the CSV."""
    view = LossView()
    qtbot.addWidget(view)
    view.set_history(LOSSES)
    path = tmp_path / "loss.csv"
    export_plot(view.plot, str(path))
    header, rows = _table(path)
    assert header == ["loss_x", "loss_y"]
    assert all(len(row) == 2 and "" not in row for row in rows), rows
    steps = np.array([float(r[0]) for r in rows])
    losses = np.array([float(r[1]) for r in rows])  # "nan", "inf", "-inf" read back
    np.testing.assert_array_equal(steps, np.arange(len(LOSSES)))
    np.testing.assert_array_equal(losses, LOSSES)  # NaN == NaN here


def test_model_healths_loss_plot_marks_nonfinite_losses_and_exports_them(qtbot, tmp_path):
    """Model health's loss plot dropped NaN and Inf losses without a mark; its readout now
    names the steps of the marks it draws, and an unlogged loss is neither drawn nor
    marked nor exported."""
    plot = StepLoss()
    qtbot.addWidget(plot)
    steps = np.arange(len(LOSSES)) * 5 + 100  # every=5, from step 100
    logged = np.ones(len(LOSSES), bool)
    logged[-1] = False  # no loss logged at step 135: NaN in the recording's index
    losses = LOSSES.copy()
    losses[-1] = np.nan
    plot.set_data(steps, losses, logged)
    r = plot.readouts()
    assert r["nonfinite"] == {"nan": ["110"], "+inf": ["120"], "-inf": ["125"]}
    assert r["nonfinite_steps"] == ["110", "120", "125"]
    assert r["point_steps"] == ["100", "105", "115"]  # finite, positive: on the log axis
    # The marks sit at the edges of the view, at their steps' column centres.
    (_, _), (y0, y1) = plot.plot.getViewBox().viewRange()
    x, y = plot.marks.positions("nan")
    assert x.tolist() == [2.5] and y[0] > y0 + 0.9 * (y1 - y0)
    path = tmp_path / "step-loss.csv"
    export_plot(plot.plot, str(path))
    header, rows = _table(path)
    assert header == ["loss_x", "loss_y"] and all(len(row) == 2 for row in rows)
    table = np.array([[float(v) for v in row] for row in rows])
    np.testing.assert_array_equal(table[:, 0], np.arange(7) + 0.5)
    np.testing.assert_array_equal(table[:, 1], LOSSES[:7])


def test_pyqtgraphs_export_dialog_offers_the_same_csv(qtbot):
    """The plot's own Export… dialog lists the CSV that leaves the marks out, in the
    stock exporter's place."""
    from pyqtgraph.exporters.Exporter import Exporter

    use_for_the_export_dialog()
    assert PlotDataCSV in Exporter.Exporters
    assert pg.exporters.CSVExporter not in Exporter.Exporters
