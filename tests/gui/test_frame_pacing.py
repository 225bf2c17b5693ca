"""A live run's frames are paced to the window: no faster than the frame rate asked, and no
sooner than GUI_SHARE_FACTOR times the window thread's time for the last frame, so a slow
window takes fewer frames and the run keeps the rest of the time.

The worker runs on the test's thread against a run whose steps take about 1 ms of a fake
clock (2^-10 s, so that every sum of them is exact); the "window" acknowledges each frame at
once, saying how long it took to draw. A frame is the first step that starts at least the
interval after the last frame was sent: frames ``interval / STEP_S + 1`` steps apart.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
from fake_run import FakeRun

from gradviz.core.settings.config import FitConfig
from gradviz.gui.run import worker as worker_module
from gradviz.gui.run.worker import GUI_SHARE_FACTOR, MAX_FRAME_INTERVAL_S, FitWorker

STEP_S = 2.0**-10


def captured_steps(monkeypatch, frame_rate: float, gui_seconds: float, steps: int) -> list[int]:
    """The steps the worker captured (drew) in a run of ``steps`` STEP_S steps, the window
    taking ``gui_seconds`` per frame."""
    clock = types.SimpleNamespace(now=0.0)
    fake_time = types.SimpleNamespace(
        perf_counter=lambda: clock.now, thread_time=lambda: clock.now, monotonic=lambda: clock.now
    )
    monkeypatch.setattr(worker_module, "time", fake_time)
    captured: list[int] = []

    class TimedRun(FakeRun):
        def step(self, capture: bool = True) -> None:
            clock.now += STEP_S
            if capture:
                captured.append(self.completed_steps)
            super().step(capture)

    config = FitConfig(steps=steps, n=8)
    worker = FitWorker(config, generation=0, frame_rate=frame_rate, run_factory=TimedRun)
    worker.snapshotReady.connect(lambda _snap, _rate: worker.frame_drawn(gui_seconds))
    worker.run()  # on this thread: each frame is acknowledged as it is sent
    return captured


def gaps(steps: list[int]) -> np.ndarray:
    return np.diff(steps[1:])  # after step 0, which is always drawn


def test_a_quick_window_gets_the_frame_rate_asked(monkeypatch):
    steps = captured_steps(monkeypatch, frame_rate=1 / (16 * STEP_S), gui_seconds=0.0, steps=500)
    assert set(gaps(steps)) == {16 + 1}  # 64 frames/s: 16 steps between frames


def test_a_slow_window_gets_fewer_frames_and_the_run_keeps_the_rest(monkeypatch):
    gui = 10 * STEP_S  # 10 ms to draw a frame, though 64 frames/s were asked
    steps = captured_steps(monkeypatch, frame_rate=1 / (16 * STEP_S), gui_seconds=gui, steps=1000)
    wait = GUI_SHARE_FACTOR * 10  # steps: drawing takes 1/7 of the time at most
    assert set(gaps(steps)) == {wait + 1}


def test_a_very_slow_window_still_gets_a_frame_a_second(monkeypatch):
    steps = captured_steps(monkeypatch, frame_rate=30, gui_seconds=5.0, steps=3500)
    assert set(gaps(steps)) == {MAX_FRAME_INTERVAL_S / STEP_S + 1}


def test_the_lab_page_states_the_pacing_the_worker_uses():
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "app" / "lab.md"
    words = " ".join(page.read_text(encoding="utf-8").split())
    assert f"a frame also waits {GUI_SHARE_FACTOR:g} times as long as the window took" in words


class _Worker:
    def __init__(self) -> None:
        self.drawn: list[float] = []

    def frame_drawn(self, gui_seconds: float) -> None:
        self.drawn.append(gui_seconds)


def paced_frames(qtbot, monkeypatch, cpu_s: float, wall_s: float, runs: int = 1) -> list:
    """The time the pacer reports to each of ``runs`` runs (generations) whose frames were
    drawn together, taking ``cpu_s`` of the GUI thread's CPU and ``wall_s`` from the first
    one's arrival to their paint."""
    from gradviz.gui.run.worker import FramePacer

    clock = types.SimpleNamespace(cpu=0.0, wall=100.0)
    monkeypatch.setattr(
        worker_module,
        "time",
        types.SimpleNamespace(thread_time=lambda: clock.cpu, perf_counter=lambda: clock.wall),
    )
    workers = {generation: _Worker() for generation in range(runs)}
    pool = types.SimpleNamespace(get=lambda g: types.SimpleNamespace(worker=workers[g]))
    pacer = FramePacer(pool)
    arrived = clock.wall
    clock.cpu += cpu_s
    clock.wall += wall_s
    for generation in workers:
        pacer.shown(generation, arrived)
    qtbot.waitUntil(lambda: all(w.drawn for w in workers.values()), timeout=2000)
    return [w.drawn for w in workers.values()]


def paced_frame(qtbot, monkeypatch, cpu_s: float, wall_s: float) -> float:
    return paced_frames(qtbot, monkeypatch, cpu_s, wall_s)[0][0]


def test_runs_whose_frames_were_drawn_together_are_each_told_the_same_time(qtbot, monkeypatch):
    # A stopped run's last frame and the new run's first, taken by the views in one go.
    assert paced_frames(qtbot, monkeypatch, cpu_s=0.030, wall_s=0.012, runs=2) == [
        [pytest.approx(0.030)],
        [pytest.approx(0.030)],
    ]


def test_a_frame_is_paced_by_the_window_threads_cpu_time(qtbot, monkeypatch):
    assert paced_frame(qtbot, monkeypatch, cpu_s=0.020, wall_s=0.012) == pytest.approx(0.020)


def test_on_a_busy_machine_a_frame_is_paced_by_the_wall_time_it_held_the_window(qtbot, monkeypatch):
    # Preempted while it drew (and held the GIL), the window took 60 ms for 20 ms of CPU:
    # the run waited the 60 ms, and the next frame must wait six times that.
    assert paced_frame(qtbot, monkeypatch, cpu_s=0.020, wall_s=0.060) == pytest.approx(0.060)
