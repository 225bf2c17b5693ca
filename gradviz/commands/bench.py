"""`gradviz bench`: speed figures, each a ratio against a named baseline.

Each suite is the module ``gradviz.bench.<suite>`` with ``run(repeats, quick, emit)``.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from gradviz.commands.output import print_json
from gradviz.core.errors import GradvizError

SUITES = ("distances", "jacobians", "gui", "watch", "ddp", "memory", "origin", "fit_loop", "soak")


def run(args) -> int:
    if args.repeats < 1:
        raise GradvizError(f"--repeats must be at least 1, got {args.repeats}.")
    chosen = SUITES if args.suite == "all" else (args.suite,)
    # With --json, stdout carries only the JSON object; the tables go to stderr.
    out = sys.stderr if args.json else sys.stdout

    def emit(line: str) -> None:
        print(line, file=out, flush=True)

    results: dict[str, dict] = {}
    for name in chosen:
        module = _load_suite(name, required=args.suite != "all")
        if module is None:
            emit(f"{name}: skipped (this suite is not available in this version)")
            results[name] = {"skipped": "not available in this version"}
            continue
        results[name] = module.run(args.repeats, args.quick, emit)
        emit("")
    if args.json:
        summary = {"repeats": args.repeats, "quick": args.quick, "suites": results}
        print_json(summary)
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
