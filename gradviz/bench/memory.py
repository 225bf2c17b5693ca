"""Memory: the `memory` suite of `gradviz bench`.

Peak RSS, side by side at N = 5000, 10000 and 20000 (safe, float32, CPU, the same run
settings), each measured in a fresh child process (``os.wait4`` reports its peak RSS):

- ``headless``: ``gradviz fit`` taking a few steps;
- ``snapshots``: the same run stepped the way the app's worker steps it (every step
  captured, a display-sized Snapshot after each, ``max_display`` = 2048), headless;
- ``app``: ``gradviz gui --screenshot ... --run-for S`` (offscreen) on an experiment with
  those settings: the whole app as it stands.

Targets: app <= headless + 1 GB, and the estimate (``core.memory``) within a third of the
headless peak. The run of N = 20000 needs about 8 GB and a few minutes; ``--quick`` measures
N = 1000 and 2000 only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gradviz.core import memory
from gradviz.core.config import FitConfig
from gradviz.core.decimate import MAX_DISPLAY

TARGET_APP_OVER_HEADLESS = 1e9  # bytes
SIZES = (5000, 10000, 20000)
QUICK_SIZES = (1000, 2000)
STEPS = 3
REPO = Path(__file__).resolve().parents[2]

# A run stepped as the app's worker steps it, with display-sized Snapshots.
_SNAPSHOT_RUN = """
import json, sys
from gradviz.core.config import FitConfig
from gradviz.core.fit import DistanceFitRun
config = FitConfig.from_dict(json.loads(sys.argv[1]))
run = DistanceFitRun(config, max_display=int(sys.argv[2]))
while not run.done:
    run.step(capture=True)
    shown = run.snapshot()
print(shown.step, shown.distances.shape)
"""


def _config(n: int) -> FitConfig:
    return FitConfig(n=n, method="safe", dtype="float32", steps=STEPS, device="cpu", lr=1e-3)


def run(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    """Measure peak RSS of each way of running at each size; returns the figures (bytes)."""
    del repeats  # one measurement each: a peak, not a time that drifts
    sizes = QUICK_SIZES if quick else SIZES
    baseline = peak_rss([sys.executable, "-m", "gradviz", "fit", "--n", "2", "--steps", "1"])
    emit("memory: peak RSS (GB), safe, float32, CPU; app target <= headless + 1 GB")
    emit(f"the process itself (gradviz fit at N = 2): {baseline / 1e9:.2f} GB; estimate = "
         "core.memory's estimate of the run + that")  # fmt: skip
    emit(f"{'N':>6} {'headless':>9} {'snapshots':>10} {'app':>6} {'estimate':>9}  app-headless")
    results: dict = {"baseline": baseline}
    with tempfile.TemporaryDirectory(prefix="gradviz-bench-memory-") as folder:
        for n in sizes:
            row = _measure(n, Path(folder))
            row["estimate"] += baseline
            results[str(n)] = row
            over = row["app"] - row["headless"]
            verdict = "ok" if over <= TARGET_APP_OVER_HEADLESS else "over target"
            emit(
                f"{n:>6} {row['headless'] / 1e9:>9.2f} {row['snapshots'] / 1e9:>10.2f} "
                f"{row['app'] / 1e9:>6.2f} {row['estimate'] / 1e9:>9.2f}  "
                f"{over / 1e9:+.2f} ({verdict}; app ran {row['app_seconds']:.0f} s)"
            )
    return results


def _measure(n: int, folder: Path) -> dict:
    config = _config(n)
    fit_args = ["fit", "--n", str(n), "--method", "safe", "--dtype", "float32"]
    fit_args += ["--steps", str(STEPS), "--device", "cpu", "--lr", "1e-3"]
    headless = peak_rss([sys.executable, "-m", "gradviz", *fit_args])
    settings = json.dumps(config.to_dict())
    snapshots = peak_rss([sys.executable, "-c", _SNAPSHOT_RUN, settings, str(MAX_DISPLAY)])
    experiment = folder / f"n{n}.json"
    steps = 10**6  # the app keeps running until the screenshot
    experiment.write_text(json.dumps({"fit": config.with_changes(steps=steps).to_dict()}))
    # Long enough for a few steps at this size (about 5 s a step at N = 20000 here).
    run_for = max(3.0, 2.5e-8 * n * n * STEPS)
    shot = folder / f"n{n}.png"
    started = time.perf_counter()
    app = peak_rss(
        [sys.executable, "-m", "gradviz", "gui", "--experiment", str(experiment),
         "--screenshot", str(shot), "--run-for", f"{run_for:.0f}"],
        env={"QT_QPA_PLATFORM": "offscreen", "GRADVIZ_SETTINGS_SCOPE": "bench"},
    )  # fmt: skip
    return {
        "headless": headless,
        "snapshots": snapshots,
        "app": app,
        "app_seconds": time.perf_counter() - started,
        "estimate": memory.estimate(config).total,
    }


def peak_rss(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Run ``argv`` in the repository and return its peak resident set size in bytes; a
    child that fails raises RuntimeError with the end of its stderr."""
    environment = {**os.environ, **(env or {})}
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(
            argv, cwd=REPO, env=environment, stdout=subprocess.DEVNULL, stderr=err
        )
        _pid, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"{' '.join(argv[:4])} failed ({child.returncode}): {tail}")
    return usage.ru_maxrss * 1024  # kilobytes on Linux
