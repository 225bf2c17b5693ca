"""A graph from a loaded TorchScript program's inlined graph (``module.inlined_graph``).

A saved TorchScript file keeps no module scopes, so an operation is placed in the module
whose weights it reads (``conv2d`` reading ``block.conv.weight`` is in ``block.conv``) and
operations that read none sit at the top level; the graph's note says so. Data flow is the
program's own: constants are dropped, list and tuple packing passes its inputs on.
"""

from __future__ import annotations

from typing import Any

from gradviz.core.graph.model import (
    INPUT,
    MODULE,
    OP,
    OUTPUT,
    PARAMETER,
    TORCHSCRIPT,
    GraphNode,
    ModelGraph,
    module_id,
)

PLACEMENT_NOTE = (
    "A TorchScript file keeps no module scopes: operations are placed in the module whose "
    "weights they read, the others at the top level."
)
# Nodes that only pack, unpack or name values: their outputs carry their inputs' producers.
_PASS_THROUGH = {
    "prim::ListConstruct",
    "prim::TupleConstruct",
    "prim::ListUnpack",
    "prim::TupleUnpack",
    "prim::DictConstruct",
    "prim::TupleIndex",
    "aten::__getitem__",
}


def graph_from_torchscript(module: Any) -> ModelGraph:
    """The graph of a ``torch.jit.ScriptModule`` (see the module docstring)."""
    graph = module.inlined_graph
    tensors = {name for name, _ in module.named_parameters()}
    tensors |= {name for name, _ in module.named_buffers()}
    types = {p: getattr(m, "original_name", type(m).__name__) for p, m in module.named_modules()}
    walk = _Walk(tensors, types)
    inputs = list(graph.inputs())
    walk.paths[inputs[0].debugName()] = ""  # self: the model
    for value in inputs[1:]:
        node_id = f"in:{value.debugName()}"
        walk.add(GraphNode(node_id, value.debugName().partition(".")[0], INPUT, "", None))
        walk.producers[value.debugName()] = {node_id}
    walk.block(graph.nodes())
    walk.add(GraphNode("out:output", "output", OUTPUT, "", None))
    for value in graph.outputs():
        walk.edges_into("out:output", [value])
    return ModelGraph(
        tuple(walk.nodes), tuple(dict.fromkeys(walk.edges)), TORCHSCRIPT, (PLACEMENT_NOTE,)
    )


class _Walk:
    """State of one pass: which graph node produces each value, module paths of GetAttr
    values, and the nodes and edges so far."""

    def __init__(self, tensors: set[str], types: dict[str, str]) -> None:
        self.tensors, self.types = tensors, types
        self.paths: dict[str, str] = {}  # value -> module or tensor path (GetAttr chains)
        self.producers: dict[str, set[str]] = {}  # value -> ids of the nodes it comes from
        self.nodes: list[GraphNode] = []
        self.edges: list[tuple[str, str]] = []
        self.ids: set[str] = set()
        self.count = 0

    def add(self, node: GraphNode) -> None:
        if node.id not in self.ids:
            self.ids.add(node.id)
            self.nodes.append(node)

    def module(self, path: str) -> str | None:
        """The id of the module node at ``path`` (parents first), None for the model."""
        if not path:
            return None
        parent = self.module(path.rpartition(".")[0])
        self.add(
            GraphNode(
                module_id(path), path.rpartition(".")[2], MODULE, path, parent, self.types.get(path)
            )
        )
        return module_id(path)

    def edges_into(self, node_id: str, values) -> None:
        for value in values:
            for source in sorted(self.producers.get(value.debugName(), ())):
                self.edges.append((source, node_id))

    def block(self, nodes) -> None:
        for node in nodes:
            self.visit(node)

    def visit(self, node: Any) -> None:
        kind = node.kind()
        inputs = list(node.inputs())
        outputs = [value.debugName() for value in node.outputs()]
        if kind == "prim::Constant":
            return
        if kind == "prim::GetAttr":
            base = self.paths.get(inputs[0].debugName())
            if base is None:
                return
            path = f"{base}.{node.s('name')}" if base else node.s("name")
            self.paths[outputs[0]] = path
            if path in self.tensors:
                owner = path.rpartition(".")[0]
                node_id = f"p:{path}"
                self.add(
                    GraphNode(
                        node_id, path.rpartition(".")[2], PARAMETER, owner, self.module(owner)
                    )
                )
                self.producers[outputs[0]] = {node_id}
            return
        if kind in _PASS_THROUGH:
            carried = set().union(*(self.producers.get(v.debugName(), set()) for v in inputs))
            for name in outputs:
                self.producers[name] = carried
            return
        self.count += 1
        name = kind.partition("::")[2] or kind
        if name.endswith("_") and not name.endswith("__"):
            name = name[:-1]  # the in-place form of an operation is still that operation
        owner = self._owner(inputs)
        node_id = f"op:{name}_{self.count}"
        self.add(GraphNode(node_id, name, OP, owner, self.module(owner), kind))
        self.edges_into(node_id, inputs)
        for inner in node.blocks():  # if / loop bodies: their operations, their results in
            self.block(inner.nodes())
            self.edges_into(node_id, list(inner.returnNode().inputs()))
        for output in outputs:
            self.producers[output] = {node_id}

    def _owner(self, inputs) -> str:
        """The module whose weights the operation reads (their common prefix), else ""."""
        owners = [
            self.paths[v.debugName()].rpartition(".")[0]
            for v in inputs
            if self.paths.get(v.debugName()) in self.tensors
        ]
        if not owners:
            return ""
        common = owners[0].split(".")
        for owner in owners[1:]:
            parts = owner.split(".")
            n = 0
            while n < min(len(common), len(parts)) and common[n] == parts[n]:
                n += 1
            common = common[:n]
        return ".".join(common)
