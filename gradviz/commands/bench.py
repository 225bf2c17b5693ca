"""`gradviz bench`: speed figures, each a ratio against a named baseline.

Each suite is the module ``gradviz.bench.<suite>`` with ``run(repeats, quick, emit)``; its
results carry its printed tables as data (``"tables"``). ``--out FILE.json`` saves them with
the machine, its load, the versions and the command line (``gradviz.bench.results``);
``--json`` prints the same document on stdout.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from gradviz.bench import SUITES
from gradviz.bench.results import checked_out_path, finished, started, write
from gradviz.commands.output import print_json
from gradviz.core.common.errors import GradvizError


def run(args) -> int:
    if args.repeats < 1:
        raise GradvizError(f"--repeats must be at least 1, got {args.repeats}.")
    chosen = SUITES if args.suite == "all" else (args.suite,)
    out = None if getattr(args, "out", None) is None else checked_out_path(args.out)
    head = started(getattr(args, "argv", None) or sys.argv[1:])
    # With --json, stdout carries only the JSON object; the tables go to stderr.
    stream = sys.stderr if args.json else sys.stdout

    def emit(line: str) -> None:
        print(line, file=stream, flush=True)

    results: dict[str, dict] = {}
    for name in chosen:
        module = _load_suite(name, required=args.suite != "all")
        if module is None:
            emit(f"{name}: skipped (this suite is not available in this version)")
            results[name] = {"skipped": "not available in this version", "tables": []}
            continue
        results[name] = module.run(args.repeats, args.quick, emit)
        if "tables" not in results[name]:
            emit(f"{name}: this suite returns no tables as data; its figures are saved alone")
            results[name]["tables"] = []
        emit("")
    document = finished(head, args.repeats, args.quick, results)
    if out is not None:
        write(out, document)
        emit(f"wrote the results to {out}")
    if args.json:
        print_json(document)
    return 0


def _load_suite(name: str, required: bool) -> ModuleType | None:
    """The suite's module; None (or, if ``required``, an error) when it does not exist."""
    module_name = f"gradviz.bench.{name}"
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:  # the suite exists but a module it needs is missing
            raise
        if required:
            raise GradvizError(
                f"The {name!r} benchmark suite is not available in this version of gradviz; "
                f"run 'gradviz bench --suite all' to measure the suites that are."
            ) from None
        return None
