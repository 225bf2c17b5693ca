"""The explorer's result views in one tab widget, and the one-line summary of a result.

Explorer tab titles are short enough to be read whole at the smallest window size.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTabWidget, QWidget

from gradviz.core.config import HISTOGRAM_LOSSES
from gradviz.core.explore import ExplorerResult, SaliencyResult
from gradviz.gui.explorer.explorer_views import (
    AcrossBatchView,
    AllSamplesView,
    FullBatchView,
    GradientFieldView,
    SaliencyView,
    SampleJacobianView,
)
from gradviz.gui.explorer.histogram_view import HistogramView
from gradviz.gui.explorer.saliency_map import SaliencyMapView
from gradviz.gui.widgets import palette

VIEW_TITLES: dict[str, str] = {
    "sample": "Sample Jacobian",
    "all": "All samples",
    "full": "Full batch Jacobian",
    "batch": "Across the batch",
    "field": "Gradient field",
    "saliency": "Input gradients",
    "histograms": "Parameter gradients",
    "saliency_map": "Saliency map",
}


class ResultViews(QTabWidget):
    """Every view of an ExplorerResult, one tab each (``views`` by key)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDocumentMode(True)
        self.tabBar().setElideMode(Qt.TextElideMode.ElideNone)
        self.tabBar().setUsesScrollButtons(True)
        self.views = {
            "sample": SampleJacobianView(),
            "all": AllSamplesView(),
            "full": FullBatchView(),
            "batch": AcrossBatchView(),
            "field": GradientFieldView(),
            "saliency": SaliencyView(),
            "histograms": HistogramView(),
            "saliency_map": SaliencyMapView(),
        }
        for key, widget in self.views.items():
            self.addTab(widget, VIEW_TITLES[key])

    def show_result(
        self, result: ExplorerResult, rows: list[int], cols: list[int], loss: str
    ) -> None:
        """Draw ``result`` for the selected outputs ``rows`` and inputs ``cols``; ``loss``
        names the loss of the parameter histograms."""
        v = self.views
        v["sample"].show_result(result, rows, cols)
        v["all"].show_result(result, rows, cols)
        v["full"].show_result(result)
        v["batch"].show_result(result, rows, cols)
        v["field"].show_result(result)
        v["saliency"].show_result(result, cols)
        v["histograms"].show_histograms(
            result.histograms, result.histogram_note, HISTOGRAM_LOSSES[loss]
        )
        if result.saliency is not None:  # image-shaped samples: shown as images at any size
            v["saliency_map"].show_result(result.saliency)
        self._enable_only(None, saliency_map=result.saliency is not None)

    def show_saliency(self, result: SaliencyResult) -> None:
        """Inputs whose Jacobian is too big: only the saliency map has something to show."""
        self.views["saliency_map"].show_result(result)
        self._enable_only("saliency_map")

    def _enable_only(self, key: str | None, saliency_map: bool = False) -> None:
        """Enable the tab ``key`` alone (None: every Jacobian view, and the saliency map
        where ``saliency_map``)."""
        for name, view in self.views.items():
            on = name == key if key is not None else (name != "saliency_map" or saliency_map)
            self.setTabEnabled(self.indexOf(view), on)
        if not self.isTabEnabled(self.currentIndex()):
            self.setCurrentWidget(self.views[key or "sample"])


def summary(result: ExplorerResult | SaliencyResult) -> str:
    """The result in one line of rich text: what, how big, the verdict, how long."""
    if isinstance(result, SaliencyResult):
        shape = "×".join(str(s) for s in result.in_shape)
        return (
            f"<b>{result.label}</b> · B = {result.batch}, inputs {shape} · saliency: the "
            f"gradient of one output per sample (the Jacobian would be too big) · "
            f"{result.seconds * 1000:.0f} ms"
        )
    m, n = result.shape
    off = ""
    if result.max_off_block is not None:
        off = f" · max_off_block {result.max_off_block:.3g}"
    return (
        f"<b>{result.label}</b> · B = {result.batch}, J is {m} x {n} per input · "
        f"{_short_verdict(result)}{off} · method {result.method} · "
        f"{result.seconds * 1000:.0f} ms"
    )


def _short_verdict(result: ExplorerResult) -> str:
    """The across-batch verdict in a few words, for the status line."""
    if result.batch == 1:
        return "one input"
    if result.constant:
        return _coloured("same Jacobian for every input (linear on this batch)", "#1f6fa5")
    if not np.isfinite(result.jacobians).all():
        return _coloured("Jacobians hold NaN or Inf", palette.ALARM_TEXT)
    return _coloured("Jacobian varies across this batch", "#a35a00")


def _coloured(text: str, colour: str) -> str:
    return f'<span style="color:{colour}">{text}</span>'
