"""Memory: the `memory` suite of `gradviz bench`.

Peak RSS, side by side at N = 5000, 10000 and 20000 (safe, float32, CPU, the same run
settings), each measured in a fresh process of its own (see ``peak_rss``):

- ``headless``: ``gradviz fit`` taking a few steps;
- ``snapshots``: the same run stepped the way the app's worker steps it (every step
  captured, a display-sized Snapshot after each, ``max_display`` = 2048), headless;
- ``app``: ``gradviz gui --screenshot ... --run-for S`` (offscreen) on an experiment with
  those settings: the whole app (display-sized Snapshots too).

Targets: app <= headless + 1 GB, and the estimate (``core.memory``) within a third of the
headless peak. The run of N = 20000 needs about 8 GB and a few minutes; ``--quick`` measures
N = 1000 and 2000 only. A measurement whose estimate does not fit in the memory free now
(less a margin for the rest of the machine) is skipped, and the table says why.
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

import torch

from gradviz.bench.harness import show_table
from gradviz.core.common.decimate import MAX_DISPLAY
from gradviz.core.lab import memory
from gradviz.core.settings.config import FitConfig

TARGET_APP_OVER_HEADLESS = 1e9  # bytes
#: Memory left to the rest of the machine: a measurement whose estimate needs more than
#: what is available less this is skipped (and says so) rather than run into swap or OOM.
MARGIN = 2e9
#: The side of the app's Snapshot matrices (its runs take display-sized Snapshots); used to
#: skip app sizes that would not fit.
APP_SNAPSHOT_SIDE: int | None = MAX_DISPLAY
SIZES = (5000, 10000, 20000)
QUICK_SIZES = (1000, 2000)
STEPS = 3
REPO = Path(__file__).resolve().parents[2]

# A run stepped as the app's worker steps it, with display-sized Snapshots.
_SNAPSHOT_RUN = """
import json, sys
from gradviz.core.settings.config import FitConfig
from gradviz.core.lab.fit import DistanceFitRun
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
    """Measure peak RSS of each way of running at each size; returns the figures (bytes,
    None for a measurement skipped because its estimate does not fit here)."""
    del repeats  # one measurement each: a peak, not a time that drifts
    sizes = QUICK_SIZES if quick else SIZES
    baseline = peak_rss([sys.executable, "-m", "gradviz", "fit", "--n", "2", "--steps", "1"])
    emit("memory: peak RSS, safe, float32, CPU, each case in a fresh process of its own")
    results: dict = {"baseline": baseline}
    with tempfile.TemporaryDirectory(prefix="gradviz-bench-memory-") as folder:
        for n in sizes:
            started = time.perf_counter()
            results[str(n)] = _measure(n, Path(folder), baseline)
            emit(f"  N = {n}: measured in {time.perf_counter() - started:.0f} s")
    rows = [[n, *(_gb(results[str(n)][k]) for k in _COLUMNS), *_verdict(results[str(n)])]
            for n in sizes]  # fmt: skip
    notes = [
        f"the process itself (gradviz fit at N = 2): {baseline / 1e9:.2f} GB; estimate = "
        "core.memory's estimate of the headless run + that",
        f"target: app <= headless + {TARGET_APP_OVER_HEADLESS / 1e9:g} GB",
    ]
    columns = ["N", *(f"{k} GB" for k in _COLUMNS), "app - headless GB", "verdict"]
    results["tables"] = [show_table(emit, "peak RSS (GB)", columns, rows, notes)]
    return results


_COLUMNS = ("headless", "snapshots", "app", "estimate")


def _gb(value: float | None) -> float | None:
    return None if value is None else value / 1e9


def _verdict(row: dict) -> tuple[float | None, str]:
    """(app - headless in GB, the verdict in words) of one size's row."""
    if row["app"] is None or row["headless"] is None:
        return None, row["skipped"]
    over = row["app"] - row["headless"]
    verdict = "ok" if over <= TARGET_APP_OVER_HEADLESS else "over target"
    exit_note = f", then exited with {row['app_exit']}" if row["app_exit"] else ""
    return over / 1e9, f"{verdict}; the app ran {row['app_seconds']:.0f} s{exit_note}"


def _measure(n: int, folder: Path, baseline: int) -> dict:
    """One size: each way of running that fits in the memory available now (with a margin
    for the rest of the machine), in its own child process."""
    config = _config(n)
    room = memory.available_bytes(torch.device("cpu")) - MARGIN - baseline
    row: dict = {"estimate": memory.estimate(config).total + baseline}
    row["app_seconds"] = row["app_exit"] = None
    row["headless"] = row["snapshots"] = row["app"] = None
    needs = {
        "headless": memory.estimate(config).total,
        "snapshots": memory.estimate(config, snapshot_side=min(n, MAX_DISPLAY)).total,
        "app": memory.estimate(config, snapshot_side=APP_SNAPSHOT_SIDE or n).total,
    }
    skipped = [k for k, need in needs.items() if need > room]
    if skipped:
        row["skipped"] = (
            f"{', '.join(skipped)} skipped: needs about "
            f"{memory.format_bytes(max(needs[k] for k in skipped))}, "
            f"{memory.format_bytes(room)} free beyond a {memory.format_bytes(MARGIN)} margin"
        )
    if "headless" not in skipped:
        fit_args = ["fit", "--n", str(n), "--method", "safe", "--dtype", "float32"]
        fit_args += ["--steps", str(STEPS), "--device", "cpu", "--lr", "1e-3"]
        row["headless"] = peak_rss([sys.executable, "-m", "gradviz", *fit_args])
    if "snapshots" not in skipped:
        settings = json.dumps(config.to_dict())
        argv = [sys.executable, "-c", _SNAPSHOT_RUN, settings, str(MAX_DISPLAY)]
        row["snapshots"] = peak_rss(argv)
    if "app" not in skipped:
        started = time.perf_counter()
        row["app"], row["app_exit"] = _app_peak(config, folder)
        row["app_seconds"] = time.perf_counter() - started
    return row


def _app_peak(config: FitConfig, folder: Path) -> tuple[int, int]:
    """Peak RSS of the app running ``config`` offscreen until a screenshot, and its exit
    code. An app that saved its screenshot but then exited abnormally still ran the whole
    time: its peak counts (the exit code is reported); one that saved nothing is an error."""
    n = config.n
    experiment = folder / f"n{n}.json"
    steps = 10**6  # the app keeps running until the screenshot
    experiment.write_text(json.dumps({"fit": config.with_changes(steps=steps).to_dict()}))
    # Long enough for a few steps at this size (about 5 s a step at N = 20000 here).
    run_for = max(3.0, 2.5e-8 * n * n * STEPS)
    shot = folder / f"n{n}.png"
    argv = [sys.executable, "-m", "gradviz", "gui", "--experiment", str(experiment),
            "--screenshot", str(shot), "--run-for", f"{run_for:.0f}"]  # fmt: skip
    env = {"QT_QPA_PLATFORM": "offscreen", "GRADVIZ_SETTINGS_SCOPE": "bench"}
    peak, code, tail = _run_child(argv, env)
    if not shot.exists():
        raise RuntimeError(f"the app saved no screenshot at N = {n} (exit {code}): {tail}")
    return peak, code


def peak_rss(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Run ``argv`` in the repository and return its own peak resident set size in bytes
    (however much this process holds); a child that fails raises RuntimeError with the end
    of its stderr."""
    peak, code, tail = _run_child(argv, env)
    if code != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed ({code}): {tail}")
    return peak


#: Starts the case (its argv after the launcher's) and prints "<peak RSS in kB> <exit code>".
#: Linux counts a process's peak RSS from the memory of the process it was forked from (and,
#: through exec, of the one whose memory a vfork or posix_spawn child borrowed), so a case
#: started by this bench, which may hold gigabytes of other suites' work, would report the
#: bench's peak. Started from this launcher, a bare interpreter of about 10 MB, it reports
#: its own. The case's stdout goes nowhere; its stderr is the launcher's.
LAUNCHER = """
import os, sys
out = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ, file_actions=out)
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def _run_child(argv: list[str], env: dict[str, str] | None) -> tuple[int, int, str]:
    """(its own peak RSS in bytes, exit code, end of stderr) of ``argv`` run in the
    repository, started from LAUNCHER."""
    environment = {**os.environ, **(env or {})}
    launcher = [sys.executable, "-c", LAUNCHER, *argv]
    with tempfile.TemporaryFile() as err:
        done = subprocess.run(
            launcher, cwd=REPO, env=environment, stdout=subprocess.PIPE, stderr=err, check=False
        )
        err.seek(0)
        tail = err.read().decode(errors="replace")[-2000:]
    fields = done.stdout.split()
    if done.returncode != 0 or len(fields) != 2:
        raise RuntimeError(f"the launcher of {' '.join(argv[:4])} failed: {tail}")
    kilobytes, code = (int(field) for field in fields)
    return kilobytes * 1024, code, tail  # ru_maxrss: kilobytes on Linux
