"""Benchmark suites behind ``gradviz bench``.

Each suite is a module ``gradviz.bench.<name>`` with ``run(repeats, quick, emit) -> dict``:
it measures, prints human-readable lines through ``emit`` and returns JSON-ready results.
``gradviz.bench.harness`` holds the shared timing and table code.
"""
