"""``gradviz inspect PATH [--trust] [--activation NAME] [--json]``: describe a model file.

Nothing from the file runs unless it is a TorchScript or .pt2 program and ``--trust`` is
given. With ``--json`` the last line of stdout is one JSON object (see ModelInfo.to_dict).
"""

from __future__ import annotations

import json
from pathlib import Path

from gradviz.core.modelio import ModelInfo, inspect_model


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
    )
    for line in summary_lines(info, trusted=args.trust):
        print(line)
    if args.json:
        print(json.dumps(info.to_dict(), separators=(",", ":")))
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
    first = summary["first_nonfinite"]
    print(f"{summary['path']}: gradviz recording ({summary['source']}), {summary['bytes']:,} bytes")
    print(f"  steps recorded: {summary['steps']}, last step: {summary['last_step']}")
    print(f"  complete: {'yes' if summary['complete'] else 'no (the writer was cut off)'}")
    print(f"  ranks: {', '.join(map(str, summary['ranks']))}")
    print(f"  tensors: {', '.join(summary['tensors'])}")
    if first is None:
        print("  first non-finite gradient: none")
    else:
        print(
            f"  first non-finite gradient: step {first['step']}, {first['tensor']}"
            f" (rank {first['rank']}), {first['kind']} at flat index {first['index']}"
        )
    if args.json:
        print(json.dumps(summary, separators=(",", ":")))
    return 0
