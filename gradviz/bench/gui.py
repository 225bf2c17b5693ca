"""The app's speed: the `gui` suite of `gradviz bench`.

Four figures, each a ratio or a percentile measured in this one run (on a shared machine,
absolute numbers drift; interleaving keeps the comparisons fair):

1. steps/s of the app's worker (a real window drawing the real views) against the same
   ``DistanceFitRun`` stepped headless, as ``gradviz fit`` does, at N = 100 and N = 1000, at
   the default frame rate (30/s; target >= 0.7x) and at ~2 frames/s ("max speed",
   target >= 0.9x). Headless and app measurements alternate, and each ratio is the median
   over the repeats. Both use one torch thread.
2. GUI-thread latency under a full-speed run: a 10 ms QTimer probe; the 95th percentile of
   how late it fires (target < 50 ms).
3. refreshes per second of the four distance views at N = 1000 and N = 2000 (the views'
   own benchmark, ``gradviz.bench.gui_views.measure_refresh``; targets 40/s and 20/s).
4. seconds from launching ``gradviz gui`` to the window on screen, warm (target < 1.5 s).
5. start-up as a user sees it, warm, from launching ``gradviz gui``: the window painted
   (target <= 1.0 s), step 0's frame drawn (<= 2.5 s: a forward and a backward, without
   waiting for the optimizer's imports) and Start enabled (<= 3.5 s). Medians. Then the
   same with two CPU-bound processes running beside it (started and stopped here, as a
   laptop that is also compiling or training): targets 1.5 s, 4 s and 4 s. The load
   average is reported with each.
6. the longest stall of another thread (the GUI thread's place) while torch is imported on
   a background thread, plainly and as the app imports it (``core.torch_import``), each in
   fresh interpreters, alternating; the ratio of the two in this run.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from gradviz.bench.harness import show_table
from gradviz.core.settings.config import FitConfig

TARGETS = {"default": 0.7, "max_speed": 0.9, "latency_p95_ms": 50.0, "launch_s": 1.5}
#: Start-up moments the app reports (GRADVIZ_STARTUP_REPORT) and their targets (seconds).
STARTUP_TARGETS = {"window-painted": 1.0, "frame-drawn": 2.5, "start-enabled": 3.5}
#: The same moments' targets with BUSY_PROCESSES CPU-bound processes beside the app.
BUSY_STARTUP_TARGETS = {"window-painted": 1.5, "frame-drawn": 4.0, "start-enabled": 4.0}
BUSY_PROCESSES = 2
FRAME_RATES = {"default": 30.0, "max_speed": 2.0}
REPO = Path(__file__).resolve().parents[2]


def _config(n: int) -> FitConfig:
    return FitConfig(target="gaussian", n=n, dim=3, method="safe", lr=1e-3, steps=10**9,
                     threads=1)  # fmt: skip


def run(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    """Measure and print the four figures; returns them as a dict (JSON-ready)."""
    seconds = 1.5 if quick else 3.0
    sizes = (100,) if quick else (100, 1000)
    results: dict = {}
    emit("gui: app worker vs headless DistanceFitRun (steps/s, one torch thread)")
    with offscreen_lab() as lab:  # its settings scope holds for the measurements after it
        results["throughput"] = _throughput(lab, sizes, repeats, seconds, emit)
        results["latency"] = _latency(lab, 100 if quick else 1000, seconds, emit)
    results["views_refresh"] = _views_refresh(quick, seconds, emit)
    results["launch"] = _launch(repeats, emit)
    results["import_stall"] = _import_stall(repeats, emit)
    results["startup"] = _startup(repeats, emit)
    with busy_processes(BUSY_PROCESSES):
        results["startup_busy"] = _startup(repeats, emit, BUSY_STARTUP_TARGETS, "busy: ")
    results["tables"] = tables(results, emit)
    return results


def tables(results: dict, emit: Callable[[str], None]) -> list[dict]:
    """The suite's two tables, printed through ``emit`` and returned as data: the worker's
    throughput, then every other figure beside its target."""
    throughput = [
        [int(key[1:].split("_", 1)[0]), key.split("_", 1)[1], row["headless_steps_s"],
         row["app_steps_s"], row["ratio"], f">= {row['target']}"]
        for key, row in results["throughput"].items()
    ]  # fmt: skip
    return [
        show_table(
            emit,
            "app worker vs headless DistanceFitRun (steps/s, one torch thread, medians)",
            ["N", "mode", "headless", "app", "ratio", "target"],
            throughput,
            ["mode: default = 30 frames/s, max_speed = about 2 frames/s"],
        ),
        show_table(
            emit,
            "responsiveness and start-up",
            ["figure", "measured", "unit", "target"],
            _figure_rows(results),
            [
                f"busy: with {BUSY_PROCESSES} CPU-bound processes running beside the app",
                "stalls: the longest stall of another thread while torch is imported, in "
                "fresh interpreters (medians)",
            ],
        ),
    ]


def _figure_rows(results: dict) -> list[list]:
    """Rows (figure, measured, unit, target) of every figure but the throughput."""
    latency = results["latency"]
    rows: list[list] = [
        [f"GUI latency p50 at N={latency['n']} (10 ms probe)", latency["p50_ms"], "ms", None],
        [f"GUI latency p95 at N={latency['n']}", latency["p95_ms"], "ms",
         f"< {latency['target_ms']:g}"],
    ]  # fmt: skip
    for key, row in results["views_refresh"].items():
        if key != "skipped":
            rows.append([f"distance views refresh at N={key[1:]}", row["refresh_per_s"], "/s",
                         f">= {row['target']:g}"])  # fmt: skip
    launch = results["launch"]
    rows.append(["launch to window on screen (warm)", launch.get("seconds"), "s",
                 f"< {TARGETS['launch_s']}"])  # fmt: skip
    stall = results["import_stall"]
    rows += [
        ["stall, torch imported plainly", stall["plain"]["longest_stall_s"], "s", None],
        ["stall, torch imported as the app does", stall["gradviz"]["longest_stall_s"], "s", None],
        ["stall ratio, the app's import / plain", stall["ratio"], "x", None],
        ["stalls over 100 ms, summed, plainly", stall["plain"]["stalls_over_100ms_s"], "s", None],
        ["stalls over 100 ms, summed, as the app does",
         stall["gradviz"]["stalls_over_100ms_s"], "s", None],
    ]  # fmt: skip
    for label, key in (("", "startup"), ("busy: ", "startup_busy")):
        startup = results[key]
        for moment, row in startup.items():
            if moment != "load_average_1min":
                rows.append([f"{label}start-up, {moment}", row["seconds"], "s",
                             f"<= {row['target_s']}"])  # fmt: skip
        rows.append([f"{label}load average (1 min) as the launches ended",
                     startup["load_average_1min"], "", None])  # fmt: skip
    return rows


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """Run ``count`` CPU-bound processes (a Python busy loop each) for the block's length."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        time.sleep(0.5)  # let them take their share of the CPU before measuring
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


@contextlib.contextmanager
def offscreen_lab() -> Iterator[_Lab]:
    """The real app offscreen, in the bench's own settings scope; closed after."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ.setdefault("GRADVIZ_SETTINGS_SCOPE", "bench")
    lab = _Lab()
    try:
        yield lab
    finally:
        lab.close()


class _Lab:
    """The real app, offscreen, with torch loaded."""

    def __init__(self) -> None:
        from PySide6.QtWidgets import QApplication

        from gradviz.gui.shell.app import build_controller, create_application

        self.app = create_application()
        self.controller = build_controller(_config(100))
        self.controller.window.show()
        self.controller.start_loading()
        self.wait(lambda: self.controller.torch_ready, 180)
        self._qapp = QApplication

    def wait(self, predicate: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.perf_counter() + timeout_s
        while not predicate():
            if time.perf_counter() > deadline:
                raise TimeoutError("the app did not get there in time")
            self.spin(0.01)

    def spin(self, seconds: float) -> None:
        """Run the event loop as the app does (idle when there is nothing to do)."""
        from PySide6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        QTimer.singleShot(int(seconds * 1000), loop.quit)
        loop.exec()

    def start(self, n: int, frame_rate: float) -> None:
        self.start_config(_config(n), frame_rate)

    def start_config(self, config: FitConfig, frame_rate: float) -> None:
        """Reset to ``config`` at ``frame_rate`` and start it once step 0 is on screen."""
        from gradviz.gui.widgets.settings_form import LiveSettings

        c = self.controller
        c.form.set_config(config, LiveSettings(frame_rate=frame_rate))
        c.reset()
        self.wait(lambda: c.session.worker is not None and c.session.latest is not None, 120)
        c.start()

    def steps_per_second(self, seconds: float) -> float:
        return self.rates(seconds)[0]

    def rates(self, seconds: float) -> tuple[float, float]:
        """(steps, frames drawn) per second of the running run over ``seconds``."""
        session = self.controller.session
        worker, frames = session.worker, [0]
        self.spin(0.5)  # warm-up: first frames, caches

        def count(_snapshot) -> None:
            frames[0] += 1

        session.snapshotShown.connect(count)
        s0, t0 = worker.steps_taken, time.perf_counter()
        self.spin(seconds)
        elapsed = time.perf_counter() - t0
        session.snapshotShown.disconnect(count)
        return (worker.steps_taken - s0) / elapsed, frames[0] / elapsed

    def close(self) -> None:
        self.controller.shutdown()
        self.controller.window.close()
        self.controller.window.deleteLater()
        self.app.processEvents()


def _headless(n: int, seconds: float) -> float:
    from gradviz.core.lab.fit import DistanceFitRun

    run = DistanceFitRun(_config(n))
    for _ in range(3):
        run.step()
    t0, steps = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        run.step()
        steps += 1
    return steps / (time.perf_counter() - t0)


def _throughput(lab: _Lab, sizes, repeats: int, seconds: float, emit) -> dict:
    out: dict = {}
    for n in sizes:
        for mode, frame_rate in FRAME_RATES.items():
            ratios, heads, apps = [], [], []
            for _ in range(repeats):
                heads.append(_headless(n, seconds))
                lab.start(n, frame_rate)
                apps.append(lab.steps_per_second(seconds))
                lab.controller.session.stop()
                ratios.append(apps[-1] / heads[-1])
            ratio = statistics.median(ratios)
            head, app = statistics.median(heads), statistics.median(apps)
            target = TARGETS[mode]
            emit(f"  throughput at N={n}, {mode}: measured")
            out[f"n{n}_{mode}"] = {"headless_steps_s": head, "app_steps_s": app,
                                   "ratio": ratio, "target": target}  # fmt: skip
    return out


def _latency(lab: _Lab, n: int, seconds: float, emit) -> dict:
    """How late a 10 ms GUI timer fires while the app runs at the default frame rate."""
    from PySide6.QtCore import QTimer

    lab.start(n, FRAME_RATES["default"])
    lab.spin(0.5)
    lateness: list[float] = []
    last = [time.perf_counter()]

    def probe() -> None:  # runs on the GUI thread (the timer's thread)
        now = time.perf_counter()
        lateness.append(max(0.0, now - last[0] - 0.010))
        last[0] = now

    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(probe)
    timer.start()
    lab.spin(seconds * 2)
    timer.stop()
    lab.controller.session.stop()
    lateness.sort()
    p95 = 1000 * lateness[int(0.95 * (len(lateness) - 1))] if lateness else float("nan")
    p50 = 1000 * statistics.median(lateness) if lateness else float("nan")
    emit(f"  GUI latency at N={n}: measured")
    return {"n": n, "p50_ms": p50, "p95_ms": p95, "target_ms": TARGETS["latency_p95_ms"]}


def _views_refresh(quick: bool, seconds: float, emit) -> dict:
    try:
        from gradviz.bench.gui_views import measure_refresh
    except ModuleNotFoundError:
        emit("  distance views refresh: skipped (gradviz.bench.gui_views is not available)")
        return {"skipped": "gradviz.bench.gui_views is not available"}
    out = {}
    for n, target in ((1000, 40.0), (2000, 20.0))[: 1 if quick else 2]:
        rate = measure_refresh(n, seconds, distance_views_only=True)
        emit(f"  distance views refresh at N={n}: measured")
        out[f"n{n}"] = {"refresh_per_s": rate, "target": target}
    return out


def _launch(repeats: int, emit) -> dict:
    """Seconds from starting `python -m gradviz gui` to its window on screen (warm)."""
    env = _warm_env()
    env["GRADVIZ_EXIT_WHEN_SHOWN"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "gradviz", "gui"]
    times = []
    for k in range(repeats + 1):  # the first launch warms the file cache and is not counted
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        shown = None
        for line in proc.stdout:
            if line.strip() == "window-shown":
                shown = time.perf_counter() - t0
                break
        proc.wait(timeout=60)
        if shown is None:
            emit("  launch: the window did not report being shown")
            return {"error": "window not shown"}
        if k:
            times.append(shown)
    median = statistics.median(times)
    emit("  launch to window on screen: measured")
    return {"seconds": median, "target_s": TARGETS["launch_s"]}


def _warm_env() -> dict:
    """The environment of a launch measured warm: Python's bytecode cache on, as a user's
    (where PYTHONDONTWRITEBYTECODE is set, every launch would compile gradviz afresh)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _import_stall(repeats: int, emit) -> dict:
    """Medians over ``repeats`` fresh interpreters of ``bench.import_stall``, plain torch
    import and the app's alternating (one untimed pair first, to warm the file cache)."""
    import json

    env = _warm_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    runs: dict[str, list[dict]] = {"plain": [], "gradviz": []}
    for k in range(repeats + 1):
        for how in runs:
            out = subprocess.run(
                [sys.executable, "-m", "gradviz.bench.import_stall", how],
                env=env, capture_output=True, text=True, timeout=300, check=True,
            )  # fmt: skip
            if k:
                runs[how].append(json.loads(out.stdout.strip().splitlines()[-1]))
    result: dict = {}
    for how, rows in runs.items():
        result[how] = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
    plain, ours = result["plain"]["longest_stall_s"], result["gradviz"]["longest_stall_s"]
    result["ratio"] = ours / plain if plain > 0 else float("nan")
    emit("  stall of another thread while torch is imported: measured")
    return result


def _startup(
    repeats: int, emit, targets: dict[str, float] = STARTUP_TARGETS, label: str = ""
) -> dict:
    """Seconds from starting `python -m gradviz gui` to each moment of ``targets``, with
    fresh settings (the default experiment and layout, as a new user sees them); the load
    average (1 minute) as the launches end."""
    import tempfile

    env = _warm_env()
    env["GRADVIZ_STARTUP_REPORT"] = "1"
    env["GRADVIZ_SETTINGS_FILE"] = os.path.join(tempfile.mkdtemp(), "settings.ini")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    runs: dict[str, list[float]] = {moment: [] for moment in targets}
    for k in range(repeats + 1):  # the first launch warms the file cache and is not counted
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "gradviz", "gui"], env=env, stdout=subprocess.PIPE, text=True
        )
        for line in proc.stdout:
            moment = line.strip()
            if k and moment in runs:
                runs[moment].append(time.perf_counter() - t0)
        proc.wait(timeout=120)
        if os.path.exists(env["GRADVIZ_SETTINGS_FILE"]):
            os.remove(env["GRADVIZ_SETTINGS_FILE"])  # the next launch is a first one again
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    out: dict = {"load_average_1min": load}
    for moment, target in targets.items():
        median = statistics.median(runs[moment]) if runs[moment] else float("nan")
        out[moment] = {"seconds": median, "target_s": target, "all_s": runs[moment]}
    emit(f"  {label}start-up: measured")
    return out


if __name__ == "__main__":  # pragma: no cover - manual use
    import json

    print(json.dumps(run(1, "--quick" in sys.argv, print)))
