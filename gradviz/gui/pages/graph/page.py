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

import math
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from gradviz.core.common.health import Health
from gradviz.core.graph.collapse import TREE_WIDTH, fold_modules, folded_to_fit, folded_to_width
from gradviz.core.graph.layout import FALLBACK_LINE, drawable, has_grandalf
from gradviz.core.graph.model import MODULE, ModelGraph
from gradviz.core.record.recording_data import RecordingData
from gradviz.gui.common.background import BackgroundTasks
from gradviz.gui.pages.graph.export import save_scene
from gradviz.gui.pages.graph.health import GroupHealth, Spread, StepHealth, spread_of, worst_label
from gradviz.gui.pages.graph.scene import (
    NO_HEALTH,
    ORIGIN_COLOUR,
    SELECTED_COLOUR,
    SPREAD_COLOUR,
    GraphScene,
)
from gradviz.gui.pages.graph.view import GraphView
from gradviz.gui.widgets.palette import OKABE_ITO
from gradviz.gui.widgets.panel import ElidedLabel, format_value
from gradviz.gui.widgets.plot_export import ask_path
from gradviz.gui.widgets.timeline import Timeline

PAGE_TITLE = "Graph"
#: Nodes the page draws before it collapses modules.
PAGE_NODE_LIMIT = 200
HOVER_HINT = "Hover over a node for its tensors' health; click it to select them."
EMPTY_TEXT = "Open a model file or a watch recording to see its graph."


def laid_out(graph: ModelGraph):
    """(graph, layout) by grandalf, else by the plain layering (runs off the GUI thread)."""
    from gradviz.core.graph.layout import layered_fallback, layout_graph

    return graph, (layout_graph(graph) if has_grandalf() else layered_fallback(graph))


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
        self._generation = 0
        #: ``(parent, suffix) -> path`` for Export ('' cancels); a save dialog (tests replace it).
        self.choose_path: Callable[[QWidget, str], str] = ask_path
        self.tasks = BackgroundTasks(self)
        self.tasks.succeeded.connect(self._on_laid_out)
        self.tasks.failed.connect(self._on_layout_failed)
        self._make_widgets()

    def _make_widgets(self) -> None:
        self.header = QLabel(EMPTY_TEXT)
        self.header.setObjectName("graph-header")
        self.header.setWordWrap(True)
        self.fallback = QLabel(FALLBACK_LINE)
        self.fallback.setObjectName("graph-fallback")
        self.fallback.setVisible(not has_grandalf())
        self.search = QLineEdit()
        self.search.setObjectName("graph-search")
        self.search.setPlaceholderText("Search modules by name (Enter: next match)")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._on_search_changed)
        self.search.returnPressed.connect(self._on_search_next)
        self.matches_label = QLabel("")
        buttons = []
        for text, tip, slot in (
            ("Fit", "Show the whole graph", self._on_fit),
            ("Expand all", "Expand every module (a large graph takes a while)", self.expand_all),
            ("Collapse", f"Collapse modules until at most {PAGE_NODE_LIMIT} nodes show",
             self.collapse_to_fit),
            ("Export PNG…", "Save the whole graph as a PNG image", self._on_export_png),
            ("Export SVG…", "Save the whole graph as an SVG drawing", self._on_export_svg),
        ):  # fmt: skip
            button = QPushButton(text)
            button.setToolTip(tip)
            button.clicked.connect(slot)
            buttons.append(button)
        self.fit_button, self.expand_button, self.collapse_button, *self.export_buttons = buttons
        self.view = GraphView()
        self.view.nodeClicked.connect(self.select_node)
        self.view.nodeDoubleClicked.connect(self.toggle_module)
        self.readout = ElidedLabel(HOVER_HINT)
        self.readout.setObjectName("graph-readout")
        self.timeline = Timeline()
        self.timeline.indexChanged.connect(self.show_index)
        self.timeline.setVisible(False)
        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.matches_label)
        for button in buttons:
            top.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.header)
        layout.addWidget(self.fallback)
        layout.addLayout(top)
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
        self._generation += 1
        self.tasks.supersede(self._generation)
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
        self._generation += 1
        self.header.setText(f"{self.where}: laying out {len(shown.nodes):,} nodes…")
        self.tasks.submit(self._generation, "graph-layout", lambda: laid_out(shown))

    @Slot(int, str, object)
    def _on_laid_out(self, generation: int, _kind: str, value: object) -> None:
        shown, layout = value
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
        self._on_search_changed(self.search.text())
        self.laidOut.emit()

    @Slot(int, str, str, str)
    def _on_layout_failed(self, _generation: int, _kind: str, sentence: str, _details: str):
        self.header.setText(f"{self.where}: {sentence}")
        self.failed.emit(sentence)

    def _header(self) -> None:
        graph, shown = self.graph, self.shown
        parts = [
            f"{self.where}: graph from {graph.source}, {len(shown.nodes):,} nodes drawn, "
            f"{len(shown.edges):,} edges of data flow."
        ]
        parts += [_as_sentence(note) for note in graph.notes]  # notes are fragments
        if graph.collapsed is not None:
            parts.append(graph.collapsed.sentence)
        if self.folded and self.tree_depth is not None:
            count = f"{len(self.folded):,} module{'s' if len(self.folded) != 1 else ''}"
            parts.append(
                f"{count} collapsed below depth {self.tree_depth} so that no level of the "
                f"tree is wider than {TREE_WIDTH} nodes ({len(drawable(graph).nodes):,} nodes "
                "in all): double-click a module to expand it."
            )
        elif self.folded:
            total = len(drawable(graph).nodes)
            count = f"{len(self.folded):,} module{'s' if len(self.folded) != 1 else ''}"
            parts.append(
                f"{count} collapsed ({total:,} nodes in all, more than {PAGE_NODE_LIMIT} "
                "drawn at once): double-click a module to expand it."
                if total > PAGE_NODE_LIMIT
                else f"{count} collapsed: double-click one to expand it."
            )
        if self._damage:
            parts.append(self._damage)  # its lost steps are drawn "lost": say which
        spread = self._spread
        if spread is not None:
            where = (
                "came in with the model's input"
                if spread.phase == "input"
                else f"began in the {spread.phase} of module '{spread.module}'"
            )
            parts.append(
                f"The first non-finite value {where} at step {spread.step:,} (red); "
                "outlined: where it spread."
            )
        self.header.setText(" ".join(p if p.endswith(".") else f"{p}." for p in parts))

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
        spread, step = self._spread, self.step
        if spread is None or step is None or step < spread.step:
            return {"origin": frozenset(), "after": frozenset()}
        return {"origin": spread.origin, "after": spread.after}

    def readouts(self) -> dict:
        """What the page shows, as data: the graph's source (None before one is drawn), the
        recorded step whose health colours it (None for a model file), the drawn node count,
        and per drawn node its health category as coloured ("lost" where every tensor's
        record is lost, None without a recording) and whether it is marked as the origin
        of the first non-finite value or as reached by it."""
        shown = self.shown if self.scene is not None else None
        marks = self.marks()
        nodes = {}
        for node in shown.nodes if shown is not None else ():
            health = self._now.get(node.id)
            nodes[node.id] = {
                "health": None if health is None else worst_label(health.worst),
                "origin": node.id in marks["origin"],
                "spread": node.id in marks["after"],
            }
        return {
            "source": None if shown is None else self.graph.source,
            "step": self.step,
            "node_count": len(nodes),
            "nodes": nodes,
        }

    def node_colour(self, node_id: str) -> str:
        """The fill of a drawn node, as ``#rrggbb``."""
        return self.scene.nodes[node_id].brush().color().name()

    def _recolour(self) -> None:
        scene = self.scene
        if scene is None or self.shown is None or scene.graph is not self.shown:
            return
        column = self.column
        self._now = self._health.at(column) if self._health and column is not None else {}
        norms = [h.norm for h in self._now.values() if h.norm > 0 and math.isfinite(h.norm)]
        low, high = (math.log10(min(norms)), math.log10(max(norms))) if norms else (0.0, 0.0)
        marks = self.marks()
        for node_id, item in scene.nodes.items():
            health = self._now.get(node_id)
            fill = _fill(health, low, high)
            item.setBrush(QBrush(fill))
            item.text.setBrush(QColor("#000000" if fill.lightnessF() > 0.5 else "#ffffff"))
            item.setPen(self._pen(node_id, marks))
        for node_id, box in scene.boxes.items():
            colour = ORIGIN_COLOUR if node_id in marks["origin"] else "#8c8c8c"
            width = 2.5 if node_id in marks["origin"] else 1.0
            pen = QPen(QColor(colour), width, Qt.PenStyle.DashLine)
            if node_id == self.selected:
                pen = QPen(QColor(SELECTED_COLOUR), 2.0, Qt.PenStyle.DashLine)
            box.setPen(pen)
        reached = marks["origin"] | marks["after"]
        scene.set_spread_edges(
            [(a, b) for a, b in self.shown.edges if a in reached and b in marks["after"]]
        )

    def _pen(self, node_id: str, marks) -> QPen:
        if node_id == self.selected:
            return QPen(QColor(SELECTED_COLOUR), 3.0, Qt.PenStyle.DashLine)
        if node_id in marks["origin"]:
            return QPen(QColor(ORIGIN_COLOUR), 4.0)
        if node_id in marks["after"]:
            return QPen(QColor(SPREAD_COLOUR), 2.5)
        return QPen(QColor("#505050"), 0.8)

    # ---- hover and selection ----------------------------------------------------------------
    def describe(self, node_id: str) -> str:
        """One line about a drawn node: what it is, and its tensors' health at the step."""
        if self.shown is None:
            return ""
        node = self.shown.node(node_id)
        what = node.module or node.name
        text = f"{what} ({node.type or node.kind})"
        if node.shape:
            text += f", output {' x '.join(str(d) for d in node.shape)}"
        if node.hidden:
            text += f", stands for {node.hidden:,} nodes (double-click to expand)"
        health = self._now.get(node_id)
        if health is not None:
            finite, zero, nan, pinf, ninf = health.counts
            norm = health.norm_words(format_value)
            text += (
                f"; step {self.step}: {worst_label(health.worst)}, |grad| {norm}"
                f"; finite {finite:,}, zero {zero:,}, NaN {nan:,}, +Inf {pinf:,}, -Inf {ninf:,}"
            )
            if health.lost:
                lost = health.lost
                text += f"; {lost:,} tensor{'' if lost == 1 else 's'} lost at this step"
        elif self.data is not None:
            text += "; no recorded gradients"
        marks = self.marks()
        if node_id in marks["origin"]:
            text += "; the first non-finite value began here"
        elif node_id in marks["after"]:
            text += "; the first non-finite value spread here"
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
        if self._health is None or not len(chosen):
            return
        wanted = {int(r) for r in chosen}
        holders = [
            node_id for node_id, rows in self._health.rows.items() if wanted <= set(rows.tolist())
        ]
        if not holders:
            return
        depth = {
            node_id: self.shown.node(node_id).module.count(".") + 1 for node_id in holders
        }  # fmt: skip
        best = max(holders, key=lambda k: (k.startswith("p:"), depth[k]))
        if self.scene is not None and best not in self.scene.nodes and best not in self.scene.boxes:
            return
        self.selected = best
        self._recolour()
        item = self.scene.nodes.get(best) or self.scene.boxes.get(best)
        self.view.ensureVisible(item)

    # ---- search -----------------------------------------------------------------------------
    def search_matches(self) -> list[str]:
        """Drawn node ids (nodes and module frames) whose module path or name holds the
        search text, in graph order."""
        text = self.search.text().strip().lower()
        if not text or self.shown is None or self.scene is None:
            return []
        drawn = self.scene.nodes.keys() | self.scene.boxes.keys()
        return [
            n.id
            for n in self.shown.nodes
            if n.id in drawn and (text in n.module.lower() or text in n.name.lower())
        ]

    @Slot(str)
    def _on_search_changed(self, _text: str) -> None:
        scene = self.scene
        if scene is None:
            return
        matches = set(self.search_matches())
        searching = bool(self.search.text().strip())
        for node_id, item in scene.nodes.items():
            item.setOpacity(1.0 if not searching or node_id in matches else 0.25)
        self.matches_label.setText(f"{len(matches):,} found" if searching else "")
        self._match_index = -1
        if matches:
            self._on_search_next()

    @Slot()
    def _on_search_next(self) -> None:
        matches = self.search_matches()
        if not matches or self.scene is None:
            return
        self._match_index = (getattr(self, "_match_index", -1) + 1) % len(matches)
        node_id = matches[self._match_index]
        item = self.scene.nodes.get(node_id) or self.scene.boxes.get(node_id)
        self.view.centerOn(item)

    # ---- buttons ----------------------------------------------------------------------------
    @Slot()
    def _on_fit(self) -> None:
        self.view.fit()

    @Slot()
    def _on_export_png(self) -> None:
        self._export(".png")

    @Slot()
    def _on_export_svg(self) -> None:
        self._export(".svg")

    def _export(self, suffix: str) -> None:
        if self.scene is None:
            self.failed.emit("There is no graph to export yet: open a model or a recording.")
            return
        path = self.choose_path(self, suffix)
        if path and not save_scene(self.scene, path):
            self.failed.emit(f"Could not write {path!r}.")

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self.tasks.shutdown(timeout_s)


def _fill(health: GroupHealth | None, low: float, high: float) -> QColor:
    """The palette colour of the worst category, darker for a smaller norm (log scale over
    the graph at this step); grey without gradients."""
    if health is None or health.worst is None:
        return QColor(NO_HEALTH)
    colour = QColor(OKABE_ITO[Health(health.worst)])
    finite = math.isfinite(health.norm)
    if health.worst in (Health.FINITE, Health.ZERO) and high > low and finite and health.norm > 0:
        t = (math.log10(health.norm) - low) / (high - low)
        colour = colour.darker(int(100 + 80 * (1.0 - min(max(t, 0.0), 1.0))))
    return colour


__all__ = ["MODULE", "PAGE_NODE_LIMIT", "PAGE_TITLE", "GraphPage"]


def _as_sentence(note: str) -> str:
    """A graph's note (a lowercase fragment, as the JSON gives it) as a sentence."""
    note = note.strip()
    return note[:1].upper() + note[1:] + ("" if note.endswith(".") else ".")
