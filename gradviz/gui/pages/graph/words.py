"""What the Graph page says: its header (the graph drawn, what is collapsed, the
recording's damage, where the first non-finite value began) and one line per node (what it
is, its tensors' health at the step shown, whether the first non-finite value began or
spread there). Plain text from plain data (no Qt)."""

from __future__ import annotations

from gradviz.core.graph.collapse import TREE_WIDTH
from gradviz.core.graph.layout import drawable
from gradviz.core.graph.model import ModelGraph
from gradviz.gui.pages.graph.health import GroupHealth, Spread, worst_label
from gradviz.gui.widgets.panel import format_value


def header_text(
    where: str,
    graph: ModelGraph,
    shown: ModelGraph,
    folded: frozenset,
    tree_depth: int | None,
    node_limit: int,
    damage: str,
    spread: Spread | None,
) -> str:
    """The header over ``shown`` (``graph`` with the modules ``folded`` collapsed)."""
    parts = [
        f"{where}: graph from {graph.source}, {len(shown.nodes):,} nodes drawn, "
        f"{len(shown.edges):,} edges of data flow."
    ]
    parts += [as_sentence(note) for note in graph.notes]  # notes are fragments
    if graph.collapsed is not None:
        parts.append(graph.collapsed.sentence)
    if folded:
        parts.append(_folded_text(graph, folded, tree_depth, node_limit))
    if damage:
        parts.append(damage)  # its lost steps are drawn "lost": say which
    if spread is not None:
        if spread.tensor:
            began = f"was held by parameter '{spread.tensor}' as the forward ran"
        elif spread.phase == "input":
            began = "came in with the model's input"
        else:
            began = f"began in the {spread.phase} of module '{spread.module}'"
        parts.append(
            f"The first non-finite value {began} at step {spread.step:,} (red); "
            "outlined: where it spread."
        )
    return " ".join(p if p.endswith(".") else f"{p}." for p in parts)


def _folded_text(
    graph: ModelGraph, folded: frozenset, tree_depth: int | None, node_limit: int
) -> str:
    count = f"{len(folded):,} module{'s' if len(folded) != 1 else ''}"
    total = len(drawable(graph).nodes)
    if tree_depth is not None:
        return (
            f"{count} collapsed below depth {tree_depth} so that no level of the tree is "
            f"wider than {TREE_WIDTH} nodes ({total:,} nodes in all): double-click a module "
            "to expand it."
        )
    if total > node_limit:
        return (
            f"{count} collapsed ({total:,} nodes in all, more than {node_limit} drawn at "
            "once): double-click a module to expand it."
        )
    return f"{count} collapsed: double-click one to expand it."


def node_line(
    shown: ModelGraph,
    node_id: str,
    health: GroupHealth | None,
    step: int | None,
    recorded: bool,
    marks: dict[str, frozenset],
) -> str:
    """One line about drawn node ``node_id``: what it is, and with ``health`` its tensors'
    health at ``step`` (``recorded``: a recording is shown, so no health means none was
    recorded)."""
    node = shown.node(node_id)
    text = f"{node.module or node.name} ({node.type or node.kind})"
    if node.shape:
        text += f", output {' x '.join(str(d) for d in node.shape)}"
    if node.hidden:
        text += f", stands for {node.hidden:,} nodes (double-click to expand)"
    if health is not None:
        finite, zero, nan, pinf, ninf = health.counts
        norm = health.norm_words(format_value)
        text += (
            f"; step {step}: {worst_label(health.worst)}, |grad| {norm}"
            f"; finite {finite:,}, zero {zero:,}, NaN {nan:,}, +Inf {pinf:,}, -Inf {ninf:,}"
        )
        if health.lost:
            text += f"; {health.lost:,} tensor{'' if health.lost == 1 else 's'} lost at this step"
    elif recorded:
        text += "; no recorded gradients"
    if node_id in marks["origin"]:
        text += "; the first non-finite value began here"
    elif node_id in marks["after"]:
        text += "; the first non-finite value spread here"
    return text


def graph_readouts(
    shown: ModelGraph | None,
    source: str | None,
    step: int | None,
    now: dict[str, GroupHealth],
    marks: dict[str, frozenset],
) -> dict:
    """What the page shows, as data: the graph's source (None before one is drawn), the
    recorded step whose health colours it (None for a model file), the drawn node count,
    and per drawn node its health category as coloured ("lost" where every tensor's record
    is lost, None without a recording) and whether it is marked as the origin of the first
    non-finite value or as reached by it."""
    nodes = {}
    for node in shown.nodes if shown is not None else ():
        health = now.get(node.id)
        nodes[node.id] = {
            "health": None if health is None else worst_label(health.worst),
            "origin": node.id in marks["origin"],
            "spread": node.id in marks["after"],
        }
    return {"source": source, "step": step, "node_count": len(nodes), "nodes": nodes}


def as_sentence(note: str) -> str:
    """A graph's note (a lowercase fragment, as the JSON gives it) as a sentence."""
    note = note.strip()
    return note[:1].upper() + note[1:] + ("" if note.endswith(".") else ".")
