"""The point-set gallery of the setup panel: thumbnails drawn by the generators, picking,
point files that set N and D (and the network's output width), saving the points."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog

from gradviz.core.lab.pointsets import generate, load_points
from gradviz.core.settings.config import FitConfig
from gradviz.gui.widgets.point_gallery import THUMB, draw_points
from gradviz.gui.widgets.settings_form import SetupForm


@pytest.fixture
def form(qtbot):
    form = SetupForm(FitConfig(n=50, dim=3, seed=4, net="8-16-3:tanh"))
    qtbot.addWidget(form)
    form.resize(360, 1000)
    form.show()
    qtbot.waitExposed(form)
    return form


def icon_image(button):
    return button.icon().pixmap(THUMB, THUMB).toImage()


def test_each_thumbnail_is_the_generators_own_points_at_n_d_and_seed(qtbot, form):
    gallery = form.point_gallery().gallery
    for name in ("gaussian", "helix", "grid"):
        expected = draw_points(generate(name, 50, 3, 4), THUMB).toImage()
        assert icon_image(gallery.buttons[name]) == expected, name
        assert "50 points in 3-D, seed 4" in gallery.buttons[name].toolTip()
    before = icon_image(gallery.buttons["gaussian"])
    form.param("seed").setValue(5)
    qtbot.waitUntil(lambda: icon_image(gallery.buttons["gaussian"]) != before)
    assert icon_image(gallery.buttons["gaussian"]) == (
        draw_points(generate("gaussian", 50, 3, 5), THUMB).toImage()
    )


def test_a_generator_that_cannot_make_this_d_is_not_offered_and_says_why(qtbot, form):
    form.param("dim").setValue(2)
    gallery = form.point_gallery()
    gallery.refresh()
    readouts = gallery.gallery.readouts()
    assert "helix" not in readouts["offered"] and "circle" in readouts["offered"]
    assert "at least 3 dimensions" in gallery.gallery.buttons["helix"].toolTip()


def test_picking_a_thumbnail_sets_the_target_and_previews_it(qtbot, form):
    gallery = form.point_gallery().gallery
    with qtbot.waitSignal(form.changed) as changed:
        qtbot.mouseClick(gallery.buttons["moons"], Qt.MouseButton.LeftButton)
    assert changed.args == ["target"]
    assert form.config().target == "moons"
    form.point_gallery().refresh()
    readouts = gallery.readouts()
    assert readouts["picked"] == "moons"
    assert readouts["caption"].startswith("moons: two interleaved half circles; 50 points in 3-D")


def test_a_two_column_csv_sets_n_d_and_the_networks_last_width(qtbot, form, tmp_path, monkeypatch):
    path = tmp_path / "pts.csv"
    points = np.random.default_rng(0).normal(size=(37, 2))
    np.savetxt(path, points, delimiter=",")
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(path), ""))
    qtbot.mouseClick(form.point_gallery().gallery.buttons["file…"], Qt.MouseButton.LeftButton)
    config = form.config()
    assert (config.target, config.n, config.dim) == (f"file:{path}", 37, 2)
    assert form.param("n").value() == 37 and form.param("dim").value() == 2
    assert form.param("n").readonly() and form.param("dim").readonly()
    assert config.net == "8-16-2:tanh"
    assert form.network_editor().readouts()["widths"] == [8, 16, 2]
    assert form.problem_text == ""
    form.point_gallery().refresh()
    assert form.point_gallery().gallery.readouts()["caption"] == "pts.csv: 37 points in 2-D"
    # Back to a generator: N and D are the panel's own again.
    form.param("target").setValue("circle")
    assert not form.param("n").readonly() and form.config().n == 37


def test_a_bad_point_file_is_named_in_one_sentence(qtbot, form, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("1,2\n3,oops\n")
    form.param("target_file").setValue(str(path))
    form.param("target").setValue("file…")
    assert "line 2, field 2 is 'oops', not a number" in form.problem_text
    assert form.param("n").value() == 50 and not form.param("n").readonly()


@pytest.mark.parametrize("suffix", [".csv", ".npy"])
def test_save_points_writes_the_target_shown(qtbot, form, tmp_path, monkeypatch, suffix):
    path = tmp_path / f"saved{suffix}"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(path), ""))
    qtbot.mouseClick(form.point_gallery().gallery.save_button, Qt.MouseButton.LeftButton)
    np.testing.assert_array_equal(load_points(path), generate("helix", 50, 3, 4))
