"""The Graph page's layouts, made off the GUI thread (``BackgroundTasks``) by grandalf, or
by a plain layering where grandalf is absent; the newest request wins."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, Slot

from gradviz.core.graph.layout import has_grandalf
from gradviz.core.graph.model import ModelGraph
from gradviz.gui.common.background import BackgroundTasks


def laid_out(graph: ModelGraph):
    """(graph, layout) by grandalf, else by the plain layering (runs off the GUI thread)."""
    from gradviz.core.graph.layout import layered_fallback, layout_graph

    return graph, (layout_graph(graph) if has_grandalf() else layered_fallback(graph))


class GraphLayouter(QObject):
    """``lay_out(graph)`` in the background: ``done(graph, layout)`` for the newest request
    only, or ``failed(sentence)``; ``cancel`` drops the one in flight."""

    done = Signal(object, object)
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._generation = 0
        self.tasks = BackgroundTasks(self)
        self.tasks.succeeded.connect(self._on_succeeded)
        self.tasks.failed.connect(self._on_failed)

    def lay_out(self, graph: ModelGraph) -> None:
        self._generation += 1
        self.tasks.submit(self._generation, "graph-layout", lambda: laid_out(graph))

    def cancel(self) -> None:
        self._generation += 1
        self.tasks.supersede(self._generation)

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self.tasks.shutdown(timeout_s)

    @Slot(int, str, object)
    def _on_succeeded(self, _generation: int, _kind: str, value: object) -> None:
        graph, layout = value
        self.done.emit(graph, layout)

    @Slot(int, str, str, str)
    def _on_failed(self, _generation: int, _kind: str, sentence: str, _details: str) -> None:
        self.failed.emit(sentence)
