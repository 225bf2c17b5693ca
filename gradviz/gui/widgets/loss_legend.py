"""The loss plot's legend: the run's curve and the earlier runs', readable in a small plot.

An earlier run's full label ("earlier: net=8-17:relu-3, method=naive (318 steps)") would
cover a small plot, so the legend fits its plot: where the plot is wide enough
(FULL_WIDTH), each entry has its full label; below that each earlier run is "earlier k"
(k = 1 the newest); and where the plot is small (under FOLD_WIDTH x FOLD_HEIGHT) the legend
folds away: nothing covers the curves, and the words under the plot say what is folded
("2 earlier runs (grey): legend ▸", ``toggle_words``), a link that unfolds it. A click on
the legend, or on that link, folds or unfolds it, and that choice then holds at every size.
The legend's tooltip names every entry in full.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal

#: Plot (view box) sizes in pixels: full labels from FULL_WIDTH; folded below either FOLD size.
FULL_WIDTH = 420
FOLD_WIDTH, FOLD_HEIGHT = 300, 200


class LossLegend(pg.LegendItem):
    """Entries: the current run's curve, then the earlier runs' (newest first); see the
    module docstring. Anchored in ``plot``'s top-right corner; the plot's items are not
    added to it by name (``set_current`` and ``set_earlier`` say what it lists)."""

    foldChanged = Signal()  # folded or unfolded, or what toggle_words says changed

    def __init__(self, plot: pg.PlotItem) -> None:
        super().__init__(offset=(-10, 10), labelTextSize="8pt", brush=(20, 20, 20, 230))
        self.setParentItem(plot.getViewBox())
        self.setZValue(50)  # above the points and curves it names
        self._current: tuple[pg.PlotDataItem, str] | None = None
        self._earlier: list[tuple[pg.PlotDataItem, str]] = []  # (curve, full label)
        self.user_folded: bool | None = None  # the user's choice, once they click
        self.folded = False
        self.compact = False
        self._size = (1e9, 1e9)
        self._said: tuple[bool, str] = (False, "")  # the state foldChanged last announced
        plot.getViewBox().sigResized.connect(self._on_resized)

    def set_current(self, item: pg.PlotDataItem, name: str) -> None:
        self._current = (item, name)
        self._relayout()

    def set_earlier(self, entries: list[tuple[pg.PlotDataItem, str]]) -> None:
        """The earlier runs' curves and full labels, newest first."""
        self._earlier = list(entries)
        self._relayout()

    def fit(self, width: float, height: float) -> None:
        """Lay the legend out for a plot of ``width`` x ``height`` pixels."""
        self._size = (width, height)
        self._relayout()

    def rows(self) -> list[str]:
        """The text of each row shown, top to bottom."""
        return [label.text for _, label in self.items]

    # ---- internals ----------------------------------------------------------------------------
    def toggle(self) -> None:
        """Fold an unfolded legend, unfold a folded one (the user's choice from now on)."""
        self.user_folded = not self.folded
        self._relayout()

    def toggle_words(self) -> str:
        """The link under the plot that folds or unfolds the legend ("" where none is
        needed: a wide plot whose legend shows, or nothing folded but the run's own row)."""
        count = len(self._earlier)
        if self.folded and count:
            return f"{count} earlier run{'s' if count != 1 else ''}: legend ▸"
        if self.folded:
            return "legend ▸" if self.user_folded else ""
        return "fold the legend ◂" if self._small() or self.user_folded is False else ""

    def _small(self) -> bool:
        width, height = self._size
        return width < FOLD_WIDTH or height < FOLD_HEIGHT

    def _relayout(self) -> None:
        folded = self.user_folded if self.user_folded is not None else self._small()
        compact = self._size[0] < FULL_WIDTH
        self.folded, self.compact = folded, compact
        self.setVisible(not folded)
        wanted = self._wanted_rows(compact)
        if [name for _, name in wanted] != self.rows():
            self.clear()
            for item, name in wanted:
                self.addItem(item, name)
            self.setToolTip(self._tooltip())
        said = (self.folded, self.toggle_words())
        if said != self._said:
            self._said = said
            self.foldChanged.emit()

    def _wanted_rows(self, compact: bool) -> list[tuple[pg.PlotDataItem, str]]:
        rows = [self._current] if self._current is not None else []
        return rows + [
            (item, f"earlier {k}" if compact else label)
            for k, (item, label) in enumerate(self._earlier, 1)
        ]

    def _tooltip(self) -> str:
        lines = [f"earlier {k}: {label}" for k, (_, label) in enumerate(self._earlier, 1)]
        return "\n".join([*lines, "Click the legend to fold it away."])

    def _on_resized(self, view) -> None:
        self.fit(view.width(), view.height())

    def mouseClickEvent(self, ev) -> None:  # noqa: N802 - pyqtgraph override
        if ev.button() != Qt.MouseButton.LeftButton:
            ev.ignore()
            return
        ev.accept()
        self.toggle()
