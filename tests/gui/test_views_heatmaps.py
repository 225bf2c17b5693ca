"""Heatmaps of the distance-fit lab: health mask, levels, NaN display, hover readout."""

from __future__ import annotations

import dataclasses

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from gradviz.core.common.health import Health


def test_mask_counts_and_shows_the_nan_diagonal(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=120, nan_diagonal=True))
    mask = fit_views.widgets["mask"]
    counts = mask.counts()
    assert counts[Health.NAN] == 120
    assert counts[Health.FINITE] == 120 * 119
    assert "NaN 120" in mask.legend_text()
    assert "120" in mask.legend.text()
    shown = mask.displayed_image()
    assert mask.factors == (1, 1)
    assert (np.diag(shown) == Health.NAN).all()
    assert np.count_nonzero(shown == Health.NAN) == 120


def test_downsampled_mask_keeps_a_single_nan_at_2000_points(fit_views, make_snapshot):
    snap = make_snapshot(n=2000)
    codes = np.array(snap.entry_health)
    codes[1500, 321] = Health.NAN
    fit_views.show(dataclasses.replace(snap, entry_health=codes))
    mask = fit_views.widgets["mask"]
    ky, kx = mask.factors
    assert ky > 1 and kx > 1  # more entries than screen pixels
    shown = mask.displayed_image()
    assert shown.shape[0] < 2000
    assert np.count_nonzero(shown == Health.NAN) == 1
    assert shown[1500 // ky, 321 // kx] == Health.NAN
    assert mask.counts()[Health.NAN] == 1


def test_downsampled_mask_keeps_the_one_pixel_nan_diagonal_at_2000(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=2000, nan_diagonal=True))
    mask = fit_views.widgets["mask"]
    shown = mask.displayed_image()
    ky, kx = mask.factors
    assert ky > 1 and kx > 1
    d = np.arange(2000)
    assert (shown[d // ky, d // kx] == Health.NAN).all()  # every block the diagonal touches
    touched = len(set(zip((d // ky).tolist(), (d // kx).tolist(), strict=True)))
    assert np.count_nonzero(shown == Health.NAN) == touched


def test_error_levels_are_symmetric_around_zero(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=80))
    lo, hi = fit_views.widgets["error"].levels()
    assert lo == -hi > -np.inf
    assert hi >= np.abs(fit_views.snapshot.error).max() * 0.999


def test_distance_levels_cover_the_matrix(fit_views, make_snapshot):
    snap = make_snapshot(n=80)
    fit_views.show(snap)
    lo, hi = fit_views.widgets["distances"].levels()
    assert lo <= snap.distances.min() and hi >= snap.distances.max() * 0.999


def test_lock_levels_keeps_levels_across_snapshots(fit_views, make_snapshot):
    view = fit_views.widgets["distances"]
    fit_views.show(make_snapshot(n=60))
    view.lock_box.setChecked(True)
    locked = view.levels()
    fit_views.show(make_snapshot(n=60, noise=2.0))  # much larger distances
    assert view.levels() == locked
    assert view.image.levels.tolist() == list(locked)
    view.lock_box.setChecked(False)
    fit_views.show(make_snapshot(n=60, noise=2.5))
    assert view.levels() != locked


def test_nan_and_inf_entries_are_drawn_in_their_own_colours(fit_views, make_snapshot):
    snap = make_snapshot(n=50)
    d = np.array(snap.distances)
    d[3, 4] = np.nan
    d[10, 11] = np.inf
    d[12, 13] = -np.inf
    err = np.full_like(d, np.nan)
    fit_views.show(dataclasses.replace(snap, distances=d, error=err))
    view = fit_views.widgets["distances"]
    overlay = view.displayed_nonfinite()
    assert overlay[3, 4] == 3 and overlay[10, 11] == 2 and overlay[12, 13] == 1
    assert np.count_nonzero(overlay) == 3
    assert np.isfinite(view.displayed_image()).all()
    assert np.isfinite(view.levels()).all()
    assert "NaN" in view.nonfinite_label.text() and "+Inf" in view.nonfinite_label.text()
    # An all-NaN matrix still gets finite levels and is shown as NaN everywhere.
    assert np.isfinite(fit_views.widgets["error"].levels()).all()
    assert (fit_views.widgets["error"].displayed_nonfinite() == 3).all()


def test_hover_readout_names_the_cell_and_its_value(fit_views, make_snapshot, qtbot):
    snap = make_snapshot(n=40)
    fit_views.show(snap)
    view = fit_views.widgets["distances"]
    qtbot.wait(1)  # let the layout settle: scene positions are final after a paint
    pos = view.graphics.mapFromScene(view.cell_scene_pos(7, 21))
    QTest.mouseMove(view.graphics.viewport(), pos)
    expected = f"i = 7, j = 21:  d_pred = {float(snap.distances[7, 21]):.4g}"
    assert view.readout.text() == expected
    assert view.hover_cell(7, 21) == expected


def test_mask_hover_readout_gives_category_and_gradient(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=30, nan_diagonal=True))
    assert fit_views.widgets["mask"].hover_cell(5, 5) == "i = 5, j = 5:  NaN  (dLoss/d entry = NaN)"


def test_colormap_choice_recolours_the_heatmap(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=30))
    view = fit_views.widgets["distances"]
    view.colormap_box.setCurrentText("inferno")
    assert view.colorbar.colorMap().name == "inferno"
    assert view.image.getColorMap().name == "inferno"


def test_mask_palette_choice_keeps_nan_loud(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=30, nan_diagonal=True))
    mask = fit_views.widgets["mask"]
    mask.palette_box.setCurrentText("alarms only")
    lut = mask.image.lut
    assert tuple(lut[Health.NAN][:3]) == (0xF0, 0xE4, 0x42)
    assert tuple(lut[Health.FINITE][:3]) != tuple(lut[Health.NAN][:3])


def test_zoom_and_pan_are_shared_by_the_matrix_views(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=100))
    source = fit_views.widgets["error"].view
    source.setRange(xRange=(10, 30), yRange=(40, 60), padding=0)
    source.sigRangeChangedManually.emit([True, True])  # as a mouse wheel or drag does
    for panel in fit_views.matrix_panels():
        (x0, x1), (y0, y1) = panel.view.viewRange()
        assert (x0, x1, y0, y1) == (10, 30, 40, 60)


def test_zooming_in_draws_full_resolution_of_the_visible_part_only(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=2000, nan_diagonal=True))
    mask = fit_views.widgets["mask"]
    assert mask.factors != (1, 1)
    mask.view.setRange(xRange=(1000, 1100), yRange=(1000, 1100), padding=0)
    mask.view.sigRangeChangedManually.emit([True, True])
    assert mask.factors == (1, 1)
    shown = mask.displayed_image()
    assert shown.shape[0] < 400 and shown.shape[1] < 400  # not the whole 2000 x 2000
    rect = mask.image.mapRectToParent(mask.image.boundingRect())
    assert rect.left() <= 1000 and rect.right() >= 1100
    # The diagonal cells in view are NaN at their own place in the image.
    r0, c0 = int(rect.top()), int(rect.left())
    for d in range(1000, 1100):
        assert shown[d - r0, d - c0] == Health.NAN
    # Panning far away draws the new place.
    mask.view.setRange(xRange=(1800, 1900), yRange=(100, 200), padding=0)
    mask.view.sigRangeChangedManually.emit([True, True])
    rect = mask.image.mapRectToParent(mask.image.boundingRect())
    assert rect.left() <= 1800 and rect.right() >= 1900
    assert rect.top() <= 100 and rect.bottom() >= 200


def test_clicking_a_cell_uses_the_mouse(fit_views, make_snapshot, qtbot):
    fit_views.show(make_snapshot(n=40))
    view = fit_views.widgets["target"]
    qtbot.wait(1)
    pos = view.graphics.mapFromScene(view.cell_scene_pos(12, 30))
    with qtbot.waitSignal(fit_views.pairSelected, timeout=2000) as blocker:
        QTest.mouseClick(view.graphics.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert blocker.args == [12, 30]


def test_unlocking_levels_fits_them_to_the_data_at_once(fit_views, make_snapshot):
    view = fit_views.widgets["distances"]
    fit_views.show(make_snapshot(n=40))
    view.lock_box.setChecked(True)
    view.colorbar.setLevels((0.0, 100.0))
    view.lock_box.setChecked(False)  # no new snapshot needed (a paused run)
    assert view.levels()[1] < 10.0


def test_double_click_zooms_every_matrix_view_out_to_the_whole_matrix(
    fit_views, make_snapshot, qtbot
):
    fit_views.show(make_snapshot(n=100))
    view = fit_views.widgets["mask"]
    view.view.setRange(xRange=(10, 30), yRange=(40, 60), padding=0)
    view.view.sigRangeChangedManually.emit([True, True])
    qtbot.wait(1)
    pos = view.graphics.mapFromScene(view.cell_scene_pos(50, 20))
    # A real double click: press and release, then the double-click press and release.
    QTest.mouseClick(view.graphics.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    QTest.mouseDClick(view.graphics.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    QTest.mouseRelease(view.graphics.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    for panel in fit_views.matrix_panels():
        (x0, x1), (y0, y1) = panel.view.viewRange()
        assert x0 <= 0 and x1 >= 100 and y0 <= 0 and y1 >= 100


def test_nan_colour_matches_the_mask_unless_the_colormap_has_yellow(fit_views, make_snapshot):
    fit_views.show(make_snapshot(n=20, nan_diagonal=True))
    mask_nan = tuple(fit_views.widgets["mask"].image.lut[Health.NAN][:3])
    coord = fit_views.widgets["coord_grads"].values  # diverging CET-D1: no yellow in it
    assert coord.nan_colour() == "#F0E442"
    assert tuple(coord.overlay.lut[3][:3]) == mask_nan
    assert fit_views.widgets["distances"].nan_colour() == "#FF00FF"  # viridis ends in yellow
    fit_views.widgets["distances"].colormap_box.setCurrentText("CET-L1")  # grey: yellow is free
    assert fit_views.widgets["distances"].nan_colour() == "#F0E442"


def test_float64_matrices_and_int_codes_are_accepted(fit_views, make_snapshot):
    snap = make_snapshot(n=30, nan_diagonal=True)
    snap = dataclasses.replace(
        snap,
        distances=snap.distances.astype(np.float64),
        entry_health=snap.entry_health.astype(np.int64),
    )
    fit_views.show(snap)
    assert fit_views.widgets["distances"].displayed_image().dtype == np.float32
    assert fit_views.widgets["mask"].displayed_image().dtype == np.uint8
    assert fit_views.widgets["mask"].counts()[Health.NAN] == 30


def test_a_narrow_health_legend_shows_every_count_whole(qtbot):
    import numpy as np

    from gradviz.gui.widgets.healthmap import HealthMapView

    view = HealthMapView("dLoss/dx", legend_columns=3)
    qtbot.addWidget(view)
    view.resize(600, 300)
    view.show()
    qtbot.waitExposed(view)
    view.set_codes(np.full((39_800, 1), 0, dtype=np.uint8))  # "finite 39,800"
    view.resize(140, 300)  # a narrow dock: fewer legend columns, never a cut-off count
    qtbot.waitUntil(lambda: view.legend.sizeHint().width() <= view.legend.width())
    wide = view.legend.heightForWidth(600)
    assert view.legend.heightForWidth(60) == wide  # a label never wraps from its count


def test_a_narrow_coordinate_gradient_dock_says_lock_instead_of_cutting_it_off(qtbot):
    from gradviz.gui.widgets.coord_grads import CoordGradsView

    view = CoordGradsView()
    qtbot.addWidget(view)
    view.show()
    values = view.values
    lock, colormap = values.lock_box, values.colormap_box

    def settled(text: str) -> bool:
        # The row says ``text`` and every control has the width its text needs.
        return (
            lock.text() == text
            and lock.width() >= lock.sizeHint().width()
            and colormap.width() >= colormap.sizeHint().width()
        )

    for width, text in ((600, "lock levels"), (260, "lock"), (600, "lock levels")):
        view.resize(width, 300)
        qtbot.waitUntil(lambda text=text: settled(text))


def test_an_all_nan_matrix_has_a_legend_saying_what_its_colour_means(qtbot):
    """Painted in one colour (magenta on viridis), a matrix of NaN must say so, in a narrow
    dock too (the legend once sat in the controls' row and was squeezed to nothing)."""
    from gradviz.gui.widgets.heatmap import HeatmapView

    view = HeatmapView("d_pred")
    qtbot.addWidget(view)
    view.resize(250, 330)
    view.show()
    qtbot.waitExposed(view)
    view.set_matrix(np.full((30, 30), np.nan, dtype=np.float32))
    qtbot.waitUntil(lambda: view.displayed_nonfinite() is not None)
    legend = view.nonfinite_label
    assert legend.isVisible() and legend.width() > 150  # readable, not squeezed away
    assert view.nan_colour() in legend.text()  # the swatch is the colour painted
    text = _plain(legend.text())
    assert text == "■ NaN in every entry: no finite value, the colour scale shows none"
    partial = np.ones((30, 30), dtype=np.float32)
    partial[2, 3] = np.inf
    view.set_matrix(partial)
    qtbot.waitUntil(lambda: "+Inf" in view.nonfinite_label.text())
    assert _plain(legend.text()) == "■ +Inf: drawn in these colours, not on the colour scale"
    view.set_matrix(np.ones((30, 30), dtype=np.float32))
    qtbot.waitUntil(lambda: not legend.isVisible())


def _plain(rich_text: str) -> str:
    from PySide6.QtGui import QTextDocument

    document = QTextDocument()
    document.setHtml(rich_text)
    return document.toPlainText().replace("\xa0", " ")
