"""What the Graph page colours, as plain data: each drawn node's tensors (rows of a
recording), their worst health and norm at a recorded step, and the first non-finite
value's origin with the nodes it spread to.

No Qt here: the page asks, the numbers come from the RecordingData it was given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradviz.core.common.health import HEALTH_LABELS, LOST, GroupHealth, Health, group_health
from gradviz.core.graph.model import INPUT_ID, MODULE, PARAMETER, ModelGraph
from gradviz.core.record.recording_data import RecordingData


def tensor_rows(graph: ModelGraph, tensors: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Drawn node id -> (k,) int rows of ``tensors`` inside it: a parameter node its own,
    a module node every tensor of it and of the modules inside it (a folded module too)."""
    modules = {n.module: n.id for n in graph.nodes if n.kind == MODULE}
    params = {
        f"{n.module}.{n.name}" if n.module else n.name: n.id
        for n in graph.nodes
        if n.kind == PARAMETER
    }
    rows: dict[str, list[int]] = {}
    for row, name in enumerate(tensors):
        if name in params:
            rows.setdefault(params[name], []).append(row)
        owner = name.rpartition(".")[0]
        while owner:
            if owner in modules:
                rows.setdefault(modules[owner], []).append(row)
            owner = owner.rpartition(".")[0]
    return {k: np.asarray(v, np.int64) for k, v in rows.items()}


class StepHealth:
    """The health of every drawn node of one graph over a recording's steps."""

    def __init__(self, graph: ModelGraph, data: RecordingData) -> None:
        self.data = data
        self.rows = tensor_rows(graph, data.tensors)
        self._lost = data.missing_cells()  # (T, S) bool

    def at(self, column: int) -> dict[str, GroupHealth]:
        """Node id -> its GroupHealth at the recorded step in ``column`` (``core.health``:
        the rule ``inspect --graph`` prints too, so the page and the file agree)."""
        lost = self._lost[:, column]
        return {
            node_id: group_health(
                self.data.counts[rows, column], self.data.grad_norm[rows, column], lost[rows]
            )
            for node_id, rows in self.rows.items()
        }

    def innermost_holder(self, chosen, graph: ModelGraph) -> str | None:
        """The innermost drawn node of ``graph`` whose tensors include all rows ``chosen``
        (a parameter before a module of the same depth); None where none holds them."""
        wanted = {int(r) for r in chosen}
        holders = [node_id for node_id, rows in self.rows.items() if wanted <= set(rows.tolist())]
        if not wanted or not holders:
            return None
        depth = {node_id: graph.node(node_id).module.count(".") + 1 for node_id in holders}
        return max(holders, key=lambda k: (k.startswith("p:"), depth[k]))


@dataclass(frozen=True)
class Spread:
    """Where the first non-finite value began (``origin``: drawn node ids) and the drawn
    nodes it reached (``after``: downstream in the forward, upstream in the backward), from
    ``step`` on."""

    step: int
    phase: str
    module: str
    tensor: str  # the parameter that held the value, where the origin names one
    origin: frozenset
    after: frozenset

    def marks_at(self, step: int | None) -> dict[str, frozenset]:
        """The nodes marked at ``step``: ``origin`` and ``after``; none before its step."""
        if step is None or step < self.step:
            return NO_MARKS
        return {"origin": self.origin, "after": self.after}


#: What is marked where there is no first non-finite value (or not yet).
NO_MARKS: dict[str, frozenset] = {"origin": frozenset(), "after": frozenset()}


def spread_of(graph: ModelGraph, first: dict | None) -> Spread | None:
    """The Spread of a recording's ``first_nonfinite`` on the drawn ``graph`` (None where
    the recording names no origin, or its place is not in the graph): a module's origin
    marks that module (or its outermost drawn ancestor), an ``input`` origin (the value
    came in with the batch) the graph's input node, and one held by a parameter (an
    ``input`` origin that names its module and tensor) that parameter's module."""
    origin = (first or {}).get("origin") or {}
    phase = str(origin.get("phase"))
    tensor = str(origin.get("tensor") or "") if phase == "input" else ""
    if phase == "input" and not (tensor and origin.get("module")):
        origin_ids = frozenset(n.id for n in graph.nodes if n.id == INPUT_ID)
        module = ""
    else:
        module = str(origin.get("module") or "")
        origin_ids = _drawn_module(graph, module) if module else frozenset()
    if not origin_ids:
        return None
    backward = phase == "backward"
    step_to: dict[str, list[str]] = {}
    for a, b in graph.edges:
        if backward:
            a, b = b, a
        step_to.setdefault(a, []).append(b)
    reached: set[str] = set()
    stack = list(origin_ids)
    while stack:
        for nxt in step_to.get(stack.pop(), ()):
            if nxt not in reached and nxt not in origin_ids:
                reached.add(nxt)
                stack.append(nxt)
    return Spread(int(first["step"]), phase, module, tensor, origin_ids, frozenset(reached))


def _drawn_module(graph: ModelGraph, module: str) -> frozenset:
    """The drawn nodes of ``module``: its node (or, folded away, its outermost drawn
    ancestor's) and everything drawn inside it."""
    parent_of = {n.id: n.parent for n in graph.nodes}
    ids = {n.module: n.id for n in graph.nodes if n.kind == MODULE}
    path = module
    while path and path not in ids:
        path = path.rpartition(".")[0]
    if not path:
        return frozenset()
    start = ids[path]

    def inside(node_id: str) -> bool:
        while node_id is not None:
            if node_id == start:
                return True
            node_id = parent_of.get(node_id)
        return False

    return frozenset(n.id for n in graph.nodes if inside(n.id))


def worst_label(code: int | None) -> str:
    return LOST if code is None else HEALTH_LABELS[Health(code)]


__all__ = ["PARAMETER", "GroupHealth", "Spread", "StepHealth", "spread_of", "tensor_rows"]
