"""``gradviz inspect PATH [--trust] [--activation NAME] [--json]``: describe a model file.

Nothing from the file runs unless it is a TorchScript or .pt2 program and ``--trust`` is
given. With ``--json`` stdout is one JSON object on one line (see ModelInfo.to_dict, and
``Reader.describe`` for a recording) and nothing else.
"""

from __future__ import annotations

from pathlib import Path

from gradviz.commands.output import print_json
from gradviz.core.common.health import LOST
from gradviz.core.modelio import ModelInfo, inspect_model
from gradviz.core.modelio.limits import escaped
from gradviz.core.settings.program_limits import ProgramLimits
from gradviz.core.settings.table import from_arguments


def run(args) -> int:
    from gradviz.commands import inspect_graph

    if inspect_graph.wanted(args):  # --graph and its options: the graph command's own module
        return inspect_graph.run(args)
    if Path(args.path).is_dir():  # a recording is a directory; model files are files
        return _inspect_recording(args)
    info = inspect_model(
        args.path,
        trust=args.trust,
        activation=args.activation,
        assume_sequential=args.assume_sequential,
        limits=from_arguments(ProgramLimits, args),
    )
    if args.json:
        print_json(info.to_dict())
    else:
        print("\n".join(summary_lines(info, trusted=args.trust)))
    return 0


def summary_lines(info: ModelInfo, trusted: bool = False) -> list[str]:
    """A readable description, one fact per line (names from the file escaped, so that a
    newline in one cannot start a line of its own)."""
    lines = [
        f"{escaped(info.path)}: {info.format}, {info.size_bytes:,} bytes",
        f"  runnable: {'yes' if info.runnable else 'no'}"
        f"{' (with --trust)' if info.needs_trust and info.runnable else ''}",
        f"  input width: {info.width_words('in', 'unknown')}, "
        f"output width: {info.width_words('out', 'unknown')}",
        f"  parameters: {info.parameters:,}",
    ]
    if info.spec:
        lines.append(f"  network: {info.spec}")
    if info.classes:
        lines.append(f"  classes named in the file: {escaped(', '.join(info.classes))}")
    if info.runs_as:
        lines.append(f"  runs as: {escaped(info.runs_as)}")
    if info.modules:
        lines.append("  module tree:")
        for name, cls in info.modules:
            depth = 0 if name == "(top)" else name.count(".") + 1
            lines.append(f"    {'  ' * depth}{escaped(name)}: {escaped(cls)}")
    if info.layers:
        lines.append("  layers:")
        for layer in info.layers:
            shapes = ", ".join(f"{k} {tuple(v)}" for k, v in layer.shapes.items())
            lines.append(f"    {escaped(layer.name)}: {escaped(layer.kind)} ({shapes})")
    if info.nonfinite_weights:
        lines.append(f"  NaN or Inf in: {escaped(', '.join(info.nonfinite_weights))}")
    if info.needs_trust and not trusted and info.modules:
        lines.append("  it imports installed classes outside torch.nn; it opens only with --trust")
    elif info.needs_trust and not trusted:
        lines.append(
            "  this format can run code from the file when loaded; it opens only with --trust"
        )
    if info.not_runnable_reason:
        lines.append(f"  not runnable: {info.not_runnable_reason}")
    for sentence in info.assumptions:
        lines.append(f"  assumed: {sentence}")
    return lines


def _inspect_recording(args) -> int:
    from gradviz.core.common.errors import GradvizError
    from gradviz.core.record.reader import Reader  # raises a one-sentence error if not one

    reader = Reader(args.path)
    summary = reader.summary().to_dict()
    if not summary["ranks"] and summary["damaged"]:
        reason = summary["damaged"][0]["reason"]
        raise GradvizError(f"{args.path!r} is a gradviz recording that cannot be read: {reason}")
    if args.json:
        print_json(summary)
    else:
        print("\n".join(recording_lines(summary)))
    return EXIT_DAMAGED if summary["damaged"] or summary["ranks_ending_early"] else 0


#: ``inspect`` of a recording that opens but has lost data, or one of whose ranks' records
#: end before another's last step (1; unreadable ones exit 2).
EXIT_DAMAGED = 1


def recording_lines(summary: dict) -> list[str]:
    """A recording described for people, one fact per line (``Reader.describe``'s); with
    several ranks each rank's counts on a line of its own, never mixed."""
    per_rank = summary["per_rank"]
    lines = [
        f"{summary['path']}: gradviz recording ({summary['source']}), {summary['bytes']:,} bytes"
    ]
    if len(per_rank) == 1:
        only = per_rank[0]
        lines.append(f"  steps recorded: {only['steps']}, last step: {only['last_step']}")
    if summary["damaged"]:
        complete = "no (damaged: data is missing, see below)"
    elif summary["ranks_ending_early"]:
        complete = f"no ({summary['ranks_known']})"
    elif summary["complete"]:
        complete = "yes"
    else:
        complete = "no (the writer was cut off)"
    lines += [
        f"  complete: {complete}",
        f"  ranks: {', '.join(map(str, summary['ranks'])) or _NO_RANK}",
        f"  tensors: {', '.join(summary['tensors']) or 'none'}",
        f"  scalars: {', '.join(summary['scalars']) or 'none'}",
        *_skipped_lines(summary["skipped_steps"]),
        f"  first non-finite gradient: {_first_words(summary['first_nonfinite'])}",
    ]
    origin = (summary["first_nonfinite"] or {}).get("origin")
    unknown = (summary["first_nonfinite"] or {}).get("origin_unknown")
    if origin:  # watch(origin=True) recorded where the first non-finite value started
        lines.append(f"  where it started: {origin['cause']}")
        if origin.get("how") in _HOW:
            lines.append(f"  how it was found: {_HOW[origin['how']]}")
    elif unknown:  # it looked, and says why it could not tell
        lines.append(f"  where it started: not known: {unknown}")
    if len(per_rank) > 1:
        for r in per_rank:
            state = "complete" if r["complete"] else "not complete"
            lines.append(
                f"  rank {r['rank']}: {r['steps']} steps recorded, last step {r['last_step']}, "
                f"{state}; first non-finite gradient: {_first_words(r['first_nonfinite'])}"
            )
    for r in summary["ranks_ending_early"]:
        lines.append(f"  ends early: {r['reason']}")
    for d in summary["damaged"]:
        steps = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in d["missing_steps"])
        lost = f" steps {steps} {LOST};" if steps else ""
        lines.append(f"  damaged: rank {d['rank']} {d['what']}:{lost} {d['reason']}")
    return lines


#: How a recorded origin was established, in words (``origin["how"]``).
_HOW = {
    "replayed": "the step was run again under the tracer, which saw the operation",
    "module_boundaries": "from which module's output, or gradient reaching it, was first "
    "non-finite (the operation and line are not known)",
}


def _skipped_lines(skipped: list[int]) -> list[str]:
    """GradScaler's skipped steps, at most ten named (none: no line)."""
    if not skipped:
        return []
    more = ", ..." if len(skipped) > 10 else ""
    return [
        f"  skipped by GradScaler (scaled gradients overflowed, scale lowered): "
        f"{len(skipped)} step(s): {', '.join(map(str, skipped[:10]))}{more}"
    ]


def _first_words(first: dict | None) -> str:
    """A first non-finite gradient in words; the recording's names its rank(s), a rank's
    own line does not."""
    if first is None:
        return "none"
    if first.get("not_known"):  # a rank's records end before it: nothing is claimed
        seen = first.get("seen")
        there = "none" if seen is None else _first_words(seen)
        return f"not known: {first['not_known']} (on the ranks known there: {there})"
    rank = f" ({_ranks_text(first['ranks'])})" if first.get("ranks") else ""
    return (
        f"step {first['step']}, {first['tensor']}{rank}, {first['kind']} at flat index "
        f"{first['index']}"
    )


_NO_RANK = "none (its writer has only just started, or its rank folders are gone)"


def _ranks_text(ranks: list[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return f"ranks {', '.join(map(str, ranks))}"
