"""The graph of a watch recording at one recorded step, every parameter node carrying its
gradient health at that step and every module node the health of all tensors inside it.

The structure is what the recorder stored from its first recorded step (``run_order``: the
module tree, containers' own output operations and the data flow between them); a
recording made before that was stored, or one that stored none (a dict of tensors), has the
module tree of its tensors' names and no edges.

``health`` is ``{"step", "worst", "counts": {"finite", "zero", "NaN", "+Inf", "-Inf"},
"grad_norm", "lost_tensors"}``, from ``core.health.group_health`` (the Graph page's rule):
``worst`` is ``worst_of_counts`` of the counts summed over the node's tensors whose
statistics at the step are kept (NaN/Inf where any, "zero" only where every entry is
zero), or "lost" where every one is lost (a damaged recording); ``grad_norm`` is the norm
of the finite entries of the kept tensors' gradients together (each tensor's recorded norm
is of its finite entries), null where it is not finite (an overflow; JSON has no NaN);
``lost_tensors`` how many of the node's tensors are lost at the step.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace

import numpy as np

from gradviz.core.common.errors import GradvizError
from gradviz.core.common.health import HEALTH_LABELS, LOST, GroupHealth, Health, group_health
from gradviz.core.graph.model import (
    INPUT,
    INPUT_ID,
    LOSS_ID,
    MODULE,
    OP,
    OUTPUT,
    PARAMETER,
    RECORDING,
    GraphNode,
    ModelGraph,
    module_id,
    op_id,
)
from gradviz.core.graph.names import MAX_NAME_DEPTH, graph_from_names

RECORDING_LABEL = (
    "structure from the recording's tensor names: the order and the connections are not recorded"
)
RUN_LABEL = (
    "structure and data flow from the first recorded step (module calls and autograd): "
    "modules and their containers' own output operations; operations inside a module are "
    "not shown"
)
# The reader's count columns, in its order, as core.health categories.
_COLUMNS = (Health.FINITE, Health.ZERO, Health.NAN, Health.POS_INF, Health.NEG_INF)


def graph_of_recording(
    path: str | os.PathLike, step: int | None = None, rank: int = 0
) -> ModelGraph:
    """The recording's graph coloured by its health at the recorded ``step`` (the user's
    step number; default: the last recorded one). GradvizError for a step not recorded."""
    from gradviz.core.record.reader import Reader  # one sentence where it is not one

    stream = Reader(path).rank(rank)
    steps = stream.step_numbers()
    if len(steps) == 0:
        raise GradvizError(f"{os.fspath(path)} has no recorded steps yet.")
    if step is None:
        step = int(steps[-1])
    where = np.flatnonzero(steps == step)
    if len(where) == 0:
        raise GradvizError(
            f"Step {step} is not recorded in {os.fspath(path)}; its {len(steps):,} recorded "
            f"steps run from {int(steps[0])} to {int(steps[-1])}."
        )
    row = int(where[0])
    names = stream.tensors
    own = {}  # tensor name -> (counts (5,), grad norm, lost) at the step
    for name in names:
        series = stream.tensor(name)
        own[name] = (series.counts[row], float(series.grad_norm[row]), bool(series.missing[row]))
    base = recorded_graph(names, stream.meta.get("graph"))
    inside: dict[str, list[str]] = {}  # node id -> the tensors in it
    for node in base.nodes:
        if node.kind != PARAMETER:
            continue
        name = f"{node.module}.{node.name}" if node.module else node.name
        ancestor = node.id
        while ancestor is not None:
            inside.setdefault(ancestor, []).append(name)
            ancestor = base.node(ancestor).parent
    nodes = []
    for node in base.nodes:
        tensors = inside.get(node.id) if node.kind in (PARAMETER, MODULE) else None
        if tensors is None:
            nodes.append(node)
            continue
        rows = [own[name] for name in tensors]
        health = group_health(
            np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), [r[2] for r in rows]
        )
        nodes.append(replace(node, health=_health(step, health)))
    notes = (*base.notes, f"Health at step {step:,}.")
    return ModelGraph(tuple(nodes), base.edges, RECORDING, notes)


def recorded_graph(names, stored) -> ModelGraph:
    """The structure of a recording (no health): ``stored`` is its metadata's ``graph``
    (None or unreadable: the module tree of ``names``, the recorded tensors, no edges)."""
    tree = graph_from_names(names)
    parsed = _parse_stored(stored)
    if parsed is None:
        return ModelGraph(tree.nodes, (), RECORDING, (RECORDING_LABEL,))
    modules, ops, edges, shapes = parsed
    nodes: dict[str, GraphNode] = {}
    for path, kind in modules:
        if path and path.count(".") < MAX_NAME_DEPTH:
            prefix, _, leaf = path.rpartition(".")
            parent = module_id(prefix) if prefix else None
            node = GraphNode(module_id(path), leaf, MODULE, path, parent, kind)
            nodes[module_id(path)] = replace(node, shape=shapes.get(path))
    for node in tree.nodes:  # the tensors, and any module the stored tree lacks
        nodes.setdefault(node.id, node)
    for path, name in ops:
        if path == "" or module_id(path) in nodes:
            parent = module_id(path) if path else None
            nodes[op_id(path)] = GraphNode(op_id(path), name, OP, path, parent, name)
    ends = {INPUT_ID: ("input", INPUT), LOSS_ID: ("loss", OUTPUT)}
    for node_id, (name, kind) in ends.items():
        if any(node_id in edge for edge in edges):
            nodes[node_id] = GraphNode(node_id, name, kind, "", None)
    kept = tuple((a, b) for a, b in edges if a in nodes and b in nodes and a != b)
    return ModelGraph(tuple(nodes.values()), tuple(dict.fromkeys(kept)), RECORDING, (RUN_LABEL,))


def _parse_stored(stored):
    """(modules, ops, edges) from the metadata's ``graph``, or None where it is absent or
    not what the recorder writes (a recording is a file from elsewhere: never trusted)."""
    if not isinstance(stored, dict) or stored.get("version") != 1:
        return None
    try:
        modules = [(str(p), str(k)) for p, k in stored["modules"]]
        ops = [(str(p), str(n)) for p, n in stored["ops"]]
        edges = [(str(a), str(b)) for a, b in stored["edges"]]
        shapes = {str(p): tuple(int(d) for d in s) for p, s in stored.get("shapes", [])}
    except (KeyError, TypeError, ValueError):
        return None
    return modules, ops, edges, shapes


def _health(step: int, health: GroupHealth) -> dict:
    return {
        "step": int(step),
        "worst": LOST if health.worst is None else HEALTH_LABELS[Health(health.worst)],
        "counts": {HEALTH_LABELS[code]: int(c) for code, c in zip(_COLUMNS, health.counts)},
        "grad_norm": health.norm if math.isfinite(health.norm) else None,
        "lost_tensors": health.lost,
    }
