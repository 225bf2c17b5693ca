"""Speed targets of the NaN tracer (run with: pytest -m bench tests/bench/test_bench_origin.py)."""

import pytest

from gradviz.bench import origin


@pytest.mark.bench
def test_tracing_and_watching_origins_stay_within_their_targets():
    lines = []
    result = origin.run(repeats=3, quick=False, emit=lines.append)
    assert result["target"]["met"], "\n".join(lines)


def test_each_case_is_a_ratio_to_the_bare_step_timed_in_its_own_group(monkeypatch):
    from gradviz.bench.harness import Timing

    def time_group(build, folder, cases, calls, windows, repeats):
        traced = "trace_nonfinite" in cases
        assert windows == (10 if traced else calls)  # watched: one step a window
        bare = 2.0 if traced else 1.0  # the two groups' bare steps differ
        seconds = {"trace_nonfinite": 3.0, "detect_anomaly": 8.0}
        seconds |= {"watch origin": 1.04, "watch no origin": 1.02}
        return {n: Timing(n, calls, (seconds.get(n, bare),) * repeats) for n in cases}

    monkeypatch.setattr(origin, "time_group", time_group)
    lines = []
    result = origin.run(repeats=2, quick=False, emit=lines.append)
    ratios = result["ratio_to_bare"]["transformer"]
    assert ratios["trace_nonfinite"] == 1.5 and ratios["detect_anomaly"] == 4.0
    assert ratios["watch origin"] == 1.04 and ratios["bare, control (beside traces)"] == 1.0
    assert result["ms"]["transformer"]["bare (beside traces)"] == 2000.0
    assert result["ms"]["transformer"]["bare"] == 1000.0
    assert result["target"]["met"] and any("bare (beside traces)" in line for line in lines)


def test_its_tables_are_returned_as_data_as_they_were_printed(monkeypatch):
    """The results file carries the printed tables (the Performance page renders them)."""
    from gradviz.bench.harness import Timing, format_table

    def time_group(build, folder, cases, calls, windows, repeats):
        bare = 2.0 if "trace_nonfinite" in cases else 1.0
        seconds = {"trace_nonfinite": 3.0, "detect_anomaly": 8.0, "watch origin": 1.04}
        return {n: Timing(n, calls, (seconds.get(n, bare),) * repeats) for n in cases}

    monkeypatch.setattr(origin, "time_group", time_group)
    lines = []
    result = origin.run(repeats=2, quick=False, emit=lines.append)
    ms, ratios = result["tables"]
    assert ms["title"] == "CPU ms per training step"
    assert ms["columns"] == ["case", "MNIST CNN, B=64", "6-layer MLP, B=64", "6-layer encoder"]
    rows = {row[0]: row[1:] for row in ratios["rows"]}
    assert rows["trace_nonfinite"] == [1.5, 1.5, 1.5] and rows["watch origin"] == [1.04] * 3
    assert {row[0]: row[1] for row in ms["rows"]}["bare (beside traces)"] == 2000.0
    assert "watch cases: to the one beside them" in ratios["notes"][-1]
    for table in (ms, ratios):
        printed = ["  " + line for line in format_table(table["columns"], table["rows"])]
        start = lines.index(table["title"])
        assert lines[start + 1 : start + 1 + len(printed)] == printed
