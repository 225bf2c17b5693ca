"""The explorer's result views in one tab widget, and the one-line summary of a result.

Explorer tab titles are short enough to be read whole at the smallest window size.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTabWidget, QWidget

from gradviz.core.explorer.jobs import ExplorerResult, SaliencyResult
from gradviz.core.settings.config import HISTOGRAM_LOSSES
from gradviz.gui.pages.explorer.explorer_views import (
    AcrossBatchView,
    AllSamplesView,
    FullBatchView,
    GradientFieldView,
    SaliencyView,
    SampleJacobianView,
)
from gradviz.gui.pages.explorer.histogram_view import HistogramView
from gradviz.gui.pages.explorer.saliency_map import SaliencyMapView
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


#: Each view's class, by key, in tab order.
VIEW_CLASSES: dict[str, type] = {
    "sample": SampleJacobianView,
    "all": AllSamplesView,
    "full": FullBatchView,
    "batch": AcrossBatchView,
    "field": GradientFieldView,
    "saliency": SaliencyView,
    "histograms": HistogramView,
    "saliency_map": SaliencyMapView,
}


class ResultViews(QTabWidget):
    """Every view of an ExplorerResult, one tab each (``views`` by key).

    A view is built when it is first needed (its tab shown, a result drawn, or asked for
    by key): together they are a dozen pyqtgraph plots, a tenth of the app's start-up
    before its window could paint, for a page most launches never open."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDocumentMode(True)
        self.tabBar().setElideMode(Qt.TextElideMode.ElideNone)
        self.tabBar().setUsesScrollButtons(True)
        self.views = _BuiltOnDemand(self)
        for key in VIEW_CLASSES:
            self.addTab(QWidget(), VIEW_TITLES[key])
        self.currentChanged.connect(self._build_current)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        self._build_current()
        super().showEvent(event)

    def _build_current(self, _index: int | None = None) -> None:
        if self.isVisible() and self.currentIndex() >= 0:
            self.views[list(VIEW_CLASSES)[self.currentIndex()]]

    def _install(self, key: str, view: QWidget) -> None:
        """Put the built ``view`` in place of its tab's placeholder, keeping the tab's
        title, enabled state and which tab is current."""
        index = list(VIEW_CLASSES).index(key)
        enabled, current = self.isTabEnabled(index), self.currentIndex()
        placeholder = self.widget(index)
        blocked = self.blockSignals(True)  # not a tab change: no currentChanged for it
        self.removeTab(index)
        self.insertTab(index, view, VIEW_TITLES[key])
        self.setTabEnabled(index, enabled)
        self.setCurrentIndex(current)
        self.blockSignals(blocked)
        placeholder.deleteLater()

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
        for index, name in enumerate(VIEW_CLASSES):  # by tab: no view is built for this
            on = name == key if key is not None else (name != "saliency_map" or saliency_map)
            self.setTabEnabled(index, on)
        if not self.isTabEnabled(self.currentIndex()):
            self.setCurrentIndex(list(VIEW_CLASSES).index(key or "sample"))


class _BuiltOnDemand(Mapping):
    """The views by key, each built (and put in its tab) the first time it is asked for."""

    def __init__(self, tabs: ResultViews) -> None:
        self._tabs = tabs
        self._built: dict[str, QWidget] = {}

    def __getitem__(self, key: str) -> QWidget:
        view = self._built.get(key)
        if view is None:
            view = self._built[key] = VIEW_CLASSES[key]()  # KeyError for an unknown key
            self._tabs._install(key, view)
        return view

    def built(self) -> list[str]:
        """The keys of the views built so far."""
        return list(self._built)

    def __iter__(self):
        return iter(VIEW_CLASSES)

    def __len__(self) -> int:
        return len(VIEW_CLASSES)


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
