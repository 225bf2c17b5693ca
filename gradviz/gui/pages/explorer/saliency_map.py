"""The saliency map: for inputs with a shape of their own (an image (C, H, W), a sequence
(T, F)) whose per-sample Jacobian is too big, the gradient of one output per sample as a
heatmap over the input, drawn over the input image. NaN and Inf in their own colours, as
in every heatmap (HeatmapView)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.explorer.jobs import SaliencyResult
from gradviz.gui.pages.explorer.explorer_views import wrapped_label
from gradviz.gui.widgets.heatmap import HeatmapView

MAX_ABS = "max |·| over channels"
SUM = "sum over channels"
WHAT = {"saliency": "d f_k / d x", "gradient × input": "x · d f_k / d x"}
#: Opacity of the map over the input image.
OVER_IMAGE_OPACITY = 0.6


def as_channels(sample: np.ndarray) -> np.ndarray:
    """One sample as (C, H, W): (n,) -> (1, 1, n), (H, W) -> (1, H, W), (..., H, W) with
    the leading axes as channels."""
    if sample.ndim == 1:
        return sample[None, None, :]
    if sample.ndim == 2:
        return sample[None]
    return sample.reshape(-1, *sample.shape[-2:])


class SaliencyMapView(QWidget):
    """One sample's saliency (or gradient × input) as an (H, W) heatmap over its input."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heatmap = HeatmapView(
            "d f_k / d x", x_label="x (pixel)", y_label="y (pixel)", diverging=True,
            lock_aspect=True,
        )  # fmt: skip
        self.sample_box = QSpinBox()
        self.sample_box.setToolTip("Which sample of the batch")
        self.sample_box.setPrefix("sample ")
        self.what_box = QComboBox()
        self.what_box.addItems(list(WHAT))
        self.what_box.setToolTip("The gradient, or the gradient times the input")
        self.channel_box = QComboBox()
        self.channel_box.setToolTip("How the channels of a pixel become one value")
        self.over_image = QCheckBox("over the input")
        self.over_image.setChecked(True)
        self.over_image.setToolTip("Draw the map over the input image")
        # What to show gets a row of its own above the heatmap's: one row of six controls
        # would set the narrowest width of the whole explorer page.
        choices = QHBoxLayout()
        choices.setContentsMargins(2, 0, 2, 0)
        for widget in (self.sample_box, self.what_box, self.channel_box):
            choices.addWidget(widget)
        choices.addStretch(1)
        self.heatmap.controls.insertWidget(0, self.over_image)
        self.underlay = pg.ImageItem(axisOrder="row-major")
        self.underlay.setZValue(-10)
        self.heatmap.plot.addItem(self.underlay)
        self.note = wrapped_label()
        self.note.setObjectName("saliency-note")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.note)
        layout.addLayout(choices)
        layout.addWidget(self.heatmap, stretch=1)
        self._result: SaliencyResult | None = None
        self.sample_box.valueChanged.connect(self._on_choice_changed)
        self.what_box.currentIndexChanged.connect(self._on_choice_changed)
        self.channel_box.currentIndexChanged.connect(self._on_choice_changed)
        self.over_image.toggled.connect(self._on_choice_changed)

    def show_result(self, result: SaliencyResult) -> None:
        self._result = result
        self.sample_box.blockSignals(True)
        self.sample_box.setRange(0, result.batch - 1)
        self.sample_box.blockSignals(False)
        channels = as_channels(result.values[0]).shape[0]
        names = [MAX_ABS, SUM] + [f"channel {c}" for c in range(channels)]
        if [self.channel_box.itemText(i) for i in range(self.channel_box.count())] != names:
            self.channel_box.blockSignals(True)
            self.channel_box.clear()
            self.channel_box.addItems(names)
            self.channel_box.blockSignals(False)
        self._draw()

    def shown_map(self) -> np.ndarray | None:
        """The (H, W) map drawn for the chosen sample, values and channels."""
        result = self._result
        if result is None:
            return None
        b = min(self.sample_box.value(), result.batch - 1)
        source = result.values if self.what_box.currentIndex() == 0 else result.grad_x_input
        channels = as_channels(source[b])
        choice = self.channel_box.currentText()
        if choice == MAX_ABS:
            return np.abs(channels).max(axis=0)  # NaN stays NaN (np.max propagates it)
        if choice == SUM:
            return channels.sum(axis=0)
        return channels[max(self.channel_box.currentIndex() - 2, 0)]

    def _draw(self) -> None:
        result = self._result
        if result is None:
            return
        b = min(self.sample_box.value(), result.batch - 1)
        name = WHAT[self.what_box.currentText()].replace("f_k", f"f_{int(result.explained[b])}")
        if self.channel_box.currentText() == MAX_ABS:
            name = f"max |{name}|"
        self.heatmap.value_label = name
        self.heatmap.colorbar.setLabel("left", name)
        values = self.shown_map()
        self.heatmap.set_matrix(values)
        self._draw_underlay(result.inputs[b], values.shape)
        self.note.setText(
            f"Sample {b}: the gradient of output {int(result.explained[b])} with respect to "
            f"the input {result.in_shape} (norm {float(result.norms[b]):.3g}); "
            f"{result.reason}."
        )

    def _draw_underlay(self, sample: np.ndarray, shape: tuple[int, ...]) -> None:
        """The input drawn under the map (grey or RGB, scaled to [0, 1]) where it is an
        image: at least two spatial axes and 1 or 3 channels."""
        channels = as_channels(sample)
        is_image = sample.ndim >= 2 and channels.shape[0] in (1, 3)
        show = is_image and self.over_image.isChecked()
        self.underlay.setVisible(show)
        self.heatmap.image.setOpacity(OVER_IMAGE_OPACITY if show else 1.0)
        if not show:
            return
        pixels = channels.transpose(1, 2, 0) if channels.shape[0] == 3 else channels[0]
        lo, hi = float(np.nanmin(pixels)), float(np.nanmax(pixels))
        scaled = (pixels - lo) / (hi - lo) if hi > lo else np.zeros_like(pixels)
        self.underlay.setImage(np.nan_to_num(scaled).astype(np.float32), levels=(0.0, 1.0))
        self.underlay.setRect(QRectF(0.0, 0.0, float(shape[1]), float(shape[0])))

    @Slot()
    def _on_choice_changed(self, *_args) -> None:
        self._draw()
