"""The graph of a watch recording at one recorded step: the module tree of the recorded
tensors' names (a recording holds no graph yet, so no edges), every parameter node carrying
its gradient health at that step and every module node the health of all tensors inside it.

``health`` is ``{"step", "worst", "counts": {"finite", "zero", "NaN", "+Inf", "-Inf"},
"grad_norm"}``; ``worst`` is the most alarming category present (core.health's order), and
``grad_norm`` is null where it is not finite (JSON has no NaN).
"""

from __future__ import annotations

import math
import os
from dataclasses import replace

import numpy as np

from gradviz.core.errors import GradvizError
from gradviz.core.graph.model import MODULE, PARAMETER, RECORDING, ModelGraph
from gradviz.core.graph.names import graph_from_names
from gradviz.core.health import HEALTH_LABELS, Health

RECORDING_LABEL = (
    "structure from the recording's tensor names: the order and the connections are not recorded"
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
    own = {}
    for name in names:
        series = stream.tensor(name)
        own[name] = (series.counts[row].astype(np.int64), float(series.grad_norm[row]))
    base = graph_from_names(names)
    totals: dict[str, list] = {}  # module id -> [counts, sum of squared norms]
    nodes = []
    for node in base.nodes:
        if node.kind != PARAMETER:
            continue
        name = f"{node.module}.{node.name}" if node.module else node.name
        counts, norm = own[name]
        ancestor = node.parent
        while ancestor is not None:
            total = totals.setdefault(ancestor, [np.zeros(5, np.int64), 0.0])
            total[0] += counts
            total[1] += norm * norm
            ancestor = base.node(ancestor).parent
    for node in base.nodes:
        if node.kind == PARAMETER:
            name = f"{node.module}.{node.name}" if node.module else node.name
            counts, norm = own[name]
        elif node.kind == MODULE and node.id in totals:
            counts, squares = totals[node.id]
            norm = math.sqrt(squares)
        else:
            nodes.append(node)
            continue
        nodes.append(replace(node, health=_health(step, counts, norm)))
    notes = (RECORDING_LABEL, f"Health at step {step:,}.")
    return ModelGraph(tuple(nodes), (), RECORDING, notes)


def _health(step: int, counts: np.ndarray, norm: float) -> dict:
    present = [code for code, count in zip(_COLUMNS, counts) if count > 0]
    worst = max(present) if present else Health.FINITE
    return {
        "step": int(step),
        "worst": HEALTH_LABELS[worst],
        "counts": {HEALTH_LABELS[code]: int(c) for code, c in zip(_COLUMNS, counts)},
        "grad_norm": norm if math.isfinite(norm) else None,
    }
