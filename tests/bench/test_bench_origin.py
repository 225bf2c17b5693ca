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
