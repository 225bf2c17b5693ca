"""Run a script as two gloo ranks in fresh processes (torch.distributed needs one process per
rank), and never leave one behind.

Import with ``from gloo_ranks import run_two_ranks`` (pytest puts this folder on sys.path).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: A hang guard, not a speed goal: two torch imports and a gloo rendezvous take a few
#: seconds idle, and minutes on a machine that is busy with other work.
HANG_GUARD_S = 600


def run_two_ranks(script: str, init: str, *args: str) -> None:
    """Run ``script`` as ranks 0 and 1 (``sys.argv[1:] = [rank, init, *args]``) and wait
    for both; fail with their error output if either fails. When one rank fails the other
    would wait for it in gloo's rendezvous for many minutes, so it is killed at once, and
    no process outlives the test."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryFile("w+") as err0, tempfile.TemporaryFile("w+") as err1:
        ranks = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(rank), init, *args], env=env, stderr=err
            )
            for rank, err in ((0, err0), (1, err1))
        ]
        try:
            finished = _wait_for_both(ranks)
        finally:
            for rank in ranks:
                if rank.poll() is None:
                    rank.kill()
                rank.wait()
        codes = [rank.returncode for rank in ranks]
        if not finished or codes != [0, 0]:
            texts = []
            for err in (err0, err1):
                err.seek(0)
                texts.append(err.read()[-4000:])
            what = "exited with" if finished else f"were still running after {HANG_GUARD_S} s:"
            raise AssertionError(f"ranks {what} {codes}:\n" + "\n".join(texts))


def _wait_for_both(ranks: list[subprocess.Popen]) -> bool:
    """True when both have exited or one has failed; False at the hang guard."""
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        codes = [rank.poll() for rank in ranks]
        if all(code is not None for code in codes) or any(code for code in codes):
            return True
        time.sleep(0.05)
    return False


def run_two_ranks_to_their_end(script: str, init: str, *args: str) -> tuple[list[int], list[str]]:
    """Run ``script`` as ranks 0 and 1 as ``run_two_ranks`` does, for a run in which a rank
    is meant to die: both are waited for (none is killed because the other failed) until
    the hang guard, and their exit codes and error output are returned."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryFile("w+") as err0, tempfile.TemporaryFile("w+") as err1:
        ranks = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(rank), init, *args], env=env, stderr=err
            )
            for rank, err in ((0, err0), (1, err1))
        ]
        try:
            deadline = time.monotonic() + HANG_GUARD_S
            while time.monotonic() < deadline and any(r.poll() is None for r in ranks):
                time.sleep(0.05)
        finally:
            for rank in ranks:
                if rank.poll() is None:
                    rank.kill()
                rank.wait()
        texts = []
        for err in (err0, err1):
            err.seek(0)
            texts.append(err.read()[-4000:])
        return [rank.returncode for rank in ranks], texts
