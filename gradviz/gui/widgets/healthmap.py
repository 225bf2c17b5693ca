"""Categorical heatmaps of gradient Health codes, with a legend of live counts."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QComboBox, QLabel, QWidget

from gradviz.core.common.health import HEALTH_LABELS, Health
from gradviz.gui.widgets import arrays, palette
from gradviz.gui.widgets.panel import MatrixPanel, format_value
from gradviz.gui.widgets.steady import SteadyBox


class HealthMapView(MatrixPanel):
    """Categorical map of Health codes with a legend of live counts.

    Downsampling keeps each block's maximum code, the most alarming category in it, so a
    single NaN entry stays visible at any size. ``values`` (optional, same shape) are the
    gradients behind the codes, shown in the hover readout.
    """

    def __init__(
        self,
        value_label: str = "grad",
        x_label: str = "j (point)",
        y_label: str = "i (point)",
        lock_aspect: bool = False,
        legend_columns: int = 6,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(x_label, y_label, lock_aspect, parent)
        self.value_label = value_label
        self._codes: np.ndarray | None = None
        self._values: np.ndarray | None = None
        self._counts: dict[Health, int] = {h: 0 for h in Health}

        self.palette_box = QComboBox()
        self.palette_box.addItems(list(palette.HEALTH_PALETTES))
        self.palette_box.setToolTip("Palette (colour-blind safe)")
        self.controls.addWidget(self.palette_box)
        self.controls.addStretch(1)
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self._legend_columns = legend_columns
        self._shown_columns = legend_columns
        self.legend_box = SteadyBox(self.legend)  # live counts, new every frame
        self.layout().insertWidget(2, self.legend_box)
        self.image.setLookupTable(palette.health_lut("Okabe-Ito"))
        self.palette_box.currentTextChanged.connect(self._on_palette_changed)
        self._update_legend()

    # -- public -----------------------------------------------------------------------------
    def set_codes(
        self,
        codes: np.ndarray | None,
        values: np.ndarray | None = None,
        block: int = 1,
        extent: tuple[int, int] | None = None,
        counts: tuple[int, ...] | None = None,
    ) -> None:
        """Show ``(R, C)`` uint8 Health codes; ``values`` feed the hover readout only.

        Display-sized codes give their ``block``, the full matrix's ``extent`` and the
        full-resolution ``counts`` per Health code (the legend counts entries, not cells).
        """
        self._values = values
        if codes is None:
            self.clear()
            return
        codes = np.asarray(codes, dtype=np.uint8)  # no copy for the usual uint8 codes
        extent = extent or (codes.shape[0] * block, codes.shape[1] * block)
        if (
            self._codes is not None
            and (extent, block) == (self._extent, self.block)
            and (
                codes is self._codes
                or (codes.shape == self._codes.shape and np.array_equal(codes, self._codes))
            )
        ):
            self._codes = codes  # same picture: skip repainting
            if counts is not None and self._set_counts(counts):
                self._update_legend()
            return
        self._codes = codes
        if counts is None or not self._set_counts(counts):
            self._counts = self._count(codes)
        self._update_legend()
        self._set_shape(codes.shape, block, extent)
        self._request_draw()

    def _set_counts(self, counts: tuple[int, ...]) -> bool:
        """Take full-resolution counts (one per Health code); True when they changed."""
        tally = {h: int(counts[h]) if h < len(counts) else 0 for h in Health}
        changed = tally != self._counts
        self._counts = tally
        return changed

    def clear(self) -> None:
        self._codes = None
        self._values = None
        self._shape = self._extent = (0, 0)
        self._counts = {h: 0 for h in Health}
        self.image.clear()
        self._update_legend()
        self.set_marker(None, None)

    def counts(self) -> dict[Health, int]:
        """Entries in each category of the matrix shown (full resolution)."""
        return dict(self._counts)

    def displayed_image(self) -> np.ndarray | None:
        """The (downsampled) uint8 code image handed to pyqtgraph."""
        return self.image.image

    # -- drawing ----------------------------------------------------------------------------
    @staticmethod
    def _count(codes: np.ndarray) -> dict[Health, int]:
        # count_nonzero per present code is ~5x faster than bincount on a uint8 matrix.
        top = int(codes.max()) if codes.size else 0
        tally = {h: 0 for h in Health}
        for h in Health:
            if Health.FINITE < h <= top:
                tally[h] = int(np.count_nonzero(codes == h))
        tally[Health.FINITE] = int(codes.size - sum(tally.values()))
        return tally

    def _render(self, ky: int, kx: int) -> None:
        shown = arrays.block_max(self._visible_part(self._codes), ky, kx)
        self.image.setImage(shown, autoLevels=False, levels=(0, 255))
        self._place_image(self.image, ky, kx, shown)

    def _update_legend(self) -> None:
        colours = palette.HEALTH_PALETTES[self.palette_box.currentText()]
        cells = []
        for h in sorted(Health, reverse=True):  # most alarming first
            count = self._counts[h]
            weight = "bold" if count and h >= Health.NEG_INF else "normal"
            cells.append(  # a label never wraps away from its count ("NaN" / "600")
                f'<td style="white-space:nowrap"><span style="color:{colours[h]}">&#9632;</span>'
                f'&nbsp;<span style="font-weight:{weight}">{HEALTH_LABELS[h]}&nbsp;{count:,}'
                "</span></td>"
            )
        columns = self._fitting_columns()
        rows = [
            "<tr>" + "".join(cells[k : k + columns]) + "</tr>"
            for k in range(0, len(cells), columns)
        ]
        self.legend.setText('<table cellspacing="4">' + "".join(rows) + "</table>")

    def _fitting_columns(self) -> int:
        """As many legend columns as fit the legend's width (at most ``legend_columns``):
        a narrow panel gets more rows, never a cut-off count. The legend is as wide as the
        panel, or its own width where a view has placed it apart (``fit_legend``)."""
        widest = max(
            self.legend.fontMetrics().horizontalAdvance(f"■ {HEALTH_LABELS[h]} {self._counts[h]:,}")
            for h in Health
        )
        box = self.legend_box
        width = self.width() if box.parentWidget() is self else box.width() + 4
        fit = max(1, (width - 8) // (widest + 12))
        return int(min(self._legend_columns, fit))

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self.fit_legend()

    def fit_legend(self) -> None:
        """Lay the legend out again in as many columns as its width now takes."""
        if self._fitting_columns() != self._shown_columns:
            self._shown_columns = self._fitting_columns()
            self._update_legend()

    def legend_text(self) -> str:
        """The legend as plain text, e.g. ``"NaN 2,000 +Inf 0 ..."``."""
        return " ".join(f"{HEALTH_LABELS[h]} {self._counts[h]:,}" for h in sorted(Health)[::-1])

    def _readout(self, i: int, j: int) -> str:
        if self._codes is None:
            return ""
        cell = self.held_cell(i, j)
        label = HEALTH_LABELS[Health(int(self._codes[cell]))]
        if self.block > 1:  # a block's most alarming code, its mean value
            label = f"{label} in its {self.block}x{self.block} block"
        text = f"{self._cell_name(i, j)}:  {label}"
        if self._values is not None:
            sign = "=" if self.block == 1 else "≈"
            text += f"  ({self.value_label} {sign} {format_value(float(self._values[cell]))})"
        return text

    def show_exact(self, i: int, j: int, code: float | None, value: float | None) -> None:
        """The exact Health code and gradient of entry (i, j) arrived (None: the run moved
        on; the block's readout stays)."""
        if code is None:
            text = f"{self._readout(i, j)} (the run has moved on)"
        else:
            text = f"{self._cell_name(i, j)}:  {HEALTH_LABELS[Health(int(code))]}"
            if value is not None:
                text += f"  ({self.value_label} = {format_value(value)})"
        self.show_exact_readout(i, j, text)

    @Slot(str)
    def _on_palette_changed(self, name: str) -> None:
        self.image.setLookupTable(palette.health_lut(name))
        self._update_legend()
