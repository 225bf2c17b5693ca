"""Float matrices as heatmaps: colorbar, colormap choice, lock-levels, NaN/Inf overlay."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Slot
from PySide6.QtWidgets import QCheckBox, QComboBox, QWidget

from gradviz.gui.widgets import arrays, axes, palette
from gradviz.gui.widgets.panel import MatrixPanel, format_value, status_label


class HeatmapView(MatrixPanel):
    """A float matrix with a colorbar, a colormap choice and a lock-levels toggle.

    NaN, +Inf and -Inf entries are drawn on top in their own colours (NaN in the mask's
    yellow, or magenta on colormaps that contain yellow), so a non-finite entry is never
    mistaken for a value. ``diverging`` views centre the colormap on 0 with symmetric levels.
    """

    def __init__(
        self,
        value_label: str,
        x_label: str = "j (point)",
        y_label: str = "i (point)",
        diverging: bool = False,
        lock_aspect: bool = False,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(x_label, y_label, lock_aspect, parent)
        self.diverging = diverging
        self.value_label = value_label
        self._values: np.ndarray | None = None
        maps = palette.DIVERGING_MAPS if diverging else palette.SEQUENTIAL_MAPS

        self.colormap_box = QComboBox()
        self.colormap_box.addItems(maps)
        self.colormap_box.setToolTip("Colormap")
        self.lock_box = QCheckBox("lock")
        self.lock_box.setToolTip("Lock levels: keep the colour levels fixed across frames")
        compact = self.lock_box.sizeHint().width()
        self.lock_box.setText("lock levels")
        self._lock_width = self.lock_box.sizeHint().width()
        self.lock_box.setMinimumWidth(compact)  # a narrow panel says "lock" (resizeEvent)
        # The legend of the non-finite colours, in a row of its own under the plot: in the
        # controls' row a narrow dock squeezed it to nothing, and a matrix painted in the
        # NaN colour had nothing to say what that colour meant.
        self.nonfinite_label = status_label()
        self.nonfinite_label.setWordWrap(True)
        # Its line when there is room; the smallest window's maps keep their height first.
        self.nonfinite_label.setMinimumHeight(1)
        #: Whether this view says what its NaN/Inf colours mean (a view beside a health map
        #: that names them may leave it to that map).
        self.nonfinite_legend_shown = True
        self.nonfinite_label.hide()
        self.controls.addWidget(self.colormap_box)
        self.controls.addWidget(self.lock_box)
        self.controls.addStretch(1)
        self.layout().insertWidget(2, self.nonfinite_label)  # between the plot and readout

        self.colorbar = axes.ColorBarItem(
            values=(-1.0, 1.0) if diverging else (0.0, 1.0),
            colorMap=maps[0],
            label=value_label,
            interactive=True,
            width=14,
            colorMapMenu=False,
        )
        self.colorbar.setImageItem(self.image, insert_in=self.plot)
        # A fixed width: tick labels of new levels must not resize (and relayout) the plot.
        self.colorbar.axis.setWidth(58)
        self.overlay = pg.ImageItem(axisOrder="row-major")
        self._overlay_colours: dict[int, str] = {}
        self._set_overlay_colours(maps[0])
        self.overlay.setZValue(10)
        self.overlay.setVisible(False)
        self.plot.addItem(self.overlay)

        self.colormap_box.currentTextChanged.connect(self._on_colormap_changed)
        self.colorbar.sigLevelsChangeFinished.connect(self._on_levels_dragged)
        self.lock_box.toggled.connect(self._on_lock_toggled)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        # In a narrow dock "lock levels" would be cut off mid-word: it says "lock" there.
        full = self.colormap_box.sizeHint().width() + self._lock_width + 12
        text = "lock levels" if self.width() >= full else "lock"
        if self.lock_box.text() != text:
            self.lock_box.setText(text)

    # -- public -----------------------------------------------------------------------------
    def set_matrix(
        self, values: np.ndarray | None, block: int = 1, extent: tuple[int, int] | None = None
    ) -> None:
        """Show an ``(R, C)`` float matrix (kept by reference; snapshots are read-only).

        A display-sized matrix gives its ``block`` (full entries per side of a cell) and the
        full matrix's ``extent`` (rows, columns): the axes and the readout then count
        full-resolution entries.
        """
        if values is not None and values is self._values and not self._dirty:
            return  # the very same array is already on screen
        self._values = values
        if values is None:
            self.clear()
            return
        self._set_shape(values.shape, block, extent)
        self._request_draw()

    def clear(self) -> None:
        self._values = None
        self._shape = self._extent = (0, 0)
        self.image.clear()
        self.overlay.clear()
        self.overlay.setVisible(False)
        self._say_nonfinite(None)
        self.set_marker(None, None)

    def levels(self) -> tuple[float, float]:
        """Colour levels (low, high) in use."""
        lo, hi = self.colorbar.levels()
        return float(lo), float(hi)

    def locked(self) -> bool:
        return self.lock_box.isChecked()

    def lock_levels(self, levels: tuple[float, float]) -> None:
        """Fix the colour levels at ``levels`` (low, high) across frames."""
        self._set_levels(levels)
        self.lock_box.setChecked(True)

    def displayed_image(self) -> np.ndarray | None:
        """The (downsampled, sanitised) float32 image handed to pyqtgraph."""
        return self.image.image

    def displayed_nonfinite(self) -> np.ndarray | None:
        """The overlay codes (0 finite, 1 -Inf, 2 +Inf, 3 NaN) when anything is non-finite."""
        return self.overlay.image if self.overlay.isVisible() else None

    # -- drawing ----------------------------------------------------------------------------
    def _render(self, ky: int, kx: int) -> None:
        shown = arrays.block_mean(self._visible_part(self._values), ky, kx)
        lo, hi = float(shown.min()), float(shown.max())
        all_finite = math.isfinite(lo) and math.isfinite(hi)
        levels = self.levels() if self.locked() else self._auto_levels(shown)
        if all_finite:
            self.overlay.setVisible(False)
            self._say_nonfinite(None)
        else:
            codes = arrays.nonfinite_codes(shown)
            shown[codes != 0] = levels[0]  # hidden under the overlay; keeps levels finite
            self.overlay.setImage(codes, levels=(0, 255), autoLevels=False)
            self._place_image(self.overlay, ky, kx, codes)
            self.overlay.setVisible(True)
            self._say_nonfinite(codes, self.block == 1 and (ky, kx) == (1, 1))
        if not self.locked():
            self._set_levels(levels)
        self.image.setImage(shown, autoLevels=False, levels=levels)
        self._place_image(self.image, ky, kx, shown)

    def _auto_levels(self, shown: np.ndarray) -> tuple[float, float]:
        """Colour levels that fit ``shown`` (subclasses may choose others)."""
        if self.diverging:
            return arrays.symmetric_levels(shown)
        return arrays.sequential_levels(shown)

    def _set_levels(self, levels: tuple[float, float]) -> None:
        if levels == self.levels():
            return  # redrawing the colorbar costs more than the comparison
        span = levels[1] - levels[0]
        # Dragging the colorbar rounds levels to this step: keep it well below the span.
        self.colorbar.rounding = 10.0 ** math.floor(math.log10(span) - 2) if span > 0 else 1e-6
        self.colorbar.setLevels(levels)

    def _say_nonfinite(self, codes: np.ndarray | None, full: bool = True) -> None:
        """Show the legend of the non-finite colours drawn (``codes``: the overlay's;
        ``full``: one cell per entry), or hide it (None)."""
        text = "" if codes is None else self._nonfinite_legend(codes, full)
        if self.nonfinite_label.text() != text:
            self.nonfinite_label.setText(text)
        self.nonfinite_label.setVisible(bool(text) and self.nonfinite_legend_shown)

    def _nonfinite_legend(self, codes: np.ndarray, full: bool) -> str:
        """Each non-finite kind drawn, as a swatch of its colour and its name, and what the
        colours mean: every cell (no finite value for the colour scale) or some."""
        present = [c for c in (3, 2, 1) if (codes == c).any()]
        swatches = " ".join(
            f'<span style="color:{self._overlay_colours[c]}">&#9632;</span> '
            f"{palette.NONFINITE_NAMES[c]}"
            for c in present
        )
        if not np.all(codes):
            return f"{swatches}: drawn in these colours, not on the colour scale"
        where = "every entry" if full else "every cell (a cell is drawn so if its block holds one)"
        return f"{swatches} in {where}: no finite value, the colour scale shows none"

    def _readout(self, i: int, j: int) -> str:
        """Entry (i, j) of the full matrix: its value, or for a display-sized matrix the
        display value of its block, marked approximate (``≈``)."""
        if self._values is None:
            return ""
        value = format_value(float(self._values[self.held_cell(i, j)]))
        sign = "=" if self.block == 1 else "≈"
        return f"{self._cell_name(i, j)}:  {self.value_label} {sign} {value}"

    def show_exact(self, i: int, j: int, value: float | None) -> None:
        """The exact value of entry (i, j) arrived (None: the run moved on, the display
        value stays, marked approximate)."""
        if value is None:
            text = f"{self._readout(i, j)} (block value; the run has moved on)"
        else:
            text = f"{self._cell_name(i, j)}:  {self.value_label} = {format_value(value)}"
        self.show_exact_readout(i, j, text)

    # -- user actions -----------------------------------------------------------------------
    def _set_overlay_colours(self, colormap: str) -> None:
        lut = pg.colormap.get(colormap).getLookupTable(nPts=256, alpha=False)
        self._overlay_colours = palette.nonfinite_colours(palette.nan_colour(lut))
        self.overlay.setLookupTable(palette.categorical_lut(self._overlay_colours))

    def nan_colour(self) -> str:
        """The colour NaN entries are drawn in (depends on the colormap)."""
        return self._overlay_colours[3]

    @Slot(str)
    def _on_colormap_changed(self, name: str) -> None:
        self.colorbar.setColorMap(name)
        self._set_overlay_colours(name)
        if self.overlay.isVisible():
            full = self.block == 1 and self.factors == (1, 1)
            self._say_nonfinite(self.overlay.image, full)

    @Slot(bool)
    def _on_lock_toggled(self, locked: bool) -> None:
        if not locked and self._values is not None:
            self._request_draw()  # back to levels that fit the data, even while paused

    @Slot(object)
    def _on_levels_dragged(self, _bar) -> None:
        # Levels the user set by hand should survive the next frame.
        self.lock_box.setChecked(True)
