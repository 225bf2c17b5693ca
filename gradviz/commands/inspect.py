"""``gradviz inspect PATH [--trust] [--activation NAME] [--json]``: describe a model file.

Nothing from the file runs unless it is a TorchScript or .pt2 program and ``--trust`` is
given. With ``--json`` stdout is one JSON object on one line (see ModelInfo.to_dict, and
``Reader.describe`` for a recording) and nothing else.
"""

from __future__ import annotations

from pathlib import Path

from gradviz.commands.output import print_json
from gradviz.core.modelio import ModelInfo, inspect_model


def run(args) -> int:
    if Path(args.path).is_dir():  # a recording is a directory; model files are files
        return _inspect_recording(args)
    info = inspect_model(
        args.path,
        trust=args.trust,
        activation=args.activation,
        assume_sequential=args.assume_sequential,
    )
    if args.json:
        print_json(info.to_dict())
    else:
        print("\n".join(summary_lines(info, trusted=args.trust)))
    return 0


def summary_lines(info: ModelInfo, trusted: bool = False) -> list[str]:
    """A readable description, one fact per line."""
    width = lambda d: "unknown" if d is None else str(d)  # noqa: E731
    lines = [
        f"{info.path}: {info.format}, {info.size_bytes:,} bytes",
        f"  runnable: {'yes' if info.runnable else 'no'}"
        f"{' (with --trust)' if info.needs_trust and info.runnable else ''}",
        f"  input width: {width(info.in_dim)}, output width: {width(info.out_dim)}",
        f"  parameters: {info.parameters:,}",
    ]
    if info.spec:
        lines.append(f"  network: {info.spec}")
    if info.classes:
        lines.append(f"  classes named in the file: {', '.join(info.classes)}")
    if info.layers:
        lines.append("  layers:")
        for layer in info.layers:
            shapes = ", ".join(f"{k} {tuple(v)}" for k, v in layer.shapes.items())
            lines.append(f"    {layer.name}: {layer.kind} ({shapes})")
    if info.nonfinite_weights:
        lines.append(f"  NaN or Inf in: {', '.join(info.nonfinite_weights)}")
    if info.needs_trust and not trusted:
        lines.append(
            "  this format can run code from the file when loaded; it opens only with --trust"
        )
    if info.not_runnable_reason:
        lines.append(f"  not runnable: {info.not_runnable_reason}")
    for sentence in info.assumptions:
        lines.append(f"  assumed: {sentence}")
    return lines


def _inspect_recording(args) -> int:
    from gradviz.core.record.reader import Reader  # raises a one-sentence error if not one

    summary = Reader(args.path).describe()
    if args.json:
        print_json(summary)
    else:
        print("\n".join(recording_lines(summary)))
    return 0


def recording_lines(summary: dict) -> list[str]:
    """A recording described for people, one fact per line (``Reader.describe``'s)."""
    first = summary["first_nonfinite"]
    lines = [
        f"{summary['path']}: gradviz recording ({summary['source']}), {summary['bytes']:,} bytes",
        f"  steps recorded: {summary['steps']}, last step: {summary['last_step']}",
        f"  complete: {'yes' if summary['complete'] else 'no (the writer was cut off)'}",
        f"  ranks: {', '.join(map(str, summary['ranks']))}",
        f"  tensors: {', '.join(summary['tensors'])}",
    ]
    if first is None:
        lines.append("  first non-finite gradient: none")
    else:
        lines.append(
            f"  first non-finite gradient: step {first['step']}, {first['tensor']}"
            f" (rank {first['rank']}), {first['kind']} at flat index {first['index']}"
        )
    return lines
