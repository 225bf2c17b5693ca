"""Graphs from torch's own graphs: a ``torch.export`` ExportedProgram and a ``torch.fx``
GraphModule, nodes grouped by the module that owns them (``nn_module_stack``).

Both are torch.fx graphs underneath, so one walk reads them; they differ in how a node's
operation is named (export: ``aten.conv2d.default``; fx: a call of the ``Conv2d`` module) and
in how parameters arrive (export: placeholders named by the signature; fx: ``get_attr``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gradviz.core.graph.model import (
    EXPORT,
    FX,
    INPUT,
    MODULE,
    OP,
    OUTPUT,
    PARAMETER,
    GraphNode,
    ModelGraph,
    module_id,
)


def graph_from_exported(program: Any, notes: tuple[str, ...] = ()) -> ModelGraph:
    """The graph of a ``torch.export.ExportedProgram``: its parameters, buffers and
    constants as parameter nodes (owned by the module their name is in), its user inputs as
    input nodes, each aten call as an op node named after its operation (``conv2d``,
    ``relu``, ``add``) in the module that called it."""
    targets = {}  # placeholder name -> the state_dict name it stands for
    for spec in program.graph_signature.input_specs:
        target = getattr(spec, "target", None)
        name = getattr(spec.arg, "name", None)
        if name is not None and target is not None:
            targets[name] = str(target)

    def classify(node: Any) -> tuple[str, str, str, str | None]:
        if node.op == "placeholder":
            if node.name in targets:
                return PARAMETER, _leaf(targets[node.name]), _owner(targets[node.name]), None
            return INPUT, node.name, "", None
        return OP, _op_name(node.target), _stack_owner(node), _full_name(node.target)

    return _walk(program.graph, classify, EXPORT, notes)


def graph_from_fx(module: Any, notes: tuple[str, ...] = ()) -> ModelGraph:
    """The graph of a ``torch.fx.GraphModule`` (``symbolic_trace``): calls of leaf modules
    are op nodes named after the module's class (``conv2d``, ``relu``, ``linear``),
    attributes read (weights) are parameter nodes."""
    submodules = dict(module.named_modules())

    def classify(node: Any) -> tuple[str, str, str, str | None]:
        if node.op == "placeholder":
            return INPUT, node.name, "", None
        if node.op == "get_attr":
            return PARAMETER, _leaf(str(node.target)), _owner(str(node.target)), None
        if node.op == "call_module":
            kind = type(submodules.get(node.target)).__name__
            return OP, kind.lower(), str(node.target), kind
        if node.op == "call_method":
            return OP, str(node.target), _stack_owner(node), f"Tensor.{node.target}"
        return OP, _op_name(node.target), _stack_owner(node), _full_name(node.target)

    types = {path: type(sub).__name__ for path, sub in submodules.items() if path}
    return _walk(module.graph, classify, FX, notes, types)


def _walk(
    graph: Any,
    classify: Callable[[Any], tuple[str, str, str, str | None]],
    source: str,
    notes: tuple[str, ...],
    types: Mapping[str, str] | None = None,
) -> ModelGraph:
    """One pass over an fx graph in program order: module nodes are added the first time a
    node inside them appears (parents first), every other node once, edges from each node's
    inputs."""
    nodes: list[GraphNode] = []
    modules: dict[str, str | None] = dict(_stack_types(graph))
    modules.update(types or {})
    added: set[str] = set()
    edges: list[tuple[str, str]] = []

    def ensure_module(path: str) -> str | None:
        if not path:
            return None
        node_id = module_id(path)
        if node_id not in added:
            prefix = path.rpartition(".")[0]
            parent = ensure_module(prefix)
            added.add(node_id)
            nodes.append(
                GraphNode(node_id, path.rpartition(".")[2], MODULE, path, parent, modules.get(path))
            )
        return node_id

    ids = {}
    for fx_node in graph.nodes:
        if fx_node.op == "output":
            kind, name, owner, full = OUTPUT, "output", "", None
        else:
            kind, name, owner, full = classify(fx_node)
        node_id = f"{_PREFIX[kind]}:{fx_node.name}"
        ids[fx_node] = node_id
        parent = ensure_module(owner)
        nodes.append(GraphNode(node_id, name, kind, owner, parent, full, shape=_shape(fx_node)))
        edges.extend((ids[arg], node_id) for arg in fx_node.all_input_nodes if arg in ids)
    return ModelGraph(tuple(nodes), tuple(dict.fromkeys(edges)), source, notes)


_PREFIX = {INPUT: "in", OUTPUT: "out", PARAMETER: "p", OP: "op"}


def _shape(node: Any) -> tuple[int, ...] | None:
    """The shape of the tensor ``node`` makes, where the program recorded it (export's
    ``val``; fx's ``tensor_meta`` after shape propagation) and it is concrete."""
    value = node.meta.get("val", node.meta.get("tensor_meta"))
    shape = getattr(value, "shape", None)
    if shape is None:
        return None
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):  # a symbolic size
        return None


def _stack_types(graph: Any) -> dict[str, str]:
    """Module path -> class name, from every node's ``nn_module_stack``."""
    types = {}
    for node in graph.nodes:
        for path, kind in _stack(node):
            if path:
                types.setdefault(path, kind)
    return types


def _stack(node: Any) -> list[tuple[str, str]]:
    """(path, class name) of each module the node was called in, outermost first."""
    stack = node.meta.get("nn_module_stack") or {}
    entries = []
    for value in stack.values():
        if not isinstance(value, tuple) or len(value) < 2:
            continue
        path, kind = value[0], value[1]
        name = kind.__name__ if isinstance(kind, type) else str(kind).rpartition(".")[2]
        entries.append((_clean_path(str(path)), name))
    return entries


def _stack_owner(node: Any) -> str:
    """The innermost module that called ``node`` (``""``: the model itself)."""
    stack = _stack(node)
    return stack[-1][0] if stack else ""


def _clean_path(path: str) -> str:
    """``L['self'].block.conv`` (older torch, dynamo's naming) -> ``block.conv``."""
    for prefix in ("L['self'].", "L__self__."):
        if path.startswith(prefix):
            return path[len(prefix) :]
    return "" if path in ("L['self']", "L__self__") else path


def _owner(target: str) -> str:
    """The module a state_dict name belongs to: ``block.conv.weight`` -> ``block.conv``."""
    return target.rpartition(".")[0]


def _leaf(target: str) -> str:
    """``block.conv.weight`` -> ``weight`` (the node's ``module`` says whose)."""
    return target.rpartition(".")[2]


def _op_name(target: Any) -> str:
    """``aten.conv2d.default`` -> ``conv2d``; ``aten.relu_.default`` -> ``relu``;
    ``operator.add`` -> ``add``."""
    name = getattr(target, "_opname", None) or getattr(target, "__name__", None) or str(target)
    name = str(name).rpartition(".")[2] if "." in str(name) else str(name)
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]  # the in-place form of an operation is still that operation
    return name


def _full_name(target: Any) -> str:
    if hasattr(target, "_opname"):
        return str(target)  # aten.conv2d.default
    module = getattr(target, "__module__", None)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", str(target))
    return f"{module}.{name}" if module else str(name)
