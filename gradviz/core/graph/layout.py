"""Layered top-to-bottom layout of a ModelGraph by grandalf's Sugiyama layout.

grandalf is pure Python (no binary to install, unlike Graphviz's ``dot``), maintained, and
does the layering, crossing reduction and coordinate assignment of a layered drawing; gradviz
only places the connected pieces side by side and draws module boxes around their nodes.

What is laid out: with edges (export, fx, a recording's run), every node except the modules
that contain other nodes, which become boxes around them, and the parameters no edge
touches (a recording's tensors: their health is their module's); without edges (a graph
from names), every node, with the module tree's parent-child links as the layers' edges
(a tree, never shown as data flow).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gradviz.core.common.errors import GradvizError
from gradviz.core.graph.model import MODULE, PARAMETER, ModelGraph

NODE_HEIGHT = 24.0
CHAR_WIDTH = 7.0
NODE_PADDING = 16.0
COMPONENT_GAP = 40.0
BOX_MARGIN = 8.0


@dataclass(frozen=True)
class GraphLayout:
    """Positions in layout units (y grows downward, sources on top). ``positions``: node id
    -> (x, y) of its centre; ``sizes``: node id -> (width, height); ``boxes``: a module
    node's id -> (x0, y0, x1, y1) around everything inside it; ``width``, ``height``: the
    whole drawing's extent from (0, 0)."""

    positions: dict[str, tuple[float, float]]
    sizes: dict[str, tuple[float, float]]
    boxes: dict[str, tuple[float, float, float, float]]
    width: float
    height: float

    def to_dict(self) -> dict:
        return {
            "positions": {k: list(v) for k, v in self.positions.items()},
            "sizes": {k: list(v) for k, v in self.sizes.items()},
            "boxes": {k: list(v) for k, v in self.boxes.items()},
            "width": self.width,
            "height": self.height,
        }


#: What the page says where grandalf is not installed.
FALLBACK_LINE = (
    "grandalf is not installed (pip install grandalf): a plain layering by depth is shown, "
    "with more crossings."
)


def has_grandalf() -> bool:
    try:
        import grandalf.layouts  # noqa: F401
    except ImportError:
        return False
    return True


def drawable(graph: ModelGraph) -> ModelGraph:
    """The nodes a drawing shows: with edges, the parameters no edge touches are left out
    (a recording's tensors: their health is their module's)."""
    if not graph.edges:
        return graph
    touched = {end for edge in graph.edges for end in edge}
    shown = tuple(n for n in graph.nodes if n.kind != PARAMETER or n.id in touched)
    return graph if len(shown) == len(graph.nodes) else replace(graph, nodes=shown)


def _laid_nodes(graph: ModelGraph):
    """(laid-out nodes, the links the layers follow) of a ``drawable`` graph."""
    if graph.edges:
        parents = {node.parent for node in graph.nodes if node.parent is not None}
        laid = [n for n in graph.nodes if not (n.kind == MODULE and n.id in parents)]
        return laid, list(graph.edges)
    return list(graph.nodes), [(n.parent, n.id) for n in graph.nodes if n.parent is not None]


def _sizes(laid) -> dict[str, tuple[float, float]]:
    """Room for the label: the name, and " (+N)" for a collapsed module of N nodes."""
    return {
        n.id: (NODE_PADDING + CHAR_WIDTH * len(_label(n)), NODE_HEIGHT) for n in laid
    }  # fmt: skip


def _label(node) -> str:
    return f"{node.name} (+{node.hidden})" if node.hidden else node.name


def layout_graph(graph: ModelGraph) -> GraphLayout:
    """Lay ``graph`` out in layers, top to bottom (see the module docstring for what is
    laid out and what is boxed)."""
    try:
        from grandalf.graphs import Edge, Vertex, graph_core
        from grandalf.layouts import SugiyamaLayout
    except ImportError:
        raise GradvizError(
            "Laying out a graph needs grandalf (pip install grandalf); the graph's data "
            "itself does not."
        ) from None

    graph = drawable(graph)
    laid, links = _laid_nodes(graph)
    sizes = _sizes(laid)
    vertices = {node_id: Vertex(node_id) for node_id in sizes}
    for node_id, vertex in vertices.items():
        vertex.view = _View(*sizes[node_id])
    links = [(a, b) for a, b in links if a in vertices and b in vertices]

    positions: dict[str, tuple[float, float]] = {}
    left = 0.0
    for ids, component_links in _components(list(vertices), links):
        # One connected piece at a time, built directly: grandalf's Graph() finds the pieces
        # itself in O(V x E) (list membership tests), 1.8 s of 3.3 s for 1,000 nodes.
        edges = [Edge(vertices[a], vertices[b]) for a, b in component_links]
        component = graph_core([vertices[i] for i in ids], edges)
        sugiyama = SugiyamaLayout(component)
        sugiyama.init_all()
        sugiyama.draw()
        placed = {v.data: v.view.xy for v in component.sV}
        x0 = min(x - sizes[k][0] / 2 for k, (x, _) in placed.items())
        x1 = max(x + sizes[k][0] / 2 for k, (x, _) in placed.items())
        y0 = min(y - sizes[k][1] / 2 for k, (_, y) in placed.items())
        for key, (x, y) in placed.items():
            positions[key] = (float(x - x0 + left), float(y - y0))
        left += (x1 - x0) + COMPONENT_GAP
    boxes = _module_boxes(graph, positions, sizes) if graph.edges else {}
    width = max((x + sizes[k][0] / 2 for k, (x, _) in positions.items()), default=0.0)
    height = max((y + sizes[k][1] / 2 for k, (_, y) in positions.items()), default=0.0)
    return GraphLayout(positions, sizes, boxes, float(width), float(height))


def layered_fallback(graph: ModelGraph) -> GraphLayout:
    """Where grandalf is absent only: each node in the layer of its longest path from a
    source (a tree: its depth), left to right in graph order; no crossing reduction."""
    graph = drawable(graph)
    laid, links = _laid_nodes(graph)
    sizes = _sizes(laid)
    ids = [n.id for n in laid]
    layer = dict.fromkeys(ids, 0)
    into: dict[str, list[str]] = {i: [] for i in ids}
    for a, b in links:
        if a in layer and b in layer:
            into[b].append(a)
    order = _topological(ids, into)
    for node_id in order:
        layer[node_id] = max((layer[a] + 1 for a in into[node_id]), default=0)
    rows: dict[int, list[str]] = {}
    for node_id in ids:
        rows.setdefault(layer[node_id], []).append(node_id)
    positions = {}
    for depth, row in rows.items():
        x = 0.0
        for node_id in row:
            w = sizes[node_id][0]
            positions[node_id] = (x + w / 2, depth * NODE_HEIGHT * 2.5 + NODE_HEIGHT / 2)
            x += w + NODE_PADDING
    boxes = _module_boxes(graph, positions, sizes) if graph.edges else {}
    width = max((x + sizes[k][0] / 2 for k, (x, _) in positions.items()), default=0.0)
    height = max((y + sizes[k][1] / 2 for k, (_, y) in positions.items()), default=0.0)
    return GraphLayout(positions, sizes, boxes, float(width), float(height))


def _topological(ids: list[str], into: dict[str, list[str]]) -> list[str]:
    """Kahn's order; nodes on a cycle (none in a forward graph) follow in graph order."""
    missing = {i: len(into[i]) for i in ids}
    out: dict[str, list[str]] = {i: [] for i in ids}
    for b, sources in into.items():
        for a in sources:
            out[a].append(b)
    ready = [i for i in ids if missing[i] == 0]
    order = []
    while ready:
        node_id = ready.pop()
        order.append(node_id)
        for b in out[node_id]:
            missing[b] -= 1
            if missing[b] == 0:
                ready.append(b)
    placed = set(order)
    return order + [i for i in ids if i not in placed]


def _components(ids: list[str], links: list[tuple[str, str]]):
    """Connected pieces (union-find), each as (node ids, links), in first-seen order."""
    root = {i: i for i in ids}

    def find(i: str) -> str:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    for a, b in links:
        root[find(a)] = find(b)
    pieces: dict[str, tuple[list, list]] = {}
    for i in ids:
        pieces.setdefault(find(i), ([], []))[0].append(i)
    for a, b in links:
        pieces[find(a)][1].append((a, b))
    return list(pieces.values())


class _View:
    """The size grandalf reads (``w``, ``h``) and the centre it writes (``xy``)."""

    def __init__(self, w: float, h: float) -> None:
        self.w, self.h = w, h
        self.xy = (0.0, 0.0)


def _module_boxes(graph: ModelGraph, positions, sizes) -> dict:
    """Each containing module's box: around every laid node whose parent chain reaches it."""
    parent_of = {node.id: node.parent for node in graph.nodes}
    extents: dict[str, list[float]] = {}
    for node_id, (x, y) in positions.items():
        w, h = sizes[node_id]
        ancestor = parent_of.get(node_id)
        while ancestor is not None:
            box = extents.setdefault(ancestor, [x - w / 2, y - h / 2, x + w / 2, y + h / 2])
            box[0], box[1] = min(box[0], x - w / 2), min(box[1], y - h / 2)
            box[2], box[3] = max(box[2], x + w / 2), max(box[3], y + h / 2)
            ancestor = parent_of.get(ancestor)
    return {
        k: (b[0] - BOX_MARGIN, b[1] - BOX_MARGIN, b[2] + BOX_MARGIN, b[3] + BOX_MARGIN)
        for k, b in extents.items()
    }
