"""Connects the Graph page to the app: a watch recording read by the recordings (its graph
and health), a model file opened by the model opener (its graph read off the GUI thread),
the Model health page (its timeline and its tensor selection, both ways) and the explorer's
layer table (the clicked module's weights)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

from gradviz.core.record.recording_data import RecordingData
from gradviz.gui.common.background import BackgroundTasks
from gradviz.gui.pages.graph.page import GraphPage


def recording_graph(data: RecordingData):
    """The graph a recording stored (else its names tree), limited (runs off the GUI thread)."""
    from gradviz.core.graph.collapse import limit_nodes
    from gradviz.core.record.recorded_graph import recorded_graph

    return limit_nodes(recorded_graph(data.tensors, data.meta.get("graph")))


def model_graph(path: str, trust: bool, module: Any, in_shape) -> Any:
    """A model file's graph: a live module of the user's class traced on zeros, else what
    the file holds (runs off the GUI thread)."""
    from gradviz.core.graph.collapse import limit_nodes
    from gradviz.core.graph.sources import graph_of_file

    if module is not None and in_shape is not None:
        import torch

        from gradviz.core.graph.trace import graph_of_module

        return limit_nodes(graph_of_module(module, torch.zeros(2, *in_shape)))
    return graph_of_file(path, trust=trust)


class GraphWiring(QObject):
    """Owns the Graph page (``widget``) and feeds it from ``health`` (the Model health page's
    object, which opens the recordings: ``shown``, ``page``, ``health_page.built``) and
    ``models`` (the model files': ``opener``, ``panel``)."""

    def __init__(
        self,
        window: QMainWindow,
        health: Any,
        models: Any,
        show_error: Callable[[str, str], Any],
    ) -> None:
        super().__init__(window)
        self.window, self.recordings, self.models = window, health, models
        recordings = health
        self.show_error = show_error
        self.page = self.widget = GraphPage()
        recordings.showing_recordings.append(self)
        recordings.more_timelines.append(self.page.timeline)
        self.tasks = BackgroundTasks(self)
        self.tasks.succeeded.connect(self._on_graph_read)
        self.tasks.failed.connect(self._on_graph_failed)
        self._generation = 0
        self._key: tuple | None = None
        self._pending: RecordingData | None = None
        recordings.shown.connect(self._on_recording_shown)
        models.opener.modelShown.connect(self._on_model_shown)
        self.page.failed.connect(self._on_page_failed)
        # One selection: a node's tensors on Model health, Model health's tensor here.
        self.page.tensorsChosen.connect(self._on_tensors_chosen)
        self.page.moduleChosen.connect(self._on_module_chosen)
        # One step: either timeline moves the other.
        self.page.timeline.indexChanged.connect(self._on_graph_index)
        recordings.health_page.built.connect(self._on_health_built)

    @property
    def index(self) -> int:
        """The Graph page's index among the window's pages."""
        return self.window.pages.index_of(self)

    @property
    def health(self):
        """The Model health page (made on first use)."""
        return self.recordings.page

    @Slot(object)
    def _on_health_built(self, health) -> None:
        health.tensorsSelected.connect(self.page.select_tensors)
        health.timeline.indexChanged.connect(self._on_health_index)

    @Slot(object)
    def _on_tensors_chosen(self, names) -> None:
        self.health.select_tensors(names)

    # ---- sources ----------------------------------------------------------------------------
    @Slot(object)
    def _on_recording_shown(self, data: RecordingData) -> None:
        if data.source == "fit" and "distances" in data.images:
            return  # a lab recording: no model graph
        key = ("recording", data.path, data.rank, data.meta.get("graph") is not None)
        self._pending = data
        if key != self._key:
            self._key = key
            self._submit(lambda: recording_graph(data), ("recording", data))
        elif self.page.graph is not None:
            self.page.set_recording(data, self.health.timeline.index)

    @Slot(object)
    def _on_model_shown(self, info) -> None:
        opener = self.models.opener
        request = opener.request
        loaded = opener.loaded
        module = None
        if loaded is not None and request is not None and request.with_class is not None:
            module = getattr(loaded.module, "inner", loaded.module)
        shape = info.in_shape or ((info.in_dim,) if info.in_dim else None)
        trust = bool(request.trust) if request is not None else False
        path = info.path
        self._key = ("model", path)
        self._pending = None
        self._submit(lambda: model_graph(path, trust, module, shape), ("model", path))

    def _submit(self, work, what) -> None:
        self._generation += 1
        self._what = what
        self.page.clear("Reading the graph…")
        self.tasks.submit(self._generation, "graph-read", work)

    @Slot(int, str, object)
    def _on_graph_read(self, _generation: int, _kind: str, graph) -> None:
        kind, value = self._what
        if kind == "recording":
            data = self._pending or value
            self.page.set_graph(graph, f"Recording {os.path.basename(data.path)}")
            self.page.set_recording(data, self.health.timeline.index)
        else:
            self.page.set_graph(graph, os.path.basename(value))
            self.page.set_recording(None)

    @Slot(int, str, str, str)
    def _on_graph_failed(self, _generation: int, _kind: str, sentence: str, details: str):
        self.page.clear(sentence)
        if self.window.pages.current() == self.index:
            self.show_error(sentence, details)

    @Slot(str)
    def _on_page_failed(self, sentence: str) -> None:
        self.show_error(sentence, "")

    # ---- links ------------------------------------------------------------------------------
    @Slot(int)
    def _on_graph_index(self, index: int) -> None:
        if self.health.timeline.index != index:
            self.health.timeline.set_following(False)
            self.health.timeline.select_index(index)

    @Slot(int)
    def _on_health_index(self, index: int) -> None:
        if self.page.data is not None and self.page.timeline.index != index:
            self.page.timeline.select_index(index)

    @Slot(str)
    def _on_module_chosen(self, path: str) -> None:
        """The module's weights in the explorer's layer table, where that file is open."""
        table = self.models.panel.layers
        for row in range(table.rowCount()):
            item = table.item(row, 0)
            if item is not None and item.text() == path:
                table.selectRow(row)
                table.scrollToItem(item)
                return

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self.tasks.shutdown(timeout_s)
        self.page.shutdown(timeout_s)
