"""LabViews as the window uses it: pair selection, loss curve, points, hidden docks."""
# ruff: noqa: F811 - fixtures imported by name

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from fixtures_app import isolated_settings  # noqa: F401 - fixture
from PySide6.QtGui import QTextDocument

from gradviz.core.common.health import Health
from gradviz.gui.run.views import VIEWS


def test_every_registered_view_gets_one_dock_with_its_title(qtbot, isolated_settings):
    from gradviz.gui.shell.app import build_controller

    lab = build_controller(log_path=str(isolated_settings / "gradviz.log"))
    try:
        for entry in VIEWS:
            dock = lab.window.docks[entry.key]
            assert dock.windowTitle() == entry.title
            assert dock.widget() is lab.views.widgets[entry.key]
        assert set(lab.window.docks) == {e.key for e in VIEWS} | {"setup"}
    finally:
        lab.shutdown()
        lab.window.deleteLater()


def test_a_view_is_fed_only_through_show_and_clear(fit_views, make_snapshot):
    snap = make_snapshot(n=12, nan_diagonal=True)
    fit_views.show(snap)
    assert fit_views.widgets["mask"].counts()[Health.NAN] == 12
    fit_views.clear()
    assert fit_views.widgets["mask"].counts()[Health.NAN] == 0


def test_clicking_a_cell_fills_the_pair_widget_and_highlights_the_points(
    fit_views, make_snapshot, qtbot
):
    snap = make_snapshot(n=30, nan_diagonal=True)
    fit_views.show(snap)
    with qtbot.waitSignal(fit_views.pairSelected, timeout=1000) as blocker:
        fit_views.widgets["error"].cellClicked.emit(4, 17)
    assert blocker.args == [4, 17]
    pair = fit_views.widgets["pair"]
    assert pair.field_text("pair") == "(4, 17)"
    assert pair.field_text("d_pred") == f"{float(snap.distances[4, 17]):.4g}"
    assert pair.field_text("d_target") == f"{float(snap.target_distances[4, 17]):.4g}"
    assert pair.field_text("squared") == f"{float(snap.squared[4, 17]):.4g}"
    assert pair.field_text("grad") == f"{float(snap.entry_grads[4, 17]):.4g}"
    assert pair.field_text("health") == "finite"
    assert pair.field_text("coord_grad_i").startswith("NaN")
    # Points i and j are ringed where they are drawn (predicted and target).
    rings = fit_views.widgets["points"].highlighted()
    drawn = np.concatenate(
        [fit_views.widgets["points"]._pred_2d, fit_views.widgets["points"]._target_2d]
    )
    for k in (4, 17):
        assert any(np.allclose(r, drawn[k]) for r in rings)
        assert any(np.allclose(r, drawn[30 + k]) for r in rings)
    for panel in fit_views.matrix_panels():
        x, y = panel.marker.getData()
        assert (x[0], y[0]) == (17.5, 4.5)


def test_the_pair_widget_follows_new_snapshots_and_names_nan_health(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=30))
    fit_views.select_pair(6, 6)
    assert fit_views.widgets["pair"].field_text("health") == "zero"
    fit_views.show(make_snapshot(n=30, nan_diagonal=True))
    assert fit_views.widgets["pair"].field_text("health") == "NaN"
    assert fit_views.widgets["pair"].field_text("grad") == "NaN"


def test_pair_widget_says_when_the_method_has_no_squared_distances(fit_views, make_snapshot):
    fit_views.show(dataclasses.replace(make_snapshot(n=20), squared=None))
    fit_views.select_pair(1, 2)
    assert fit_views.widgets["pair"].field_text("squared").startswith("n/a")
    assert fit_views.widgets["pair"]._names["grad"].text() == "dLoss / d distance"


def test_a_smaller_point_set_drops_a_pair_that_no_longer_exists(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=50))
    fit_views.select_pair(45, 2)
    fit_views.show(make_snapshot(n=20, generation=1))
    assert fit_views.selected_pair is None
    assert fit_views.widgets["pair"].field_text("d_pred") == "-"


def test_loss_history_with_nan_and_inf_is_marked_not_logged(fit_views, make_snapshot):
    history = np.array([1.0, 0.5, np.nan, 0.25, np.inf, -np.inf, 0.0, 0.1])
    snap = dataclasses.replace(make_snapshot(n=20), loss_history=history, reference_loss=0.05)
    fit_views.show(snap)
    loss = fit_views.widgets["loss"]
    x, y = loss.curve.getOriginalDataset()
    # Entry k is step k's loss, as the CLI's per-step array counts (0-based).
    assert x.tolist() == [0, 1, 3, 7] and y.tolist() == [1.0, 0.5, 0.25, 0.1]
    assert loss.nonfinite_steps().tolist() == [2, 4, 5]
    assert loss.first_bad_line.isVisible() and loss.first_bad_line.value() == 2
    assert loss.reference_line.isVisible()
    assert loss.reference_line.value() == pytest.approx(np.log10(0.05))
    assert "3 non-finite losses (first at step 2)" in _plain(loss.summary.text())
    # A narrow dock wraps the summary onto more lines instead of cutting it off.
    assert loss.summary.heightForWidth(120) > loss.summary.heightForWidth(2000)


def test_all_nan_loss_history_and_zero_reference_are_shown_without_error(fit_views, make_snapshot):
    history = np.full(5, np.nan)
    snap = dataclasses.replace(make_snapshot(n=10), loss_history=history, reference_loss=0.0)
    fit_views.show(snap)
    loss = fit_views.widgets["loss"]
    assert loss.nonfinite_steps().tolist() == [0, 1, 2, 3, 4]
    assert not loss.reference_line.isVisible()  # 0 has no place on a log axis
    assert "classical MDS = 0" in _plain(loss.summary.text())
    # Its hover says what the orange number is, and why no line is drawn for it.
    tooltip = loss.summary.toolTip()
    assert tooltip.startswith("classical MDS: the loss of the target's classical-MDS embedding")
    assert "It is 0 here" in tooltip and "no line is drawn" in tooltip
    fit_views.show(dataclasses.replace(snap, step=6, reference_loss=0.05))
    assert loss.summary.toolTip().endswith("The dashed orange line on the plot.")


def _plain(rich_text: str) -> str:
    document = QTextDocument()
    document.setHtml(rich_text)
    return document.toPlainText().replace("\xa0", " ")


def test_a_new_generation_starts_the_loss_curve_over(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=10, step=50))
    fit_views.show(make_snapshot(n=10, step=50, generation=1, seed=3))
    x, _ = fit_views.widgets["loss"].curve.getOriginalDataset()
    assert len(x) == 50
    np.testing.assert_allclose(fit_views.widgets["loss"]._history, fit_views.snapshot.loss_history)


def test_points_view_aligns_a_rotated_prediction_onto_the_target(fit_views, make_snapshot):
    snap = make_snapshot(n=60, noise=0.0)  # a rotated, shifted copy of the target
    fit_views.show(snap)
    aligned = fit_views.widgets["points"].aligned_points()
    np.testing.assert_allclose(aligned, snap.target_coords, atol=1e-4)


def test_points_view_offers_pca_and_axis_pairs_for_3d(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=40))
    box = fit_views.widgets["points"].projection_box
    assert [box.itemText(k) for k in range(box.count())] == [
        "PCA",
        "x0 vs x1",
        "x0 vs x2",
        "x1 vs x2",
    ]
    box.setCurrentText("x1 vs x2")
    x, y = fit_views.widgets["points"].target_item.getData()
    target = fit_views.snapshot.target_coords
    np.testing.assert_allclose(np.sort(x), np.sort(target[:, 1]), atol=1e-6)
    np.testing.assert_allclose(np.sort(y), np.sort(target[:, 2]), atol=1e-6)


def test_nonfinite_predicted_points_are_left_out_and_counted(fit_views, make_snapshot):
    snap = make_snapshot(n=25)
    coords = np.array(snap.coords)
    coords[3] = np.nan
    fit_views.show(dataclasses.replace(snap, coords=coords))
    x, _ = fit_views.widgets["points"].pred_item.getData()
    assert len(x) == 24
    assert "1 predicted points are not finite" in fit_views.widgets["points"].info.text()


def test_coordinate_gradients_show_values_and_health(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=30, nan_diagonal=True))
    view = fit_views.widgets["coord_grads"]
    assert view.health.counts()[Health.NAN] == 30 * 3
    assert (view.values.displayed_nonfinite() == 3).all()
    fit_views.show(make_snapshot(n=30))
    assert view.health.counts()[Health.FINITE] == 90
    lo, hi = view.values.levels()
    assert lo == -hi
    g = float(fit_views.snapshot.coord_grads[4, 2])
    assert view.values.hover_cell(4, 2) == f"i = 4, d = 2:  dLoss/dx = {g:.4g}"
    assert view.health.hover_cell(4, 2).startswith("i = 4, d = 2:  finite")


def test_the_target_matrix_is_redrawn_only_when_it_changes(fit_views, make_snapshot, monkeypatch):
    drawn = []
    original = fit_views.widgets["target"]._render
    monkeypatch.setattr(
        fit_views.widgets["target"], "_render", lambda *a: (drawn.append(a), original(*a))
    )
    fit_views.show(make_snapshot(n=40))
    fit_views.show(make_snapshot(n=40, noise=0.2))  # same target, new arrays
    assert len(drawn) == 1
    fit_views.show(make_snapshot(n=41))
    assert len(drawn) == 2


def test_hidden_views_catch_up_when_shown(fit_views, make_snapshot, qtbot):
    box = fit_views.widgets["loss"].parentWidget()
    box.hide()
    fit_views.show(make_snapshot(n=20, step=30))
    assert len(fit_views.widgets["loss"].curve.getOriginalDataset()[0] or []) == 0
    box.show()
    qtbot.waitUntil(lambda: len(fit_views.widgets["loss"].curve.getOriginalDataset()[0]) == 30)


def test_clear_empties_every_view(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=20, nan_diagonal=True))
    fit_views.select_pair(1, 2)
    fit_views.clear()
    assert fit_views.snapshot is None and fit_views.selected_pair is None
    assert fit_views.widgets["mask"].counts()[Health.NAN] == 0
    assert fit_views.widgets["distances"].displayed_image() is None
    assert fit_views.widgets["pair"].field_text("pair") == "click a matrix cell"
    fit_views.show(make_snapshot(n=20))  # and it can show again
    assert fit_views.widgets["distances"].displayed_image() is not None


@pytest.mark.parametrize(("n", "dim"), [(1, 3), (2, 2), (5, 1), (12, 4)])
def test_small_and_unusual_point_sets_are_shown(fit_views, make_snapshot, n, dim):
    snap = make_snapshot(n=n, dim=dim, nan_diagonal=True)
    fit_views.show(snap)
    fit_views.select_pair(0, n - 1)
    assert fit_views.widgets["mask"].counts()[Health.NAN] == n
    assert fit_views.widgets["pair"].field_text("pair") == f"(0, {n - 1})"
    box = fit_views.widgets["points"].projection_box
    assert box.count() >= 1
    assert ("PCA" in [box.itemText(k) for k in range(box.count())]) == (dim > 2)


def test_loss_range_covers_the_curve_and_grows_only_in_steps(fit_views, make_snapshot):
    loss = fit_views.widgets["loss"]
    fit_views.show(make_snapshot(n=10, step=100))
    (x0, x1), (y0, y1) = loss.plot.getViewBox().viewRange()
    history = fit_views.snapshot.loss_history
    assert x0 <= 1 and x1 >= 100
    assert y0 < np.log10(history.min()) and y1 > np.log10(history.max())
    fit_views.show(make_snapshot(n=10, step=110))  # a few more steps: same range
    assert loss.plot.getViewBox().viewRange()[0] == [x0, x1]
    fit_views.show(make_snapshot(n=10, step=400))
    assert loss.plot.getViewBox().viewRange()[0][1] >= 400


def test_the_loss_summary_writes_steps_as_the_status_bar_does(fit_views, make_snapshot):
    history = np.linspace(1.0, 0.5, 1500)
    fit_views.show(dataclasses.replace(make_snapshot(n=10), loss_history=history))
    summary = _plain(fit_views.widgets["loss"].summary.text())
    assert "loss of step 1,499 = 0.5" in summary  # "1,499 steps done" beside it


def test_a_long_runs_thinned_history_shows_its_exact_steps_and_non_finite_count(
    fit_views, make_snapshot
):
    """A lab run keeps a bounded history (every non-finite stretch's ends kept): the loss
    plot, its summary and the status bar's loss still name the CLI's steps."""
    from gradviz.core.lab.fit import DistanceFitRun
    from gradviz.core.settings.config import FitConfig
    from gradviz.gui.run.status import loss_label

    run = DistanceFitRun(FitConfig(method="naive", n=12, steps=600), history_rows=64)
    run.run()  # naive: NaN gradient at step 0, NaN loss from step 1 on
    snap = run.snapshot()
    assert len(snap.loss_history) <= 64 and snap.history_steps is not None
    assert snap.history_steps[0] == 0 and snap.history_steps[-1] == 599
    fit_views.show(snap)
    loss = fit_views.widgets["loss"]
    readout = fit_views.readouts()["loss"]
    assert readout["losses"] == len(snap.loss_history) and readout["last_step"] == 599
    assert loss.first_bad_line.value() == 1
    summary = _plain(loss.summary.text())
    assert "loss of step 599 = nan" in summary
    assert "599 non-finite losses (first at step 1)" in summary  # every one, not the kept
    assert loss_label(snap) == "loss of step 599 = nan"
    np.testing.assert_array_equal(loss.steps, snap.history_steps)


def test_the_points_legend_sits_above_the_plot_and_names_the_prediction_as_drawn(
    fit_views, make_snapshot
):
    fit_views.show(make_snapshot())
    view = fit_views.widgets["points"]
    # Above the plot, so it covers none of the points.
    assert view.legend.mapRectToScene(view.legend.boundingRect()).bottom() <= (
        view.plot.mapRectToScene(view.plot.boundingRect()).top()
    )
    assert view.legend_names() == ["target", "predicted (aligned)"]
    view.align_box.setChecked(False)  # drawn as predicted, no longer aligned
    assert view.legend_names() == ["target", "predicted"]
    assert view.pred_item.name() == "predicted"
    view.align_box.setChecked(True)
    assert view.legend_names()[1] == "predicted (aligned)"
