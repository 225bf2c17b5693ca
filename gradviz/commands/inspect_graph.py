"""``gradviz inspect MODEL --graph [--json]``, ``gradviz inspect RECORDING --graph [--json]
[--step K]``: the model as a graph (a recording's coloured by its health at step K).

Prints what the graph holds (where it came from, how many nodes of each kind, the notes a
reader must see); with ``--json`` the last line of stdout is the graph as one compact JSON
object, ``{"nodes": [...], "edges": [[from, to], ...], "source": ..., "notes": [...],
"collapsed": ...}`` (see ModelGraph.to_dict). ``--model-class``, ``--model-args``,
``--input-shape`` and ``--trust`` are those of ``gradviz jacobian``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from gradviz.commands.output import print_json, say
from gradviz.core.common.errors import GradvizError
from gradviz.core.graph.model import KINDS, ModelGraph


def add_arguments(parser) -> None:
    """The options ``inspect`` gains for graphs (the model-class ones are jacobian's)."""
    parser.add_argument(
        "--graph",
        action="store_true",
        help="describe the model as a graph of modules and operations (--json: the graph)",
    )
    parser.add_argument(
        "--step",
        type=int,
        metavar="K",
        help="with --graph on a recording: the recorded step whose health the graph carries "
        "(default: the last)",
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
        or args.step is not None
    )


def run(args) -> int:
    if not args.graph:
        raise GradvizError(
            "--model-class, --model-args, --input-shape and --step apply to inspect --graph only."
        )
    if Path(args.path).is_dir():  # a recording is a directory; model files are files
        return _print(args, _recording_graph(args))
    if args.step is not None:
        raise GradvizError("--step picks a step of a recording; a model file has none.")
    if args.model_args is not None and args.model_class is None:
        raise GradvizError("--model-args gives the arguments of --model-class; give both.")
    from gradviz.commands.jacobian import _input_shape  # the same parsing and message
    from gradviz.core.graph.sources import graph_of_file
    from gradviz.core.settings.program_limits import ProgramLimits
    from gradviz.core.settings.table import from_arguments

    graph = graph_of_file(
        args.path,
        trust=args.trust,
        model_class=args.model_class,
        model_args=args.model_args,
        input_shape=_input_shape(args.input_shape),
        limits=from_arguments(ProgramLimits, args),
    )
    return _print(args, graph)


def _recording_graph(args) -> ModelGraph:
    if args.model_class is not None or args.input_shape is not None:
        raise GradvizError("--model-class and --input-shape apply to model files, not recordings.")
    from gradviz.core.graph.collapse import limit_nodes
    from gradviz.core.record.recorded_graph import graph_of_recording

    return limit_nodes(graph_of_recording(args.path, step=args.step))


def _print(args, graph: ModelGraph) -> int:
    """The summary in words, or with ``--json`` the graph as one JSON document alone."""
    for line in summary_lines(args.path, graph):
        say(args, line)
    if args.json:
        print_json(graph.to_dict())
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
    unhealthy = [
        f"{n.module}.{n.name}" if n.module else n.name
        for n in graph.nodes
        if n.kind == "parameter" and n.health is not None and n.health["worst"] != "finite"
    ]
    if unhealthy:
        more = f" and {len(unhealthy) - 10:,} more" if len(unhealthy) > 10 else ""
        lines.append(f"  gradients not finite or zero: {', '.join(unhealthy[:10])}{more}")
    if graph.collapsed is not None:
        lines.append(f"  collapsed: {graph.collapsed.sentence}")
    return lines
