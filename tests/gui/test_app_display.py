"""Display-sized pictures of a big run: the views draw at most MAX_DISPLAY cells a side,
yet their axes, hover and clicks speak full-resolution indices, the health legend counts
every entry, and the exact value of a hovered or clicked entry comes from the run (on its
worker thread). MAX_DISPLAY is patched small so N = 64 is already "big"."""
# The shared fixtures are imported by name, which pyflakes reads as a redefinition:
# ruff: noqa: F811

from __future__ import annotations

import re

import numpy as np
import pytest
from fixtures_app import (  # noqa: F401 - fixtures
    isolated_settings,
    make_lab,
    small,
)
from PySide6.QtCore import Qt

from gradviz.core.common import decimate

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pyqtgraph")

WAIT_MS = 60_000
N, SIDE = 64, 16  # a 64 x 64 matrix shown as 16 x 16 cells of 4 x 4 entries


@pytest.fixture
def big_lab(make_lab, monkeypatch):
    monkeypatch.setattr(decimate, "MAX_DISPLAY", SIDE)
    return make_lab(small("safe", n=N))


def _exact_distance(snapshot, i: int, j: int) -> float:
    """An independent float64 reference from the snapshot's coordinates."""
    coords = snapshot.coords.astype(np.float64)
    return float(np.linalg.norm(coords[i] - coords[j]))


def _number(text: str, name: str) -> float:
    match = re.search(rf"{re.escape(name)} = (\S+)", text)
    assert match is not None, text
    return float(match.group(1))


def _pointer_at(qtbot, panel, i: int, j: int):
    from PySide6.QtWidgets import QApplication

    # A frame just shown can change the panel's layout (its NaN legend row appears):
    # point at the cell where it is once that layout is applied.
    QApplication.processEvents()
    viewport = panel.graphics.viewport()
    pos = panel.graphics.mapFromScene(panel.cell_scene_pos(i, j))
    qtbot.mouseMove(viewport, pos)
    return viewport, pos


def test_a_decimated_view_counts_full_resolution_entries_on_its_axes_and_legend(big_lab):
    snapshot = big_lab.session.latest
    assert snapshot.display_block == 4 and snapshot.distances.shape == (SIDE, SIDE)
    panel = big_lab.views.views["distances"].panel
    assert panel.extent == (N, N) and panel.block == 4
    (x0, x1), (y0, y1) = panel.view.viewRange()
    assert x0 <= 0 and x1 >= N and x1 < N + 8 and y1 >= N  # the axes count 0..64, not 0..16
    health = big_lab.views.views["mask"].widget
    assert sum(health.counts().values()) == N * N  # entries, not 16 x 16 cells
    assert health.extent == (N, N)


def test_hovering_a_decimated_cell_reads_the_exact_full_resolution_distance(qtbot, big_lab):
    snapshot = big_lab.session.latest
    panel = big_lab.views.views["distances"].panel
    i, j = 37, 50
    exact = _exact_distance(snapshot, i, j)
    block_value = float(snapshot.distances[i // 4, j // 4])
    assert abs(block_value - exact) > 1e-2 * exact  # the block mean would not pass below

    _pointer_at(qtbot, panel, i, j)
    qtbot.waitUntil(lambda: "d_pred = " in panel.readout.text(), timeout=WAIT_MS)
    text = panel.readout.text()
    assert text.startswith(f"i = {i}, j = {j}:")
    assert _number(text, "d_pred") == pytest.approx(exact, rel=1e-3)


def test_clicking_a_decimated_cell_selects_the_full_resolution_pair_with_exact_values(
    qtbot, big_lab
):
    snapshot = big_lab.session.latest
    panel = big_lab.views.views["error"].panel
    i, j = 9, 58
    viewport, pos = _pointer_at(qtbot, panel, i, j)
    qtbot.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=pos)
    qtbot.waitUntil(lambda: big_lab.views.selected_pair == (i, j), timeout=WAIT_MS)
    pair = big_lab.views.views["pair"].widget
    exact = _exact_distance(snapshot, i, j)
    qtbot.waitUntil(lambda: not pair.field_text("d_pred").startswith("≈"), timeout=WAIT_MS)
    assert pair.field_text("pair") == f"({i}, {j})"
    assert float(pair.field_text("d_pred")) == pytest.approx(exact, rel=1e-3)


def test_the_replayed_first_nan_is_display_sized_and_reads_exact_values_of_its_step(
    qtbot, make_lab, monkeypatch
):
    # SGD with a huge learning rate overflows after some steps; at half a frame a second
    # that step is not captured, so the worker replays the run to pin it (see test_app).
    monkeypatch.setattr(decimate, "MAX_DISPLAY", SIDE)
    lab = make_lab(small("masked", n=N, optimizer="sgd", lr=100.0))
    lab.form.param("frame_rate").setValue(0.5)
    lab.start()
    # The replayed pin replaces the first, approximate one (taken after the spoiling
    # update): its coordinates are those before the update, still finite.
    qtbot.waitUntil(
        lambda: lab.session.pinned is not None and np.isfinite(lab.session.pinned.coords).all(),
        timeout=WAIT_MS,
    )
    pinned = lab.session.pinned
    assert pinned.display_block == 4 and pinned.entry_health.shape == (SIDE, SIDE)
    assert sum(pinned.entry_health_counts) == N * N
    lab.window.actions["first_nan"].trigger()
    assert lab.views.snapshot is pinned

    panel = lab.views.views["distances"].panel
    i, j = 21, 44
    _pointer_at(qtbot, panel, i, j)
    qtbot.waitUntil(lambda: "d_pred = " in panel.readout.text(), timeout=WAIT_MS)
    exact = _exact_distance(pinned, i, j)  # the pinned step's coordinates, float64
    assert _number(panel.readout.text(), "d_pred") == pytest.approx(exact, rel=1e-3)
