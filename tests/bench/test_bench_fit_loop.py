"""The live run at full speed: `gradviz bench --suite fit_loop` and `--suite soak`.

The targets are benchmarks (pytest -m bench tests/bench/test_bench_fit_loop.py -s); the
default run checks only that the bare loop it compares with takes the fit's own steps."""

from __future__ import annotations

import pytest
import torch

from gradviz.bench import fit_loop, soak
from gradviz.core.lab.fit import DistanceFitRun
from gradviz.core.settings.config import FitConfig


@pytest.mark.parametrize("net", [None, "4-8-3:tanh"])
def test_the_bare_loop_takes_the_same_steps_as_the_fit(net):
    run = DistanceFitRun(FitConfig(n=40, steps=100, net=net, threads=1))
    bare = fit_loop.bare_step(run, threads=1)
    for _ in range(5):
        run.step()
        bare()
    for ours, theirs in zip(run._params, bare.params, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


@pytest.fixture(scope="module")
def figures():
    return fit_loop.run(repeats=3, quick=False, emit=print)


@pytest.mark.bench
def test_the_fit_loop_keeps_up_with_a_bare_loop_idle_and_beside_busy_processes(figures):
    for case, row in figures["fit"].items():
        assert row["ratio"] >= fit_loop.TARGET_FIT, f"{case}: {row['ratio']:.2f}x"


@pytest.mark.bench
def test_the_lab_worker_keeps_up_with_a_bare_loop(figures):
    for label in ("idle", "busy"):
        assert figures["lab"][label]["ratio"] >= fit_loop.TARGET_LAB, label


@pytest.mark.bench
def test_the_default_experiments_2000_steps_take_at_most_twice_the_bare_time(figures):
    for label in ("idle", "busy"):
        row = figures["cli_2000_steps"][label]
        assert row["ratio"] <= fit_loop.TARGET_CLI_TIME, f"{label}: {row['ratio']:.2f}x"


@pytest.mark.bench
def test_a_long_live_runs_histories_stay_flat():
    marks = soak.run(1, quick=False, emit=print)["bounded_mb"]
    assert marks["1000000"] - marks["100000"] < 20  # MB, over 900,000 more steps


@pytest.mark.parametrize("others", [0, 2])
def test_the_fits_rounds_begin_after_its_first_timing_or_a_bounded_wait(monkeypatch, others):
    """A small step is timed only after its quiet looks: the rounds wait for that timing on
    a quiet machine, and beside other work (where it never comes) give up after the bound."""
    from gradviz.core.common import run_threads

    monkeypatch.setattr(run_threads, "others_running", lambda: others)
    monkeypatch.setattr(run_threads, "LOOK_EVERY_S", 0.01)
    monkeypatch.setattr(run_threads, "TIMED_S", 0.0)
    monkeypatch.setattr(fit_loop, "FIRST_TIMING_MAX_S", 0.3)
    run = DistanceFitRun(FitConfig(n=run_threads.QUIET_FROM_POINTS, steps=10**6), cores=2)
    assert run.thread_choice.threads == 1 and run.thread_choice.timings == 0
    fit_loop._first_choice(run)
    assert run.thread_choice.timings == (1 if others == 0 else 0)


def test_the_baseline_is_the_bare_loops_best_thread_count_over_the_rounds(monkeypatch):
    """A hand-written loop runs on one thread count: the baseline is the count with the
    higher median, not whichever count a round's noise made faster (also reported)."""
    scripted = {  # steps/s a round per case: 1 thread the faster loop, 2 threads ahead twice
        "fit": [90.0] * 5,
        "bare, 1 thread": [100.0, 100.0, 80.0, 80.0, 120.0],
        "bare, 2 threads": [110.0, 110.0, 50.0, 50.0, 50.0],
    }
    cases = {name: (lambda name=name: name) for name in scripted}
    served = {name: iter(rates) for name, rates in scripted.items()}
    monkeypatch.setattr(
        fit_loop, "steps_per_second", lambda step, seconds, min_steps: next(served[step()])
    )
    monkeypatch.setattr(fit_loop, "ROUNDS_PER_REPEAT", 1)
    run = DistanceFitRun(FitConfig(n=10, steps=10, threads=1))
    row = fit_loop._rounds(run, cases, n=10, repeats=5, window_s=0.0)
    assert row["rounds"] == 5
    assert row["bare_best"] == "bare, 1 thread"
    assert row["ratio"] == pytest.approx(0.9)  # median of 90 / (100, 100, 80, 80, 120)
    assert row["ratio_to_faster_each_round"] == pytest.approx(90 / 110)
