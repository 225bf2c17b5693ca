"""The benchmark harness: interleaving, thread count, ratios and tables (fast, default run)."""

import pytest
import torch

from gradviz.bench import harness
from gradviz.bench.harness import Case, Timing, format_table, median_ratio, time_interleaved


def test_cases_are_timed_round_robin_after_their_warm_up():
    order = []
    cases = {name: (lambda name=name: order.append(name)) for name in "ABC"}
    timings = time_interleaved(cases, repeats=3, warmup=2, min_seconds=0, max_calls=1)
    warm_up = ["A", "A", "B", "B", "C", "C"]
    assert order == warm_up + ["A", "B", "C"] * 3
    assert [t.calls for t in timings.values()] == [1, 1, 1]
    assert all(len(t.seconds) == 3 for t in timings.values())


def test_a_case_with_fixed_calls_skips_calibration_and_takes_its_own_warm_up():
    order = []
    cases = {
        "A": lambda: order.append("A"),
        "B": Case(lambda: order.append("B"), calls=2, warmup=0),
    }
    timings = time_interleaved(cases, repeats=2, warmup=2, min_seconds=0, max_calls=1)
    assert order == ["A", "A"] + ["A", "B", "B"] * 2
    assert [t.calls for t in timings.values()] == [1, 2]


def test_a_repeat_records_the_median_or_minimum_of_its_calls(monkeypatch):
    ticks = iter([5.0, 1.0, 3.0, 5.0, 1.0, 3.0] * 2)
    monkeypatch.setattr(harness, "time_calls", lambda fn, calls=1: next(ticks))
    cases = {
        "median": Case(lambda: None, calls=3, warmup=0),
        "min": Case(lambda: None, calls=3, warmup=0, statistic="min"),
    }
    timings = time_interleaved(cases, repeats=2, statistic="median")
    assert timings["median"].seconds == (3.0, 3.0)
    assert timings["min"].seconds == (1.0, 1.0)


def test_measurement_runs_on_one_thread_and_restores_the_thread_count():
    before = torch.get_num_threads()
    seen = []
    time_interleaved(
        {"a": lambda: seen.append(torch.get_num_threads())}, repeats=2, min_seconds=0, max_calls=1
    )
    assert set(seen) == {1}
    assert torch.get_num_threads() == before


def test_median_ratio_compares_repeats_that_ran_side_by_side():
    fast = Timing("fast", 1, (1.0, 2.0, 1.0))
    slow = Timing("slow", 1, (4.0, 8.0, 40.0))  # the last repeat was disturbed
    assert median_ratio(fast, slow) == 4.0
    assert fast.median == 1.0 and fast.per_second == 1.0


def test_table_aligns_names_left_and_figures_right():
    lines = format_table(["method", "N=10"], [["safe", 1234.5], ["masked", 7.0]])
    assert lines == [
        "method   N=10",
        "------  -----",
        "safe    1,234",
        "masked   7.00",
    ]


def test_show_table_prints_the_table_it_returns_as_data():
    lines = []
    table = harness.show_table(
        lines.append, "steps/s", ["method", "N=10"], [("safe", 1234.5), ["masked", None]], ["n"]
    )
    assert table == {
        "title": "steps/s",
        "columns": ["method", "N=10"],
        "rows": [["safe", 1234.5], ["masked", None]],
        "notes": ["n"],
    }
    assert lines == ["steps/s", "  method   N=10", "  ------  -----", "  safe    1,234",
                     "  masked      -", "  n"]  # fmt: skip


def test_show_table_refuses_a_cell_a_results_file_cannot_hold():
    with pytest.raises(TypeError, match="Tensor"):
        harness.show_table(lambda line: None, "t", ["a"], [[torch.tensor(1.0)]])
    with pytest.raises(ValueError, match="2 cells for 1 columns"):
        harness.show_table(lambda line: None, "t", ["a"], [[1, 2]])
