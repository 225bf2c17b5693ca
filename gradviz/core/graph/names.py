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

#: The label of a live module's tree (the program may know its connections; this graph does not).
TREE_LABEL = "structure from the module tree: the order and the connections are not shown"

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
    """The names graph of a live module: every submodule (with or without tensors), typed by
    class (``types`` where the class name is elsewhere, as TorchScript's ``original_name``),
    and its own parameters and buffers; no edges."""
    nodes: list[GraphNode] = []
    for path, sub in module.named_modules():
        parent = module_id(path) if path else None
        if path:
            prefix, _, leaf = path.rpartition(".")
            kind = (types or {}).get(path, type(sub).__name__)
            owner = module_id(prefix) if prefix else None
            nodes.append(GraphNode(module_id(path), leaf, MODULE, path, owner, kind))
        own = list(sub.named_parameters(recurse=False)) + list(sub.named_buffers(recurse=False))
        for leaf, _ in own:
            full = f"{path}.{leaf}" if path else leaf
            nodes.append(GraphNode(f"p:{full}", leaf, PARAMETER, path, parent))
    return ModelGraph(tuple(nodes), (), NAMES, (TREE_LABEL, *notes))
