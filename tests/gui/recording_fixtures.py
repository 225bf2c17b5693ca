"""Recordings made in the tests: a small watched model, optionally NaN at one step, written
in this process (complete recordings) or by a subprocess (a writer still running, or one that
dies).

Import with ``from recording_fixtures import ...`` (pytest puts this folder on sys.path).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path


def watch_small_model(
    path: str | Path,
    steps: int,
    delay_s: float = 0.0,
    nan_at: int = -1,
    die: bool = False,
    gate: str | Path | None = None,
) -> None:
    """Watch a small model (4 -> 8 -> 1, and its hidden (16, 8) activations) for ``steps``
    steps, ``delay_s`` apart; the loss is NaN at step ``nan_at``. With ``gate``, stop after
    two steps until that file exists; with ``die``, hang before close() until killed."""
    import time

    import torch
    from torch import nn

    import gradviz

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    rec = gradviz.watch(model, path, every=1)
    for step in range(steps):
        h = rec.tensor("hidden", model[0](x))
        loss = ((model[2](model[1](h)) - y) ** 2).mean()
        if step == nan_at:
            loss = loss * float("nan")
        opt.zero_grad()
        loss.backward()
        rec.log(loss=loss)
        opt.step()
        time.sleep(delay_s)
        while gate and step == 1 and not os.path.exists(gate):
            time.sleep(0.02)  # two steps written: wait until the test lets the rest come
    if die:
        threading.Event().wait()  # hangs until killed: the recording is never marked complete
    rec.close()


# The writer process runs the same function (this folder and the repository on its path).
WRITER = textwrap.dedent(
    """
    import sys
    from recording_fixtures import watch_small_model
    path, steps, delay, nan_at, die = sys.argv[1:6]
    gate = sys.argv[6] if len(sys.argv) > 6 else None
    watch_small_model(path, int(steps), float(delay), int(nan_at), die == "die", gate)
    """
)

HERE = Path(__file__).resolve().parent


def write_recording(path: Path, steps: int = 12, nan_at: int = -1) -> Path:
    """A complete watch recording of ``steps`` steps, written here (torch in this process, a
    second or less; a fresh writer process pays the torch import, 5-8 s). The global RNG is
    left as it was, so no other test sees the seed."""
    import torch

    with torch.random.fork_rng():
        watch_small_model(path, steps, nan_at=nan_at)
    return path


def run_writer(
    path: Path,
    steps: int,
    delay_s: float,
    nan_at: int = -1,
    die: bool = False,
    gate: Path | None = None,
) -> subprocess.Popen:
    """Start a subprocess that watches a small model for ``steps`` steps, ``delay_s`` apart;
    with ``gate``, it stops after two steps until that file exists (so a test sees a
    recording still being written however busy the machine is)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), str(HERE)])}
    args = [str(path), str(steps), str(delay_s), str(nan_at), "die" if die else "close"]
    args += [str(gate)] if gate is not None else []
    return subprocess.Popen([sys.executable, "-c", WRITER, *args], env=env)


class WriterThread(threading.Thread):
    """``target(*args)`` on a thread of this process, as a training loop beside the app: a
    fresh writer process would pay the torch import (several seconds) for a follower that
    only reads the disk. ``error`` holds what it raised; the global RNG is left as it was.
    Tests of what dies with a writer's process use ``run_writer``."""

    def __init__(self, target, *args) -> None:
        super().__init__(name="test-writer", daemon=True)
        self._call = (target, args)
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        import torch

        target, args = self._call
        try:
            with torch.random.fork_rng():
                target(*args)
        except BaseException as exc:  # reported by finish(), on the test's thread
            self.error = exc

    def finish(self, timeout_s: float = 60.0) -> None:
        """Wait for the writer to end; raise what it raised."""
        self.join(timeout_s)
        assert not self.is_alive(), "the writer thread did not end"
        if self.error is not None:
            raise self.error


def write_fit_recording(path: Path, steps: int = 8) -> Path:
    """A lab recording (gradviz fit --record) of a small run."""
    from gradviz.cli import main

    code = main(["fit", "--target", "gaussian", "--n", "10", "--dim", "2", "--steps", str(steps),
                 "--method", "safe", "--record", str(path)])  # fmt: skip
    assert code == 0
    return path


def open_and_wait(qtbot, lab, path, timeout_ms: int = 60_000):
    """Open the recording at ``path`` in ``lab`` (a controller) and wait until it is shown
    (read off the GUI thread: generous on a busy machine); returns what was shown."""
    shown = []
    lab.recordings.shown.connect(shown.append)
    assert lab.recordings.open(str(path))
    qtbot.waitUntil(lambda: bool(shown), timeout=timeout_ms)
    return shown[-1]
