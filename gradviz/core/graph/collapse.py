"""The node limit: a graph with more nodes than it is collapsed to modules, never cut.

Collapsing to depth ``d`` keeps module nodes down to depth ``d``; everything owned by a
deeper module is represented by its ancestor at depth ``d`` (which then carries the edges in
and out, and says how many nodes it stands for). The deepest ``d`` that fits is chosen.
"""

from __future__ import annotations

from dataclasses import replace

from gradviz.core.common.errors import GradvizError
from gradviz.core.graph.model import MODULE, Collapsed, ModelGraph, module_id

#: Nodes a graph may have before it is collapsed (the issue's page collapses past 200 on
#: screen; the data keeps more).
NODE_LIMIT = 2_000


def limit_nodes(graph: ModelGraph, limit: int = NODE_LIMIT) -> ModelGraph:
    """``graph`` itself when it has at most ``limit`` nodes, else collapsed to the deepest
    module depth that fits, with ``collapsed`` saying so. GradvizError (one sentence) where
    even depth 0 (every top-level module collapsed) has more than ``limit`` nodes."""
    if len(graph.nodes) <= limit:
        return graph
    deepest = max((_depth(node.module) for node in graph.nodes), default=0)
    for depth in range(deepest - 1, -1, -1):
        collapsed = collapse_to_depth(graph, depth)
        if len(collapsed.nodes) <= limit:
            return replace(collapsed, collapsed=Collapsed(limit, len(graph.nodes), depth))
    coarsest = len(collapse_to_depth(graph, 0).nodes)
    raise GradvizError(
        f"The graph has {len(graph.nodes):,} nodes and still {coarsest:,} with every module "
        f"collapsed, more than the limit of {limit:,}; gradviz does not show part of a graph."
    )


def collapse_to_depth(graph: ModelGraph, depth: int) -> ModelGraph:
    """Every node owned by a module deeper than ``depth`` folded into that module's
    ancestor at ``depth`` (depth 0: into the top-level modules)."""
    represent: dict[str, str] = {}
    hidden: dict[str, int] = {}
    for node in graph.nodes:
        if _depth(node.module) <= depth:
            continue
        target = _cut(node.module, max(depth, 1))  # a top-level module is the coarsest node
        if node.kind == MODULE and node.module == target:
            continue  # depth 0: the top-level modules themselves stay
        represent[node.id] = module_id(target)
        hidden[module_id(target)] = hidden.get(module_id(target), 0) + 1
    nodes = []
    for node in graph.nodes:
        if node.id in represent:
            continue
        if node.id in hidden:
            node = replace(node, hidden=hidden[node.id])
        nodes.append(node)
    edges = []
    for a, b in graph.edges:
        a, b = represent.get(a, a), represent.get(b, b)
        if a != b:
            edges.append((a, b))
    return ModelGraph(tuple(nodes), tuple(dict.fromkeys(edges)), graph.source, graph.notes)


def _depth(path: str) -> int:
    return 0 if not path else path.count(".") + 1


def _cut(path: str, depth: int) -> str:
    """``block.conv.inner`` cut to depth 1 -> ``block``."""
    return ".".join(path.split(".")[:depth]) if path else ""


def fold_modules(graph: ModelGraph, folded) -> ModelGraph:
    """``graph`` with every node inside a module of ``folded`` (module node ids) represented
    by the outermost folded module around it, which then carries the edges in and out and
    says in ``hidden`` how many nodes it stands for: the page's collapse and expand."""
    folded = set(folded)
    parent_of = {node.id: node.parent for node in graph.nodes}
    represent: dict[str, str] = {}
    for node in graph.nodes:
        outermost, ancestor = None, node.parent
        while ancestor is not None:
            if ancestor in folded:
                outermost = ancestor
            ancestor = parent_of.get(ancestor)
        if outermost is not None:
            represent[node.id] = outermost
    hidden: dict[str, int] = {}
    for target in represent.values():
        hidden[target] = hidden.get(target, 0) + 1
    nodes = tuple(
        replace(node, hidden=hidden.get(node.id, 0))
        for node in graph.nodes
        if node.id not in represent
    )
    edges = []
    for a, b in graph.edges:
        a, b = represent.get(a, a), represent.get(b, b)
        if a != b:
            edges.append((a, b))
    return replace(graph, nodes=nodes, edges=tuple(dict.fromkeys(edges)))


def folded_to_fit(graph: ModelGraph, limit: int) -> tuple[frozenset, Collapsed | None]:
    """The modules to fold so that ``graph`` shows at most ``limit`` nodes (the deepest
    module depth that fits, as ``limit_nodes``; every top-level module where none fits), and
    the Collapsed that says so (None, and nothing folded, when it fits whole)."""
    if len(graph.nodes) <= limit:
        return frozenset(), None
    deepest = max((_depth(node.module) for node in graph.nodes), default=0)
    for depth in range(deepest - 1, -1, -1):
        collapsed = collapse_to_depth(graph, depth)
        if len(collapsed.nodes) <= limit or depth == 0:
            folded = frozenset(node.id for node in collapsed.nodes if node.hidden)
            return folded, Collapsed(limit, len(graph.nodes), depth)
    return frozenset(), None


#: The most nodes a tree without edges (a names-only graph) shows side by side on one level
#: before its deeper modules are folded: a ResNet-18 state_dict (178 nodes, 96 parameters on
#: its deepest level) is otherwise one very wide row.
TREE_WIDTH = 24


def folded_to_width(graph: ModelGraph, width: int = TREE_WIDTH) -> tuple[frozenset, int | None]:
    """For a tree without edges (names only): the modules to fold so that no level of the
    drawn tree holds more than ``width`` nodes, at the deepest module depth where that holds
    (depth 0: the top-level modules folded), and that depth. ``(frozenset(), None)`` for a
    graph with edges (its layers are not the tree's) or a tree that fits whole."""
    if graph.edges or _widest_level(graph) <= width:
        return frozenset(), None
    deepest = max((_depth(node.module) for node in graph.nodes), default=0)
    for depth in range(deepest - 1, -1, -1):
        collapsed = collapse_to_depth(graph, depth)
        if _widest_level(collapsed) <= width or depth == 0:
            return frozenset(node.id for node in collapsed.nodes if node.hidden), depth
    return frozenset(), None


def _widest_level(graph: ModelGraph) -> int:
    """The most nodes on one level of the tree that ``parent`` spells (roots on level 0)."""
    parent_of = {node.id: node.parent for node in graph.nodes}
    counts: dict[int, int] = {}
    for node in graph.nodes:
        level, ancestor = 0, node.parent
        while ancestor in parent_of:  # names are cut at MAX_NAME_DEPTH: short walks
            level, ancestor = level + 1, parent_of[ancestor]
        counts[level] = counts.get(level, 0) + 1
    return max(counts.values(), default=0)
