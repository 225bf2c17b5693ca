"""Benchmark suites behind ``gradviz bench``.

Each suite is a module ``gradviz.bench.<name>`` with ``run(repeats, quick, emit) -> dict``:
it measures, prints human-readable lines through ``emit`` and returns JSON-ready results.
``gradviz.bench.harness`` holds the shared timing and table code.
"""

#: The suites, each a module of this package (``gradviz bench --suite`` offers them; this
#: package's import is all the command line's start pays for the list).
SUITES = (
    "distances", "jacobians", "gui", "watch", "ddp", "memory", "origin", "fit_loop", "soak", "cuda",
)  # fmt: skip
