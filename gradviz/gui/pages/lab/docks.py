"""The lab's docks in the window: the setup column and one dock per entry of the views
registry (``VIEWS``), placed by its area, tabbed where it says, and sized so the setup
column is as wide as its values need and the views share the rest.

The window gives the docks a place (``add_dock``: object name, View menu entry); where they
go and how wide they are is the lab's.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QMainWindow, QWidget

from gradviz.gui.run.views import VIEWS, DockArea

#: Width of the setup column (px): its longest values fit, the views get the rest.
SETUP_WIDTH = 330
#: The setup column never grows past this: a wide window widens the views instead.
SETUP_MAX_WIDTH = 420
#: Smallest size of a view's dock (px): a small window squeezes the views (their controls
#: may be cut short) instead of drawing docks over each other.
VIEW_MIN_SIZE = (120, 110)


class LabDocks:
    """Makes the setup's and the views' docks in ``window`` (which has ``add_dock`` and
    ``firstShown``) and sizes them once the window has its real size."""

    def __init__(self, window, setup: QWidget, views: dict[str, QWidget]) -> None:
        self.window = window
        self.views = views
        window.add_dock("setup", "Setup", setup).setMaximumWidth(SETUP_MAX_WIDTH)
        for entry in VIEWS:
            if entry.key in views:
                if entry.area is not DockArea.LEFT:  # the rows share the width left over
                    views[entry.key].setMinimumSize(*VIEW_MIN_SIZE)
                window.add_dock(entry.key, entry.title, views[entry.key])
        self._place()
        self.arrange_sizes()
        window.firstShown.connect(self.arrange_sizes)  # sizes only take at the real size

    def _place(self) -> None:
        window, d, views = self.window, self.window.docks, self.views
        window.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, d["setup"])
        rows = {area: _row(area, views) for area in DockArea}
        for key in rows[DockArea.LEFT]:
            window.splitDockWidget(d["setup"], d[key], Qt.Orientation.Vertical)
        top, bottom = rows[DockArea.TOP], rows[DockArea.BOTTOM]
        window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, d[top[0]])
        window.splitDockWidget(d[top[0]], d[bottom[0]], Qt.Orientation.Vertical)
        for row in (top, bottom):
            for left, right in zip(row, row[1:]):
                window.splitDockWidget(d[left], d[right], Qt.Orientation.Horizontal)
        for entry in VIEWS:
            if entry.tab_with is not None and entry.key in views:
                window.tabifyDockWidget(d[entry.tab_with], d[entry.key])
                d[entry.tab_with].raise_()

    def arrange_sizes(self) -> None:
        """A setup column as wide as its values need, the rest shared by the views."""
        window, d = self.window, self.window.docks
        views = {k: d[k].widget() for k in self.views}
        for entry in VIEWS:  # measured here, as widgets are polished once shown
            if entry.key in views and entry.area is not DockArea.LEFT:
                _keep_controls_whole(views[entry.key])
        horizontal, vertical = Qt.Orientation.Horizontal, Qt.Orientation.Vertical
        rest = max(window.width() - SETUP_WIDTH - 20, 300)
        shares = {e.key: e.share for e in VIEWS}
        for area in (DockArea.TOP, DockArea.BOTTOM):
            row = _row(area, views)
            least = [_narrowest(window, d[k]) for k in row]
            widths = fair_widths(rest, [shares[k] for k in row], least)
            window.resizeDocks(
                [d["setup"]] + [d[k] for k in row], [SETUP_WIDTH, *widths], horizontal
            )
        height = max(window.height() - 120, 300)
        top, bottom = _row(DockArea.TOP, views)[0], _row(DockArea.BOTTOM, views)[0]
        window.resizeDocks([d[top], d[bottom]], [int(height * 0.55), int(height * 0.45)], vertical)
        for key in _row(DockArea.LEFT, views)[:1]:
            window.resizeDocks(
                [d["setup"], d[key]], [int(height * 0.72), int(height * 0.28)], vertical
            )


def _keep_controls_whole(view: QWidget) -> None:
    """No view narrower than its own controls need, nor lower than its plot, legend and
    readout need: a smaller minimum lets a small window draw the controls over the dock's
    edge, or squeeze a map to a strip under its legend (the docks keep a widget's explicit
    minimum, not its hint)."""
    hint = view.minimumSizeHint()
    view.setMinimumSize(max(VIEW_MIN_SIZE[0], hint.width()), max(VIEW_MIN_SIZE[1], hint.height()))


def _narrowest(window: QMainWindow, dock: QDockWidget) -> int:
    """The width below which ``dock``'s content (or a tab beside it) would be cut."""
    return max(t.widget().minimumWidth() for t in [dock, *window.tabifiedDockWidgets(dock)])


def fair_widths(total: int, shares: list[float], least: list[int]) -> list[int]:
    """``total`` split in proportion to ``shares``, where none gets less than its ``least``:
    those that would are given their least, and the rest share what is left."""
    fixed: dict[int, float] = {}
    while True:
        free = [i for i in range(len(shares)) if i not in fixed]
        left = total - sum(fixed.values())
        widths = {i: left * shares[i] / sum(shares[j] for j in free) for i in free}
        short = [i for i in free if widths[i] < least[i]]
        if not short or len(short) == len(free):
            break
        fixed.update({i: least[i] for i in short})
    return [int(fixed[i] if i in fixed else widths[i]) for i in range(len(shares))]


def _row(area: DockArea, views: dict[str, QWidget]) -> list[str]:
    """The keys of the untabbed docks of ``area``, in registry order."""
    return [e.key for e in VIEWS if e.area is area and e.tab_with is None and e.key in views]
