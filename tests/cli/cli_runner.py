"""Run ``gradviz ARGS`` in this process, as the console script would, and capture what it
prints: most CLI tests are about what a command says and returns, not about the process,
and a fresh interpreter costs a torch import (2-3 s) per call. test_front_door.py keeps the
real-process checks (entry point, exit codes, no traceback).

Import with ``from cli_runner import run_cli`` (pytest puts this folder on sys.path).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

from gradviz.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """``main(args)`` with stdout and stderr captured; returns what ``subprocess.run``
    would (``returncode``, ``stdout``, ``stderr``), so a test reads the same either way.
    An uncaught exception fails the test with its traceback, as it should: the real
    command would have printed one."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors; read as the interpreter would
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:  # a message: printed to stderr, exit status 1
                print(exc.code, file=sys.stderr)
                code = 1
    return subprocess.CompletedProcess(
        [sys.executable, "-m", "gradviz", *args], code, out.getvalue(), err.getvalue()
    )
