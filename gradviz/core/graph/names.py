"""A graph from tensor names alone (state_dict, safetensors, a pickled module without its
code): the module tree the dotted names spell, parameter nodes as its leaves, no edges.

A file of weights does not hold the order modules run in nor how they connect, so nothing
here invents an edge; the graph carries NAMES_LABEL to say so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gradviz.core.graph.model import (
    MODULE,
    NAMES,
    NAMES_LABEL,
    PARAMETER,
    GraphNode,
    ModelGraph,
    module_id,
)

#: Names are cut into at most this many levels; deeper dots stay in the last level's name,
#: so a hostile name of a million dots makes one node, not a million.
MAX_NAME_DEPTH = 32


def graph_from_names(
    names: Iterable[str],
    types: Mapping[str, str] | None = None,
    notes: tuple[str, ...] = (),
) -> ModelGraph:
    """The module tree of ``names`` (``block.conv.weight`` -> modules ``block`` and
    ``block.conv``, parameter ``block.conv.weight``), in first-seen order. ``types`` maps a
    module path to its class where the file names it (a pickled module does)."""
    types = types or {}
    nodes: list[GraphNode] = []
    seen: set[str] = set()
    for name in names:
        parts = str(name).split(".", MAX_NAME_DEPTH)
        parent = None
        for depth in range(1, len(parts)):
            path = ".".join(parts[:depth])
            node_id = module_id(path)
            if node_id not in seen:
                seen.add(node_id)
                nodes.append(
                    GraphNode(node_id, parts[depth - 1], MODULE, path, parent, types.get(path))
                )
            parent = node_id
        full = ".".join(parts)
        node_id = f"p:{full}"
        if node_id in seen:
            continue  # a name given twice (tied weights listed under both) is one tensor
        seen.add(node_id)
        owner = ".".join(parts[:-1])
        nodes.append(GraphNode(node_id, parts[-1], PARAMETER, owner, parent))
    return ModelGraph(tuple(nodes), (), NAMES, (NAMES_LABEL, *notes))


def graph_from_module_tree(
    module, notes: tuple[str, ...] = (), types: Mapping[str, str] | None = None
) -> ModelGraph:
    """The names graph of a live module's parameters and buffers, its modules typed by class
    (``types`` where the class name is elsewhere, as TorchScript's ``original_name``)."""
    if types is None:
        types = {path: type(sub).__name__ for path, sub in module.named_modules() if path}
    names = [name for name, _ in module.named_parameters()]
    names += [name for name, _ in module.named_buffers()]
    return graph_from_names(names, types, notes)
