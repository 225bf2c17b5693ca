"""How fast the live distance-fit views redraw (offscreen, painting included).

``measure_refresh(n, seconds)`` shows a cycle of synthetic snapshots in a window holding
the LabViews widgets, lets the event loop paint after each one, and returns refreshes per
second. Snapshots are built before timing starts, so only the views count. Each is a new
set of arrays (like consecutive frames of one run), so nothing is skipped as unchanged
except what a real run also leaves unchanged (the target).

This is a measuring helper for the ``gui`` suite, not a suite of its own; by hand:
``python -m gradviz.bench.gui_views``.
"""

from __future__ import annotations

import os
import time

from gradviz.gui.widgets.synthetic import synthetic_snapshot

GRID_KEYS = (
    ("distances", "target", "error", "mask"),
    ("coord_grads", "loss", "points", "pair"),
)


def views_window(views, width: int = 1600, height: int = 900):
    """A plain window with LabViews' widgets in a titled 2 x 4 grid (for benches, pictures)."""
    from PySide6.QtWidgets import QGridLayout, QGroupBox, QVBoxLayout, QWidget

    window = QWidget()
    window.setWindowTitle("gradviz views")
    grid = QGridLayout(window)
    grid.setContentsMargins(4, 4, 4, 4)
    grid.setSpacing(4)
    for row, keys in enumerate(GRID_KEYS):
        for col, key in enumerate(keys):
            box = QGroupBox(views.titles[key])
            inner = QVBoxLayout(box)
            inner.setContentsMargins(2, 2, 2, 2)
            inner.addWidget(views.widgets[key])
            grid.addWidget(box, row, col)
    for col in range(len(GRID_KEYS[0])):
        grid.setColumnStretch(col, 1)
    for row in range(len(GRID_KEYS)):
        grid.setRowStretch(row, 1)
    window.resize(width, height)
    return window


def measure_refresh(
    n: int,
    seconds: float,
    distance_views_only: bool = False,
    pool: int = 3,
    changing_mask: bool = False,
) -> float:
    """Refreshes per second of ``LabViews.show`` at ``n`` points, painting included.

    With ``distance_views_only`` the window holds just the four N x N matrix views (the
    figure the issue sets targets for: >= 40/s at N = 1000, >= 20/s at N = 2000).
    By default the gradient mask stays the same from frame to frame, as in most frames of
    a real run (the mask view then skips its redraw); ``changing_mask`` alternates a NaN
    diagonal so that the mask and its counts are redrawn every frame (the worst case).
    """
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from gradviz.gui.run.views import LabViews

    app = QApplication.instance() or QApplication([])
    views = LabViews()
    window = _matrix_window(views) if distance_views_only else views_window(views)
    window.show()
    # Like consecutive frames of one run: same points, slightly different fit, new arrays.
    snapshots = [synthetic_snapshot(n, step=200, noise=0.1 * (1.0 + 0.02 * k)) for k in range(pool)]
    views.show(snapshots[-1])
    app.processEvents()
    frames = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or frames < 3:
        views.show(snapshots[frames % pool])
        # The views ask for repaints; the event loop paints the changed items, as in the app.
        app.processEvents()
        frames += 1
    rate = frames / (time.perf_counter() - start)
    window.close()
    window.deleteLater()
    app.processEvents()
    return rate


def _matrix_window(views):
    from PySide6.QtWidgets import QGridLayout, QWidget

    window = QWidget()
    grid = QGridLayout(window)
    for k, key in enumerate(("distances", "target", "error", "mask")):
        grid.addWidget(views.widgets[key], k // 2, k % 2)
    window.resize(1200, 900)
    return window


def main() -> None:  # pragma: no cover - manual use: python -m gradviz.bench.gui_views
    for n in (100, 1000, 2000):
        both = measure_refresh(n, 3.0, distance_views_only=True)
        worst = measure_refresh(n, 3.0, distance_views_only=True, changing_mask=True)
        every = measure_refresh(n, 3.0)
        print(
            f"N = {n:5d}: distance views {both:6.1f}/s "
            f"({worst:6.1f}/s with a changing mask), all views {every:6.1f}/s"
        )


if __name__ == "__main__":  # pragma: no cover
    main()
