"""The Graph page: the model as a layered graph, top to bottom, coloured by the worst
gradient category of each node's tensors at the timeline's step (the Model health page's
palette), brighter where the gradient norm is larger, with the first non-finite value's
origin marked and the nodes it spread to outlined.

It is fed a ModelGraph (``set_graph``) and, for a watch recording, the RecordingData whose
health it shows (``set_recording``); the layout runs off the GUI thread (``BackgroundTasks``)
by grandalf, or by a plain layering where grandalf is absent (the page says so). Past
``PAGE_NODE_LIMIT`` nodes the modules are collapsed to the deepest depth that fits;
double-click a module to expand or collapse it.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QLabel,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.graph.collapse import TREE_WIDTH, fold_modules, folded_to_fit, folded_to_width
from gradviz.core.graph.layout import FALLBACK_LINE, drawable, has_grandalf
from gradviz.core.graph.model import MODULE, ModelGraph
from gradviz.core.record.recording_data import RecordingData
from gradviz.gui.pages.graph.colours import paint
from gradviz.gui.pages.graph.export import save_scene
from gradviz.gui.pages.graph.health import NO_MARKS, GroupHealth, Spread, StepHealth, spread_of
from gradviz.gui.pages.graph.layouter import GraphLayouter
from gradviz.gui.pages.graph.scene import (
    GraphScene,
)
from gradviz.gui.pages.graph.search import GraphToolbar
from gradviz.gui.pages.graph.view import GraphView
from gradviz.gui.pages.graph.words import graph_readouts, header_text, node_line
from gradviz.gui.widgets.panel import ElidedLabel
from gradviz.gui.widgets.plot_export import ask_path
from gradviz.gui.widgets.timeline import Timeline

PAGE_TITLE = "Graph"
#: Nodes the page draws before it collapses modules.
PAGE_NODE_LIMIT = 200
HOVER_HINT = "Hover over a node for its tensors' health; click it to select them."
EMPTY_TEXT = "Open a model file or a watch recording to see its graph."


class GraphPage(QWidget):
    """``tensorsChosen(rows)``: a node was clicked whose recorded tensors are ``rows`` (a
    tuple: a module's weight and bias, every tensor under a collapsed module);
    ``moduleChosen(path)``: a node of the module ``path`` was clicked; ``failed(sentence)``:
    a layout could not be made; ``laidOut()``: a new drawing is on screen."""

    tensorsChosen = Signal(object)
    moduleChosen = Signal(str)
    failed = Signal(str)
    laidOut = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("graph-page")
        self.graph: ModelGraph | None = None  # as given, whole
        self.shown: ModelGraph | None = None  # what is drawn: folded, drawable
        self.folded: frozenset = frozenset()
        self.tree_depth: int | None = None  # a wide names tree folded below this depth
        self.where = ""
        self.data: RecordingData | None = None
        self.scene: GraphScene | None = None
        self.selected: str | None = None
        self.column: int | None = None
        self._health: StepHealth | None = None
        self._now: dict[str, GroupHealth] = {}
        self._spread: Spread | None = None
        #: ``(parent, suffix) -> path`` for Export ('' cancels); a save dialog (tests replace it).
        self.choose_path: Callable[[QWidget, str], str] = ask_path
        self.layouter = GraphLayouter(self)
        self.layouter.done.connect(self._on_laid_out)
        self.layouter.failed.connect(self._on_layout_failed)
        self._make_widgets()

    def _make_widgets(self) -> None:
        self.header = QLabel(EMPTY_TEXT)
        self.header.setObjectName("graph-header")
        self.header.setWordWrap(True)
        self.fallback = QLabel(FALLBACK_LINE)
        self.fallback.setObjectName("graph-fallback")
        self.fallback.setVisible(not has_grandalf())
        self.view = GraphView()
        self.view.nodeClicked.connect(self.select_node)
        self.view.nodeDoubleClicked.connect(self.toggle_module)
        self.readout = ElidedLabel(HOVER_HINT)
        self.readout.setObjectName("graph-readout")
        self.timeline = Timeline()
        self.timeline.indexChanged.connect(self.show_index)
        self.timeline.setVisible(False)
        top = GraphToolbar(self, PAGE_NODE_LIMIT)
        self.finder = top.finder
        self.search, self.matches_label = self.finder.edit, self.finder.label
        self.fit_button, self.expand_button, self.collapse_button, *self.export_buttons = (
            top.buttons
        )
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.header)
        layout.addWidget(self.fallback)
        layout.addWidget(top)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.readout)
        layout.addWidget(self.timeline)

    # ---- feeding ----------------------------------------------------------------------------
    def set_graph(self, graph: ModelGraph, where: str) -> None:
        """Draw ``graph`` (``where`` names it in the header: a file, a recording), modules
        collapsed past PAGE_NODE_LIMIT nodes."""
        self.fallback.setVisible(not has_grandalf())
        self.graph, self.where = graph, where
        self._forget_shown()  # until the new layout arrives
        self._fold_by_default()
        self._relayout()

    def _fold_by_default(self) -> None:
        """Past PAGE_NODE_LIMIT nodes, the deepest module depth that fits; else a names tree
        wider than TREE_WIDTH nodes on one level folded below the depth where it fits
        (``tree_depth`` says which, for the header)."""
        self.folded, _ = folded_to_fit(drawable(self.graph), PAGE_NODE_LIMIT)
        self.tree_depth = None
        if not self.folded:
            self.folded, self.tree_depth = folded_to_width(drawable(self.graph), TREE_WIDTH)

    def set_recording(self, data: RecordingData | None, index: int | None = None) -> None:
        """Colour by ``data``'s health at its ``index``-th recorded step (default: the one
        the timeline is at; None data: a model file, no colours)."""
        said = (self._spread, self._damage)  # what the header says of the data before
        self.data = data
        self.timeline.setVisible(data is not None)
        if data is None:
            self._health, self._now, self._spread, self.column = None, {}, None, None
            self._recolour()
            return
        self.timeline.set_first_bad_step(
            None if data.first_nonfinite is None else int(data.first_nonfinite["step"])
        )
        self._attach_health()
        if self.shown is not None and (self._spread, self._damage) != said:
            self._header()  # a followed recording's first NaN or damage came: say it
        blocked = self.timeline.blockSignals(True)  # the step is the caller's, not 0's
        try:
            self.timeline.set_steps(data.steps)
            if index is not None:
                self.timeline.select_index(index)
        finally:
            self.timeline.blockSignals(blocked)
        self.show_index(self.timeline.index)

    def clear(self, sentence: str = EMPTY_TEXT) -> None:
        self.layouter.cancel()
        self._forget_shown()
        self.graph = self.scene = None
        self.view.setScene(None)
        self.header.setText(sentence)

    @property
    def _damage(self) -> str:
        """The recording's damage in one line ("" for a whole one or a model file)."""
        return self.data.damage_line() if self.data is not None else ""

    def _forget_shown(self) -> None:
        """No graph drawn: nothing selected, and no health, which is read per drawn node."""
        self.shown = self.selected = self._health = self._spread = None

    def _attach_health(self) -> None:
        if self.data is None or self.shown is None:
            self._health = self._spread = None
            return
        self._health = StepHealth(self.shown, self.data)
        self._spread = spread_of(self.shown, self.data.first_nonfinite)

    # ---- layout -----------------------------------------------------------------------------
    def _relayout(self) -> None:
        shown = fold_modules(drawable(self.graph), self.folded)
        self.header.setText(f"{self.where}: laying out {len(shown.nodes):,} nodes…")
        self.layouter.lay_out(shown)

    @Slot(object, object)
    def _on_laid_out(self, shown: ModelGraph, layout: object) -> None:
        self.shown = shown
        old = self.scene
        self.scene = GraphScene(shown, layout, self.describe, self)
        self.view.setScene(self.scene)
        if old is not None:
            old.deleteLater()
        self.view.fit()
        self._attach_health()
        self._header()
        self._recolour()
        self.finder.refresh()
        self.laidOut.emit()

    @Slot(str)
    def _on_layout_failed(self, sentence: str) -> None:
        self.header.setText(f"{self.where}: {sentence}")
        self.failed.emit(sentence)

    def _header(self) -> None:
        self.header.setText(
            header_text(
                self.where, self.graph, self.shown, self.folded, self.tree_depth,
                PAGE_NODE_LIMIT, self._damage, self._spread,
            )
        )  # fmt: skip

    # ---- collapse and expand ----------------------------------------------------------------
    @Slot(str)
    def toggle_module(self, node_id: str) -> None:
        """A folded module expands; an expanded one (its frame) collapses."""
        if self.graph is None or not node_id.startswith("m:"):
            return
        if node_id in self.folded:
            self.folded = self.folded - {node_id}
        elif self.scene is not None and node_id in self.scene.boxes:
            self.folded = self.folded | {node_id}
        else:
            return
        self._relayout()

    @Slot()
    def expand_all(self) -> None:
        if self.graph is not None and self.folded:
            self.folded = frozenset()
            self._relayout()

    @Slot()
    def collapse_to_fit(self) -> None:
        if self.graph is not None:
            self._fold_by_default()
            self._relayout()

    # ---- the step and the colours -----------------------------------------------------------
    @Slot(int)
    def show_index(self, index: int) -> None:
        """Colours of the index-th recorded step."""
        if self.data is None or not self.data.n_steps:
            return
        self.column = min(max(index, 0), self.data.n_steps - 1)
        self._recolour()

    @property
    def step(self) -> int | None:
        """The recorded step whose health is shown (None for a model file)."""
        if self.data is None or self.column is None:
            return None
        return int(self.data.steps[self.column])

    def node_health(self, node_id: str) -> GroupHealth | None:
        return self._now.get(node_id)

    def marks(self) -> dict[str, frozenset]:
        """The drawn nodes marked at the step shown: ``origin`` (where the first non-finite
        value began) and ``after`` (where it spread); empty before its step."""
        return NO_MARKS if self._spread is None else self._spread.marks_at(self.step)

    def readouts(self) -> dict:
        """What the page shows, as data (``words.graph_readouts``)."""
        shown = self.shown if self.scene is not None else None
        source = None if shown is None else self.graph.source
        return graph_readouts(shown, source, self.step, self._now, self.marks())

    def node_colour(self, node_id: str) -> str:
        """The fill of a drawn node, as ``#rrggbb``."""
        return self.scene.nodes[node_id].brush().color().name()

    def _recolour(self) -> None:
        scene = self.scene
        if scene is None or self.shown is None or scene.graph is not self.shown:
            return
        column = self.column
        self._now = self._health.at(column) if self._health and column is not None else {}
        paint(scene, self.shown, self._now, self.marks(), self.selected)

    # ---- hover and selection ----------------------------------------------------------------
    def describe(self, node_id: str) -> str:
        """One line about a drawn node: what it is, and its tensors' health at the step."""
        if self.shown is None:
            return ""
        health, recorded = self._now.get(node_id), self.data is not None
        text = node_line(self.shown, node_id, health, self.step, recorded, self.marks())
        self.readout.setText(text)
        return text

    @Slot(str)
    def select_node(self, node_id: str) -> None:
        """Select a drawn node: its tensors on Model health, its module in the explorer."""
        if self.shown is None or node_id not in self.shown._index:
            return
        self.selected = node_id
        self._recolour()
        self.describe(node_id)
        node = self.shown.node(node_id)
        if self._health is not None and node_id in self._health.rows:
            self.tensorsChosen.emit(tuple(int(r) for r in self._health.rows[node_id]))
        if node.module:
            self.moduleChosen.emit(node.module)

    def select_tensors(self, chosen) -> None:
        """Model health chose the tensors ``chosen`` (rows): select the innermost drawn node
        holding all of them (no signal back)."""
        if self._health is None or self.scene is None:
            return
        best = self._health.innermost_holder(chosen, self.shown)
        item = self.scene.nodes.get(best) or self.scene.boxes.get(best)
        if item is None:
            return
        self.selected = best
        self._recolour()
        self.view.ensureVisible(item)

    def search_matches(self) -> list[str]:
        """Drawn node ids whose module path or name holds the search text (``GraphSearch``)."""
        return self.finder.matches()

    # ---- buttons ----------------------------------------------------------------------------
    @Slot()
    def export_png(self) -> None:
        self._export(".png")

    @Slot()
    def export_svg(self) -> None:
        self._export(".svg")

    def _export(self, suffix: str) -> None:
        if self.scene is None:
            self.failed.emit("There is no graph to export yet: open a model or a recording.")
            return
        path = self.choose_path(self, suffix)
        if path and not save_scene(self.scene, path):
            self.failed.emit(f"Could not write {path!r}.")

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self.layouter.shutdown(timeout_s)


__all__ = ["MODULE", "PAGE_NODE_LIMIT", "PAGE_TITLE", "GraphPage"]
