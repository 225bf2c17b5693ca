"""The benchmarks' step timer charges each case the CPU time of the threads it started."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from gradviz.bench import cpu_rounds
from gradviz.core.record import sink

BURN_S = 0.003  # CPU seconds the background thread spends per step it is handed


def _case_with_a_worker():
    """A step that hands each call to its own thread, which then burns BURN_S of CPU."""
    work: queue.Queue = queue.Queue()

    def burn() -> None:
        while work.get() is not None:
            start = time.thread_time()
            while time.thread_time() - start < BURN_S:
                pass

    thread = threading.Thread(target=burn, name="a case's writer", daemon=True)
    thread.start()

    def step() -> None:
        work.put(1)

    step.stop = lambda: work.put(None)
    return step


def test_a_cases_background_work_is_charged_to_it_and_not_to_the_case_beside_it(monkeypatch):
    monkeypatch.setattr(cpu_rounds, "SETTLE_S", 0.2)
    step, threads = cpu_rounds.built_with_threads(_case_with_a_worker)
    assert [t.name for t in threads] == ["a case's writer"]
    cases = {
        "writes in the background": cpu_rounds.StepCase(step, 4, threads),
        "does nothing": cpu_rounds.StepCase(lambda: None, 4),
    }
    try:
        cpu, _ = cpu_rounds.time_rounds(cases, rounds=2, windows=2, warmup=1)
    finally:
        step.stop()
    assert cpu["writes in the background"].median >= 0.8 * BURN_S
    assert cpu["does nothing"].median < 0.2 * BURN_S


def test_every_case_follows_every_other_case_and_holds_every_place_in_a_window(monkeypatch):
    # A step's cost depends on the step before it: a fixed order would charge one case
    # its neighbour's leftovers in every window.
    monkeypatch.setattr(cpu_rounds, "SETTLE_S", 0.0)
    calls: list[str] = []
    cases = {
        name: cpu_rounds.StepCase(lambda name=name: calls.append(name), 40)
        for name in ("a", "b", "c")
    }
    cpu_rounds.time_rounds(cases, rounds=1, windows=40, warmup=0)
    windows = [calls[k : k + 3] for k in range(0, len(calls), 3)]
    assert all(sorted(w) == ["a", "b", "c"] for w in windows)
    for name in cases:
        assert {w.index(name) for w in windows} == {0, 1, 2}
    follows = {(calls[k], calls[k + 1]) for k in range(len(calls) - 1)}
    assert follows >= {(x, y) for x in cases for y in cases if x != y}


def test_steps_that_do_not_split_into_the_windows_are_refused():
    with pytest.raises(ValueError, match="do not split"):
        cpu_rounds.time_rounds({"odd": cpu_rounds.StepCase(lambda: None, 5)}, 1, windows=2)


def test_idle_writes_are_held_off_only_while_the_rounds_run():
    before = sink.IDLE_S
    with cpu_rounds.no_idle_writes():
        assert sink.IDLE_S > 60
    assert before == sink.IDLE_S
