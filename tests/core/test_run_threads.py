"""The torch CPU threads of a run's steps: auto picks one thread for small steps, times 1
and every core for big ones (and again when the machine's speed changes), and a number in
the settings is honoured as given.

The choice is tested, never its speed: times fed to the plan stand for measured ones."""

from __future__ import annotations

import dataclasses
import io
import threading
import types

import numpy as np
import pytest
import torch

from gradviz.core.common import run_threads
from gradviz.core.common.run_threads import (
    CLOSE_CALL_RECHECK_S,
    CLOSE_CALL_TIMED_S,
    DRIFT_SPACING,
    DRIFT_WINDOW,
    LOOK_EVERY_S,
    MEASURE_FROM_POINTS,
    QUIET_FROM_POINTS,
    QUIET_LOOKS,
    RECHECK_S,
    RETIMED_STEPS,
    SETTLE_S,
    TIMED_S,
    TIMED_STEPS,
    ThreadPlan,
)
from gradviz.core.lab.fit import DistanceFitRun
from gradviz.core.settings.config import FitConfig


@pytest.fixture(autouse=True)
def _restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_auto_runs_a_small_step_on_one_thread_and_says_why():
    torch.set_num_threads(2)
    run = DistanceFitRun(FitConfig(steps=3, n=100))  # under MEASURE_FROM_POINTS, threads unset
    run.run()
    choice = run.thread_choice
    assert choice.threads == 1 and choice.auto and not choice.measured
    assert torch.get_num_threads() == 1  # on the thread that stepped the run
    assert "100 points" in choice.text() and choice.text().startswith("1 thread (auto")
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


def timed_steps(seconds: float, wanted: int = TIMED_STEPS) -> int:
    """The steps a count is timed for at ``seconds`` a step: ``wanted``, and more until
    they add up to ``TIMED_S``."""
    count, total = 0, 0.0
    while count < wanted or total < TIMED_S:
        count, total = count + 1, total + seconds
    return count


def _settle(plan: ThreadPlan, seconds: dict[int, float]) -> list[int]:
    """Step the plan with the given seconds per step on each count; the counts it ran."""
    ran = []
    while plan.measuring:
        plan.before_step()
        ran.append(torch.get_num_threads())
        plan.after_step(seconds[ran[-1]])
    return ran


def test_auto_times_big_steps_on_one_thread_and_then_every_core_and_keeps_the_faster():
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    assert plan.measuring and plan.choice.threads is None
    ran = _settle(plan, {1: 0.010, 2: 0.004})
    # Each count's steps one after another; the first on 2 threads (it wakes their
    # workers) is not timed.
    assert ran == [1] * timed_steps(0.010) + [2] * (timed_steps(0.004) + 1)
    assert plan.choice.threads == 2 and torch.get_num_threads() == 2
    assert dict(plan.choice.measured) == {1: pytest.approx(100.0), 2: pytest.approx(250.0)}
    assert "100 steps/s on 1" in plan.choice.text() and "250 steps/s on 2" in plan.choice.text()


def test_more_threads_must_be_clearly_faster_to_be_kept():
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    _settle(plan, {1: 0.010, 2: 0.0095})  # 5% faster: not worth two cores
    assert plan.choice.threads == 1 and torch.get_num_threads() == 1


def test_a_count_is_timed_by_its_mean_step_so_its_slow_steps_count():
    """Beside busy processes 2 threads ran two steps fast and one 6x slower: by the median
    they looked 1.4x as fast as one thread, by their steps per second they are slower."""
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    times = {1: iter([0.062, 0.060, 0.062, 0.065]), 2: iter([0.2, 0.040, 0.045, 0.250])}
    while plan.measuring:
        plan.before_step()
        plan.after_step(next(times[torch.get_num_threads()]))
    assert plan.choice.threads == 1
    assert dict(plan.choice.measured)[2] == pytest.approx(3 / (0.040 + 0.045 + 0.250))


def test_the_first_step_after_a_change_of_count_is_not_timed():
    # At N = 200 a 2-thread step right after 1-thread steps waits for OpenMP's workers to
    # wake; run on, 2 threads are faster. Timed one step each in turn, 1 thread won.
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    steady = {1: 0.0018, 2: 0.0013}
    previous = None
    while plan.measuring:
        plan.before_step()
        count = torch.get_num_threads()
        woke = previous is not None and count != previous
        plan.after_step(steady[count] + (0.004 if woke else 0.0))
        previous = count
    assert plan.choice.threads == 2
    assert dict(plan.choice.measured)[2] == pytest.approx(1 / 0.0013)


def test_a_small_steps_timing_lasts_long_enough_to_see_past_one_moment():
    # Three 2 ms steps a count timed one moment: 2 threads at N = 200 came out 1.05x to
    # 1.45x as fast as 1 from one run to the next. Each count is timed TIMED_S seconds.
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    ran = _settle(plan, {1: 0.002, 2: 0.0014})
    assert ran.count(1) * 0.002 >= TIMED_S and (ran.count(2) - 1) * 0.0014 >= TIMED_S
    assert ran.count(1) > TIMED_STEPS and plan.choice.threads == 2


def test_a_big_run_settles_on_a_count_it_timed(monkeypatch):
    monkeypatch.setattr(run_threads, "TIMED_S", 0.0)  # three steps each, as a fast machine's
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


def _step(plan: ThreadPlan, seconds: dict[int, float]) -> int:
    """One step of the plan taking ``seconds[count]`` on the count it set; that count."""
    plan.before_step()
    count = torch.get_num_threads()
    plan.after_step(seconds[count])
    return count


def _until_timing(plan: ThreadPlan, seconds: dict[int, float], limit: int) -> float:
    """Step until the plan starts timing again (at most ``limit`` steps); the seconds of
    steps it ran before it did."""
    spent = 0.0
    for _ in range(limit):
        spent += seconds[_step(plan, seconds)]
        if plan.measuring:
            return spent
    raise AssertionError(f"no timing in {limit} steps: {plan.choice.text()}")


IDLE = {1: 0.010, 2: 0.004}  # 2 threads 2.5x faster
BUSY = {1: 0.016, 2: 0.060}  # beside two busy processes: 1 thread ~4x faster


def test_a_load_after_the_choice_makes_auto_time_again_and_switch_to_one_thread():
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    _settle(plan, IDLE)
    assert plan.choice.threads == 2 and plan.choice.timings == 1
    for _ in range(500):  # the speed it timed holds: it keeps its choice
        assert _step(plan, IDLE) == 2 and not plan.measuring
    # Two busy processes start: the steps on 2 threads run 15x slower; the median of the
    # last three steps turns at the second.
    assert _until_timing(plan, BUSY, limit=10) == pytest.approx(2 * BUSY[2])
    assert plan.choice.threads == 2 and "again: its steps ran 15x slower" in plan.choice.why
    assert plan.choice.timing
    ran = _settle(plan, BUSY)
    assert not plan.choice.timing
    # The count it ran on first.
    assert ran == [2] * timed_steps(BUSY[2], RETIMED_STEPS) + [1] * (
        timed_steps(BUSY[1], RETIMED_STEPS) + 1
    )
    assert plan.choice.threads == 1 and torch.get_num_threads() == 1
    assert plan.choice.timings == 2 and dict(plan.choice.measured)[1] == pytest.approx(62.5)
    assert "62.5 steps/s on 1, 16.7 steps/s on 2 (again: its steps ran 15x slower)" in (
        plan.choice.text()
    )
    for _ in range(20):
        assert _step(plan, BUSY) == 1 and not plan.measuring


def test_a_costly_timing_is_followed_by_ten_times_its_cost_in_steps_before_the_next():
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    _settle(plan, IDLE)  # one thread lost 4 x 6 ms against two
    # The load comes at once: the first steps after choosing are already 15x slower. The
    # steps of the first SETTLE_S s after a timing are left out, then three make a median.
    spent = _until_timing(plan, BUSY, limit=20)
    assert spent >= DRIFT_SPACING * 4 * (IDLE[1] - IDLE[2])  # 4 steps lost 6 ms each
    assert spent <= SETTLE_S + DRIFT_WINDOW * BUSY[2] + 1e-9


def test_when_the_load_leaves_auto_times_again_and_may_switch_back():
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    _settle(plan, BUSY)
    assert plan.choice.threads == 1
    for _ in range(40):  # past SETTLE_S: the speed it settled at
        _step(plan, BUSY)
    # The busy processes end: one thread's step is 1.6x faster, beyond the 1.5x it watches.
    _until_timing(plan, IDLE, limit=1000)
    assert "its steps ran 1.6x faster" in plan.choice.why
    _settle(plan, IDLE)
    assert plan.choice.threads == 2 and torch.get_num_threads() == 2 and plan.choice.timings == 2


def test_a_load_that_only_changes_the_other_count_is_seen_by_a_periodic_check():
    """One thread 1.2x faster without the load (under the factor auto watches for), two
    threads now 2x faster than one: the periodic check finds it, after RECHECK_S s of steps."""
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    _settle(plan, {1: 0.012, 2: 0.030})
    assert plan.choice.threads == 1
    spent = _until_timing(plan, {1: 0.010, 2: 0.005}, limit=2000)
    assert spent == pytest.approx(RECHECK_S, abs=0.011)
    assert "a periodic check after 10 s of steps" in plan.choice.why
    _settle(plan, {1: 0.010, 2: 0.005})
    assert plan.choice.threads == 2


def test_a_close_call_is_timed_again_soon():
    """One moment of the machine timed 2 threads only 1.04x as fast as one (so 1 was kept)
    where they run 1.5x as fast: auto times again after CLOSE_CALL_RECHECK_S s of steps,
    not RECHECK_S, and switches."""
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    _settle(plan, {1: 0.035, 2: 0.0336})
    assert plan.choice.threads == 1
    truth = {1: 0.035, 2: 0.0233}
    spent = _until_timing(plan, truth, limit=200)
    assert spent == pytest.approx(CLOSE_CALL_RECHECK_S, abs=truth[1] + 1e-9)
    assert "again: the last timing was a close call" in plan.choice.why
    ran = _settle(plan, truth)
    assert plan.choice.threads == 2
    # Timed longer than a first timing: each count for CLOSE_CALL_TIMED_S at least.
    assert ran.count(1) * truth[1] >= CLOSE_CALL_TIMED_S
    assert (ran.count(2) - 1) * truth[2] >= CLOSE_CALL_TIMED_S


def test_close_calls_in_a_row_are_timed_again_ever_later_up_to_the_periodic_check():
    """1, 2, 4 and 8 s of steps after close calls in a row, then the periodic 10 s; a clear
    timing starts the back-off over."""
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    close = {1: 0.035, 2: 0.0336}
    _settle(plan, close)
    for wait in (1.0, 2.0, 4.0, 8.0):
        spent = _until_timing(plan, close, limit=2000)
        assert spent == pytest.approx(wait * CLOSE_CALL_RECHECK_S, abs=close[1] + 1e-9)
        assert "again: the last timing was a close call" in plan.choice.why
        _settle(plan, close)
    assert _until_timing(plan, close, limit=2000) == pytest.approx(RECHECK_S, abs=close[1] + 1e-9)
    assert "again: a periodic check" in plan.choice.why
    _settle(plan, IDLE)  # clear: 2 threads, and the next close call is timed again soon
    assert _until_timing(plan, IDLE, limit=5000) == pytest.approx(RECHECK_S, abs=IDLE[2] + 1e-9)
    _settle(plan, close)
    spent = _until_timing(plan, close, limit=200)
    assert spent == pytest.approx(CLOSE_CALL_RECHECK_S, abs=close[1] + 1e-9)


def test_a_close_call_is_never_timed_later_than_the_periodic_check(monkeypatch):
    monkeypatch.setattr(run_threads, "RECHECK_S", CLOSE_CALL_RECHECK_S / 2)
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    close = {1: 0.035, 2: 0.0336}
    _settle(plan, close)
    spent = _until_timing(plan, close, limit=200)
    assert spent == pytest.approx(CLOSE_CALL_RECHECK_S / 2, abs=close[1] + 1e-9)


def test_a_clear_timing_waits_for_the_periodic_check():
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    _settle(plan, IDLE)
    assert _until_timing(plan, IDLE, limit=5000) == pytest.approx(RECHECK_S, abs=IDLE[2] + 1e-9)


def test_on_a_steady_machine_auto_times_again_only_periodically_and_one_slow_step_is_noise():
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    _settle(plan, IDLE)
    rng = np.random.default_rng(0)
    counts = []
    for k in range(30_000):  # 2 minutes of 4 ms steps, +-20%, one in 50 taking 5x as long
        slow = 5.0 if k % 50 == 0 else 1.0
        jitter = slow * rng.uniform(0.8, 1.2)
        counts.append(_step(plan, {1: IDLE[1] * jitter, 2: IDLE[2] * jitter}))
    assert plan.choice.threads == 2 and plan.choice.timings == 1 + 12  # every 10 s of steps
    # 0.2% of the steps on the slower count: each timing's (TIMED_S of them, 4 to 7 of these
    # jittered steps), and the untimed first of them.
    assert (
        12 * (RETIMED_STEPS + 1)
        <= counts.count(1)
        <= 12 * (timed_steps(0.8 * IDLE[1], RETIMED_STEPS) + 1)
    )


@pytest.mark.parametrize(
    ("plan", "count"),
    [
        (ThreadPlan(None, QUIET_FROM_POINTS - 1, "cpu", cores=2), 1),
        (ThreadPlan(None, 5000, "cuda", cores=2), 1),
        (ThreadPlan(None, 5000, "cpu", cores=1), 1),
        (ThreadPlan(2, 5000, "cpu", cores=2), 2),
    ],
)
def test_a_choice_made_without_timing_is_never_timed(plan, count):
    for k in range(100):  # step times swinging 1000x
        assert _step(plan, {count: 1.0 if k % 2 else 0.001}) == count
    assert not plan.measuring and plan.choice.timings == 0


class _Machine:
    """What ``others_running`` says: the tasks running beside the process (None: unknown)."""

    def __init__(self, others: int | None) -> None:
        self.others = others
        self.looks = 0

    def __call__(self) -> int | None:
        self.looks += 1
        return self.others


#: A small step (N = 200, a few hundred microseconds): idle 2 threads 1.3x faster, beside
#: two busy processes 40x slower.
SMALL_IDLE = {1: 0.0020, 2: 0.0015}
SMALL_BUSY = {1: 0.0040, 2: 0.16}


def _steps_for(seconds: float, plan: ThreadPlan, times: dict[int, float]) -> list[int]:
    """Step the plan for about ``seconds`` of steps; the counts it ran."""
    ran, spent = [], 0.0
    while spent < seconds:
        ran.append(_step(plan, times))
        spent += times[ran[-1]]
    return ran


def test_a_small_step_beside_other_work_is_never_timed_on_more_threads(monkeypatch):
    machine = _Machine(others=2)
    monkeypatch.setattr(run_threads, "others_running", machine)
    plan = ThreadPlan(None, QUIET_FROM_POINTS, "cpu", cores=2)
    assert plan.choice.threads == 1 and "beside other work" in plan.choice.why
    assert set(_steps_for(60.0, plan, SMALL_BUSY)) == {1}
    assert plan.choice.timings == 0 and machine.looks >= 60.0 / LOOK_EVERY_S - 2


def test_a_small_step_on_a_quiet_machine_is_timed_and_other_work_takes_it_back_to_one(
    monkeypatch,
):
    machine = _Machine(others=0)
    monkeypatch.setattr(run_threads, "others_running", machine)
    plan = ThreadPlan(None, 500, "cpu", cores=2)
    quiet_for = QUIET_LOOKS * LOOK_EVERY_S
    assert set(_steps_for(quiet_for - 0.01, plan, SMALL_IDLE)) == {1}  # not yet seen quiet
    _steps_for(0.02, plan, SMALL_IDLE)
    assert plan.measuring
    _settle(plan, SMALL_IDLE)
    assert plan.choice.threads == 2 and plan.choice.timings == 1
    assert set(_steps_for(3 * LOOK_EVERY_S, plan, SMALL_IDLE)) == {2}

    machine.others = 1  # a process starts: the next look takes the run back to one thread
    ran = _steps_for(LOOK_EVERY_S + 0.01, plan, SMALL_BUSY)
    assert ran[-1] == 1 and not plan.measuring and plan.choice.timings == 1
    assert plan.choice.why == "auto: back to 1 thread: 1 other task running"
    assert set(_steps_for(RECHECK_S / 2, plan, SMALL_BUSY)) == {1}  # and stays, untimed

    machine.others = 0  # it ends: after quiet looks, back to the count timed when quiet
    ran = _steps_for(quiet_for + 0.01, plan, SMALL_IDLE)
    assert ran[-1] == 2 and plan.choice.timings == 1 and not plan.measuring
    assert plan.choice.why == "auto: 2 threads again: nothing else runs on the machine"
    _steps_for(RECHECK_S, plan, SMALL_IDLE)  # and timed again every RECHECK_S when quiet
    assert plan.choice.timings == 2 and plan.choice.threads == 2
    assert "(again: nothing else runs on the machine)" in plan.choice.why


def test_on_a_quiet_machine_a_small_step_keeps_more_threads_on_any_lead(monkeypatch):
    """At N = 200 idle, 2 threads timed 1.1x one thread's speed where a bare loop ran
    1.26x: a small step is timed only on a quiet machine, where the tie goes to 2 threads
    (a big step, timed beside other work too, needs MORE_THREADS_MARGIN)."""
    monkeypatch.setattr(run_threads, "others_running", _Machine(others=0))
    plan = ThreadPlan(None, QUIET_FROM_POINTS, "cpu", cores=2)
    _steps_for(QUIET_LOOKS * LOOK_EVERY_S + 0.01, plan, SMALL_IDLE)
    _settle(plan, {1: 0.0020, 2: 0.0018})
    assert plan.choice.threads == 2 and plan.choice.timings == 1


def test_a_small_steps_close_call_is_timed_again_at_its_next_quiet_looks(monkeypatch):
    """2 threads caught in a slow moment (timed a little slower than 1): 1 kept, timed again
    at the next quiet looks after CLOSE_CALL_RECHECK_S, not RECHECK_S."""
    monkeypatch.setattr(run_threads, "others_running", _Machine(others=0))
    plan = ThreadPlan(None, QUIET_FROM_POINTS, "cpu", cores=2)
    _steps_for(QUIET_LOOKS * LOOK_EVERY_S + 0.01, plan, SMALL_IDLE)
    _settle(plan, {1: 0.0018, 2: 0.0019})
    assert plan.choice.threads == 1 and plan.choice.timings == 1
    truth = {1: 0.0018, 2: 0.0014}
    ran = _steps_for(CLOSE_CALL_RECHECK_S + QUIET_LOOKS * LOOK_EVERY_S, plan, truth)
    assert plan.choice.timings == 2 and 2 in ran
    assert "(again: the last timing was a close call)" in plan.choice.why
    assert plan.choice.threads == 2


def test_a_small_step_where_the_system_does_not_say_stays_on_one_thread(monkeypatch):
    monkeypatch.setattr(run_threads, "others_running", _Machine(others=None))
    plan = ThreadPlan(None, QUIET_FROM_POINTS, "cpu", cores=2)
    assert plan.choice.why == "auto: a step of 200 points is too small to share"
    assert set(_steps_for(30.0, plan, SMALL_IDLE)) == {1} and plan.choice.timings == 0


def test_others_running_leaves_this_processes_threads_out(monkeypatch):
    """Five tasks running on the machine, two of them this process's threads (a third of
    its threads sleeps): three others. A thread's name may hold ") " (read up to the last)."""
    files = {
        "/proc/loadavg": "2.00 1.50 1.00 5/312 4242\n",
        "/proc/self/task/10/stat": "10 (python) R 1 10 10 0 -1",
        "/proc/self/task/11/stat": "11 (gradviz) fit) R 10 10 10 0 -1",
        "/proc/self/task/12/stat": "12 (writer) S 10 10 10 0 -1",
    }
    monkeypatch.setattr(run_threads, "open", lambda path: io.StringIO(files[path]), raising=False)
    monkeypatch.setattr(
        run_threads, "os", types.SimpleNamespace(listdir=lambda _path: ["10", "11", "12"])
    )
    assert run_threads.others_running() == 3


def test_others_running_reads_this_system():
    others = run_threads.others_running()
    assert others is None or others >= 0


def test_timing_again_changes_only_the_speed_of_a_run_not_its_numbers(monkeypatch):
    """A run that times both counts again after every few steps against runs held on 1 and on
    2 threads: the coordinates and every gradient norm are bit-identical; the loss (a mean
    over N x N entries, whose sum torch splits between the threads) only to float32 rounding."""
    monkeypatch.setattr(run_threads, "MEASURE_FROM_POINTS", 400)  # a quicker test
    monkeypatch.setattr(run_threads, "DRIFT_WINDOW", 1)
    monkeypatch.setattr(run_threads, "RECHECK_S", 0.0)  # time again after every step
    monkeypatch.setattr(run_threads, "RECHECK_SPACING", 0.0)
    monkeypatch.setattr(run_threads, "SETTLE_S", 0.0)
    monkeypatch.setattr(run_threads, "TIMED_S", 0.0)  # three steps a count
    config = FitConfig(steps=16, n=400)
    runs = {}
    for name, threads in (("auto", None), ("1", 1), ("2", 2)):
        runs[name] = DistanceFitRun(dataclasses.replace(config, threads=threads), cores=2)
        runs[name].run()
    assert runs["auto"].thread_choice.timings == 2  # it switched counts at every step
    for held in ("1", "2"):
        assert np.array_equal(runs["auto"].current_coords(), runs[held].current_coords())
        assert np.array_equal(runs["auto"].grad_norm_history, runs[held].grad_norm_history)
        assert runs["auto"].loss_history == pytest.approx(runs[held].loss_history, rel=1e-6)


def test_slow_steps_just_after_a_timing_do_not_set_the_speed_auto_watches_for():
    """Steps taken in turn with the other count, and those just after a timing, run beside
    that count's workers still spinning: slow. Taken as the run's speed, the normal steps
    after them looked 4x faster, and auto timed again and again."""
    plan = ThreadPlan(None, MEASURE_FROM_POINTS, "cpu", cores=2)
    _settle(plan, {1: 4 * BUSY[1], 2: 4 * BUSY[2]})  # timed slow, beside the spinning
    assert plan.choice.threads == 1
    slow = {1: 4 * BUSY[1], 2: 4 * BUSY[2]}
    spent = 0.0
    while spent + slow[1] < SETTLE_S:  # the workers spin on for a while
        spent += slow[_step(plan, slow)]
    for _ in range(600):  # 9.6 s of normal steps: past ten times what the timing lost (7 s)
        assert _step(plan, BUSY) == 1 and not plan.measuring
