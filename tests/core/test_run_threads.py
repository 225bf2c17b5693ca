"""The torch CPU threads of a run's steps: auto picks one thread for small steps, times 1
and every core for big ones, and a number in the settings is honoured as given.

The choice is tested, never its speed: times fed to the plan stand for measured ones."""

from __future__ import annotations

import threading

import pytest
import torch

from gradviz.core.common.run_threads import MEASURE_FROM_POINTS, TIMED_STEPS, ThreadPlan
from gradviz.core.lab.fit import DistanceFitRun
from gradviz.core.settings.config import FitConfig


@pytest.fixture(autouse=True)
def _restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_auto_runs_a_small_step_on_one_thread_and_says_why():
    torch.set_num_threads(2)
    run = DistanceFitRun(FitConfig(steps=3))  # the default experiment: N = 200, threads unset
    run.run()
    choice = run.thread_choice
    assert choice.threads == 1 and choice.auto and not choice.measured
    assert torch.get_num_threads() == 1  # on the thread that stepped the run
    assert "200 points" in choice.text() and choice.text().startswith("1 thread (auto")
    assert run.snapshot().threads == choice.text()


def test_a_number_in_the_settings_is_honoured_whatever_the_size():
    torch.set_num_threads(1)
    run = DistanceFitRun(FitConfig(steps=2, n=20, threads=2))
    run.run()
    assert torch.get_num_threads() == 2
    assert run.thread_choice.threads == 2 and not run.thread_choice.auto
    assert run.thread_choice.text() == "2 threads (set by the run's settings)"


def test_auto_gives_a_gpu_run_and_a_one_core_process_one_thread_without_timing():
    assert ThreadPlan(None, 5000, "cuda").choice.threads == 1
    assert "cuda" in ThreadPlan(None, 5000, "cuda").choice.why
    assert ThreadPlan(None, 5000, "cpu", cores=1).choice.threads == 1


def _settle(plan: ThreadPlan, seconds: dict[int, float]) -> list[int]:
    """Step the plan with the given seconds per step on each count; the counts it ran."""
    ran = []
    while plan.measuring:
        plan.before_step()
        ran.append(torch.get_num_threads())
        plan.after_step(seconds[ran[-1]])
    return ran


def test_auto_times_big_steps_on_one_thread_and_every_core_in_turn_and_keeps_the_faster():
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    assert plan.measuring and plan.choice.threads is None
    ran = _settle(plan, {1: 0.010, 2: 0.004})
    assert ran == [1, 2] * (TIMED_STEPS + 1)  # taken in turn: drift reaches both alike
    assert plan.choice.threads == 2 and torch.get_num_threads() == 2
    assert dict(plan.choice.measured) == {1: pytest.approx(100.0), 2: pytest.approx(250.0)}
    assert "100 steps/s on 1" in plan.choice.text() and "250 steps/s on 2" in plan.choice.text()


def test_more_threads_must_be_clearly_faster_to_be_kept():
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    _settle(plan, {1: 0.010, 2: 0.0095})  # 5% faster: not worth two cores
    assert plan.choice.threads == 1 and torch.get_num_threads() == 1


def test_a_big_run_settles_on_a_count_it_timed():
    run = DistanceFitRun(FitConfig(steps=2 * TIMED_STEPS + 3, n=MEASURE_FROM_POINTS), cores=2)
    assert run.thread_choice.threads is None
    run.run()
    choice = run.thread_choice
    assert choice.threads in (1, 2) and sorted(dict(choice.measured)) == [1, 2]
    assert torch.get_num_threads() == choice.threads


def test_a_run_stepped_on_another_thread_leaves_the_calling_threads_count_alone():
    """The lab steps its run on a worker thread: the GUI thread keeps its own count."""
    torch.set_num_threads(2)
    torch.ones(10).sum()  # this thread has used torch: its count is its own
    seen = []

    def work() -> None:
        DistanceFitRun(FitConfig(steps=2, n=20)).run()
        seen.append(torch.get_num_threads())

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert seen == [1] and torch.get_num_threads() == 2
