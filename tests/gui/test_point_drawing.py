"""Points drawn by hand in the point-set gallery: click to add, drag to move, select and
Delete to remove; the target, N, D and the network follow, and the lab's run and its target
distance matrix follow the drawing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fixtures_app import RUN_TIMEOUT_MS, isolated_settings, make_lab, small  # noqa: F401
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

from gradviz.core.lab.pointsets import generate
from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.drawn import format_drawn, parse_drawn
from gradviz.gui.widgets.point_gallery import project
from gradviz.gui.widgets.settings_form import SetupForm

LEFT, NONE = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton


def pixel_of(canvas, x: float, y: float) -> QPoint:
    """Where the point (x, y) of the drawing is on the canvas's viewport."""
    scene = canvas.box.mapViewToScene(QPointF(x, y))
    return canvas.view.mapFromScene(scene)


def _send(widget, kind, pos: QPoint, button, buttons) -> None:
    where = QPointF(pos)
    event = QMouseEvent(kind, where, QPointF(widget.mapToGlobal(pos)), button, buttons,
                        Qt.KeyboardModifier.NoModifier)  # fmt: skip
    QApplication.sendEvent(widget, event)


def click(canvas, pos: QPoint) -> None:
    viewport = canvas.view.viewport()
    _send(viewport, QEvent.Type.MouseButtonPress, pos, LEFT, LEFT)
    _send(viewport, QEvent.Type.MouseButtonRelease, pos, LEFT, NONE)


def drag(canvas, start: QPoint, end: QPoint, steps: int = 8) -> None:
    """Press at ``start``, move in steps with the button held, release at ``end``."""
    viewport = canvas.view.viewport()
    _send(viewport, QEvent.Type.MouseButtonPress, start, LEFT, LEFT)
    for k in range(1, steps + 1):
        at = start + (end - start) * (k / steps)
        _send(viewport, QEvent.Type.MouseMove, at, NONE, LEFT)
    _send(viewport, QEvent.Type.MouseButtonRelease, end, LEFT, NONE)


def view_of(canvas, pos: QPoint) -> tuple[float, float]:
    """The drawing's coordinates under viewport pixel ``pos`` (as the canvas maps it)."""
    where = canvas.box.mapSceneToView(canvas.view.mapToScene(pos))
    return where.x(), where.y()


def make_form(qtbot, dim: int) -> SetupForm:
    form = SetupForm(FitConfig(target="moons", n=20, dim=dim, seed=4, net=f"8-16-{dim}:tanh"))
    qtbot.addWidget(form)
    form.resize(360, 1400)
    form.show()
    qtbot.waitExposed(form)
    return form


@pytest.fixture
def form(qtbot):
    return make_form(qtbot, 2)


@pytest.fixture
def form_3d(qtbot):
    return make_form(qtbot, 3)


def start_drawing(qtbot, form):
    points = form.point_gallery()
    qtbot.mouseClick(points.gallery.buttons["drawn"], LEFT)
    points.refresh()
    canvas = points.gallery.drawing
    qtbot.waitUntil(lambda: canvas.isVisible() and canvas.view.height() > 100)
    return canvas


def test_drawing_starts_from_the_set_shown_and_sets_n_d_and_the_network(qtbot):
    form = make_form(qtbot, 4)  # 4-D: drawn as its 2-D projection
    shown = generate("moons", 20, 4, 4)
    canvas = start_drawing(qtbot, form)
    config = form.config()
    expected = np.round(project(shown), 4)
    assert np.array_equal(np.array(parse_drawn(config.target)), expected)
    assert (config.n, config.dim, config.net) == (20, 2, "8-16-2:tanh")
    assert form.param("n").readonly() and form.param("dim").readonly()
    assert np.array_equal(canvas.points, expected)
    assert form.point_gallery().gallery.readouts()["caption"] == "drawn: 20 points in 2-D"


def test_click_adds_drag_moves_and_delete_removes_a_point(qtbot, form):
    canvas = start_drawing(qtbot, form)
    before = canvas.points
    # A click away from every point adds one there.
    (x0, x1), (y0, y1) = canvas.box.viewRange()
    empty = pixel_of(canvas, x0 + 0.1 * (x1 - x0), y0 + 0.1 * (y1 - y0))
    changed: list[str] = []
    form.changed.connect(changed.append)
    click(canvas, empty)
    assert changed == ["n", "target"]  # the target, and N that follows it
    added = np.round(view_of(canvas, empty), 4)
    points = np.array(parse_drawn(form.config().target))
    assert len(points) == 21 and form.config().n == 21
    assert np.allclose(points[-1], added, atol=1e-4)
    # A drag from point 3 moves it where the mouse lets go; the others stay.
    start = pixel_of(canvas, *before[3])
    end = start + QPoint(40, -30)
    drag(canvas, start, end)
    points = np.array(parse_drawn(form.config().target))
    assert np.allclose(points[3], view_of(canvas, end), atol=1e-4)
    assert np.array_equal(np.delete(points, 3, axis=0)[:19], np.delete(before, 3, axis=0))
    # Select point 5 and press Delete: it is gone.
    click(canvas, pixel_of(canvas, *points[5]))
    assert canvas.selected == 5
    qtbot.keyClick(canvas, Qt.Key.Key_Delete)
    after = np.array(parse_drawn(form.config().target))
    assert np.array_equal(after, np.delete(points, 5, axis=0)) and form.config().n == 20


def test_two_points_are_the_fewest_a_drawing_keeps(qtbot, form):
    canvas = start_drawing(qtbot, form)
    form.set_config(form.config().with_changes(target=format_drawn([[0, 0], [1, 1]]), n=2))
    form.point_gallery().refresh()
    canvas.select(0)
    assert not canvas.remove_selected()
    assert "at least 2 points" in canvas.hint.text() and len(parse_drawn(form.config().target)) == 2


def test_clear_starts_an_empty_canvas_and_the_second_point_drawn_is_the_new_set(qtbot, form):
    canvas = start_drawing(qtbot, form)
    kept = form.config().target
    qtbot.mouseClick(canvas.clear_button, LEFT)
    assert len(canvas.points) == 0 and "0 points in 2-D" in canvas.hint.text()
    assert form.config().target == kept  # nothing to run yet: the run keeps its points
    (x0, x1), (y0, y1) = canvas.box.viewRange()
    first = pixel_of(canvas, x0 + 0.3 * (x1 - x0), y0 + 0.3 * (y1 - y0))
    click(canvas, first)
    assert form.config().target == kept and "1 point in 2-D" in canvas.hint.text()
    second = pixel_of(canvas, x0 + 0.7 * (x1 - x0), y0 + 0.6 * (y1 - y0))
    click(canvas, second)
    drawn = np.array(parse_drawn(form.config().target))
    expected = np.round([view_of(canvas, first), view_of(canvas, second)], 4)
    assert np.allclose(drawn, expected, atol=1e-4) and form.config().n == 2


def test_dragging_a_point_restarts_the_run_and_its_target_matrix_follows(
    qtbot,
    make_lab,  # noqa: F811 - fixture
):
    twenty = format_drawn(np.round(generate("circle", 20, 2), 4))
    lab = make_lab(small("safe", target=twenty, n=20, dim=2))
    canvas = lab.form.point_gallery().gallery.drawing
    lab.window.docks["setup"].widget().setMinimumHeight(1400)  # room for the canvas
    lab.form.tree.scrollToItem(next(iter(lab.form.param("target_gallery").items)))
    qtbot.waitUntil(lambda: canvas.isVisible() and canvas.view.height() > 100)
    before = canvas.points
    session = lab.session
    generation = session.generation
    start = pixel_of(canvas, *before[0])
    end = start + QPoint(-35, 25)
    drag(canvas, start, end)
    moved = view_of(canvas, end)  # where the mouse let go, in the drawing's coordinates
    assert session.generation > generation  # restarted at once
    own = lambda: session.shown is not None and session.shown.generation == session.generation  # noqa: E731
    qtbot.waitUntil(own, timeout=RUN_TIMEOUT_MS)
    image = lab.views.views["target"].widget.displayed_image()
    for j in (1, 7, 13):
        independent = math.hypot(moved[0] - before[j][0], moved[1] - before[j][1])
        old = math.hypot(*(before[0] - before[j]))
        assert abs(float(image[0, j]) - independent) <= 1e-3 * max(1.0, independent)
        assert abs(independent - old) > 1e-2  # the entry changed with the drag
    assert lab.form.config().target == session.config.target  # the run is the drawing


def test_a_3d_set_is_drawn_in_3d_a_click_adds_on_the_plane_facing_the_viewer(qtbot, form_3d):
    form = form_3d
    canvas = start_drawing(qtbot, form)
    shown = np.round(generate("moons", 20, 3, 4), 4)
    config = form.config()
    assert np.array_equal(np.array(parse_drawn(config.target)), shown)  # kept in 3-D
    assert (config.n, config.dim, config.net) == (20, 3, "8-16-3:tanh")
    assert canvas.readouts()["view"] == "PCA" and "3-D" in canvas.hint.text()
    assert "plane through the points' centre facing you" in canvas.hint.text()
    # A click away from every point adds one in 3-D: drawn where the click was, on the
    # plane through the points' centre that faces the viewer.
    (x0, x1), (y0, y1) = canvas.box.viewRange()
    empty = pixel_of(canvas, x0 + 0.1 * (x1 - x0), y0 + 0.1 * (y1 - y0))
    click(canvas, empty)
    points = np.array(parse_drawn(form.config().target))
    assert points.shape == (21, 3) and form.config().n == 21
    axes, mean = canvas.projection.axes, canvas.projection.mean
    normal = np.cross(axes[:, 0], axes[:, 1])  # towards the viewer
    assert np.allclose((points[-1] - mean) @ axes, view_of(canvas, empty), atol=2e-4)
    assert abs((points[-1] - shown.mean(axis=0)) @ normal) <= 2e-4
    assert np.array_equal(points[:20], shown)  # the others stay


def test_a_3d_drag_moves_a_point_in_the_view_plane_keeping_its_depth(qtbot, form_3d):
    form = form_3d
    canvas = start_drawing(qtbot, form)
    canvas.projection_box.setCurrentText("x0 vs x2")  # the view of x0 and x2; x1 is depth
    before = canvas.points
    start = pixel_of(canvas, before[3][0], before[3][2])
    end = start + QPoint(30, 25)
    drag(canvas, start, end)
    points = np.array(parse_drawn(form.config().target))
    assert points[3][1] == before[3][1]  # its depth, unchanged
    assert np.allclose(points[3][[0, 2]], view_of(canvas, end), atol=1e-4)
    assert np.array_equal(np.delete(points, 3, axis=0), np.delete(before, 3, axis=0))
    # Delete removes the selected point in 3-D too.
    qtbot.keyClick(canvas, Qt.Key.Key_Delete)
    after = np.array(parse_drawn(form.config().target))
    assert np.array_equal(after, np.delete(points, 3, axis=0)) and form.config().dim == 3


def test_dragging_a_3d_point_restarts_the_run_and_its_target_matrix_follows(
    qtbot,
    make_lab,  # noqa: F811 - fixture
):
    twelve = format_drawn(np.round(generate("helix", 12, 3), 4))
    lab = make_lab(small("safe", target=twelve, n=12, dim=3))
    canvas = lab.form.point_gallery().gallery.drawing
    lab.window.docks["setup"].widget().setMinimumHeight(1400)  # room for the canvas
    lab.form.tree.scrollToItem(next(iter(lab.form.param("target_gallery").items)))
    qtbot.waitUntil(lambda: canvas.isVisible() and canvas.view.height() > 100)
    canvas.projection_box.setCurrentText("x1 vs x2")  # x0 is the depth
    before = canvas.points
    session = lab.session
    generation = session.generation
    start = pixel_of(canvas, before[0][1], before[0][2])
    end = start + QPoint(-35, 25)
    drag(canvas, start, end)
    assert session.generation > generation  # restarted at once
    moved = np.array(parse_drawn(session.config.target))[0]
    assert moved[0] == before[0][0] and np.allclose(moved[1:], view_of(canvas, end), atol=1e-4)
    own = lambda: session.shown is not None and session.shown.generation == session.generation  # noqa: E731
    qtbot.waitUntil(own, timeout=RUN_TIMEOUT_MS)
    image = lab.views.views["target"].widget.displayed_image()
    for j in (1, 5, 11):
        independent = math.dist(moved, before[j])  # 3-D distances, float64
        assert abs(float(image[0, j]) - independent) <= 1e-3 * max(1.0, independent)
        assert abs(independent - math.dist(before[0], before[j])) > 1e-2
    assert lab.form.config().target == session.config.target
