"""``gradviz inspect MODEL --graph [--json]``: the model as a graph.

Prints what the graph holds (where it came from, how many nodes of each kind, the notes a
reader must see); with ``--json`` the last line of stdout is the graph as one compact JSON
object, ``{"nodes": [...], "edges": [[from, to], ...], "source": ..., "notes": [...],
"collapsed": ...}`` (see ModelGraph.to_dict). ``--model-class``, ``--model-args``,
``--input-shape`` and ``--trust`` are those of ``gradviz jacobian``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from gradviz.core.errors import GradvizError
from gradviz.core.graph.model import KINDS, ModelGraph


def add_arguments(parser) -> None:
    """The options ``inspect`` gains for graphs (the model-class ones are jacobian's)."""
    parser.add_argument(
        "--graph",
        action="store_true",
        help="describe the model as a graph of modules and operations (--json: the graph)",
    )
    parser.add_argument(
        "--input-shape",
        metavar="S",
        help="with --model-class: shape of one input to trace the model on, e.g. 3,32,32",
    )


def wanted(args) -> bool:
    """Whether ``inspect`` hands this call to the graph command."""
    return bool(
        args.graph
        or args.model_class is not None
        or args.model_args is not None
        or args.input_shape is not None
    )


def run(args) -> int:
    if not args.graph:
        raise GradvizError(
            "--model-class, --model-args and --input-shape apply to inspect --graph only."
        )
    if Path(args.path).is_dir():
        raise GradvizError(
            f"{args.path} is a directory; the graph of a recording is not available yet, "
            "only that of a model file."
        )
    if args.model_args is not None and args.model_class is None:
        raise GradvizError("--model-args gives the arguments of --model-class; give both.")
    from gradviz.commands.jacobian import _input_shape  # the same parsing and message
    from gradviz.core.graph.sources import graph_of_file

    graph = graph_of_file(
        args.path,
        trust=args.trust,
        model_class=args.model_class,
        model_args=args.model_args,
        input_shape=_input_shape(args.input_shape),
    )
    for line in summary_lines(args.path, graph):
        print(line)
    if args.json:
        print(json.dumps(graph.to_dict(), separators=(",", ":")))
    return 0


def summary_lines(path: str, graph: ModelGraph) -> list[str]:
    """One fact per line: source, counts by kind, edges, notes, collapse."""
    counts = Counter(node.kind for node in graph.nodes)
    kinds = ", ".join(f"{counts[kind]:,} {kind}" for kind in KINDS if counts[kind])
    lines = [
        f"{path}: graph from {graph.source}",
        f"  nodes: {len(graph.nodes):,} ({kinds or 'none'})",
        f"  edges (data flow): {len(graph.edges):,}",
    ]
    lines.extend(f"  note: {sentence}" for sentence in graph.notes)
    if graph.collapsed is not None:
        lines.append(f"  collapsed: {graph.collapsed.sentence}")
    return lines
