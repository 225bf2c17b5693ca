"""A model's graph as plain data, from wherever it can be read, and its layered layout.

Public API::

    graph_of_file(path, *, trust=False, model_class=None, model_args=None,
                  input_shape=None, node_limit=NODE_LIMIT) -> ModelGraph
    graph_of_module(module, sample) -> ModelGraph          # export, else fx
    graph_from_exported(program) / graph_from_fx(graph_module) / graph_from_names(names)
    limit_nodes(graph, limit=NODE_LIMIT) -> ModelGraph      # collapsed, never cut
    layout_graph(graph) -> GraphLayout                      # needs grandalf

torch + numpy only, never Qt; importing this package imports neither torch nor grandalf.
"""

from gradviz.core.graph.collapse import NODE_LIMIT, collapse_to_depth, limit_nodes
from gradviz.core.graph.model import (
    KINDS,
    NAMES_LABEL,
    SOURCES,
    Collapsed,
    GraphNode,
    ModelGraph,
)
from gradviz.core.graph.names import graph_from_names

__all__ = [
    "KINDS",
    "NAMES_LABEL",
    "NODE_LIMIT",
    "SOURCES",
    "Collapsed",
    "GraphNode",
    "ModelGraph",
    "collapse_to_depth",
    "graph_from_exported",
    "graph_from_fx",
    "graph_from_names",
    "graph_of_file",
    "graph_of_module",
    "layout_graph",
    "limit_nodes",
]


def __getattr__(name: str):
    # The builders that need torch (or grandalf) load on first use.
    if name in ("graph_from_exported", "graph_from_fx"):
        from gradviz.core.graph import fx_graph

        return getattr(fx_graph, name)
    if name == "graph_of_module":
        from gradviz.core.graph.trace import graph_of_module

        return graph_of_module
    if name == "graph_of_file":
        from gradviz.core.graph.sources import graph_of_file

        return graph_of_file
    if name == "layout_graph":
        from gradviz.core.graph.layout import layout_graph

        return layout_graph
    raise AttributeError(name)
