"""Speed target of gradviz.watch (run with: pytest -m bench tests/bench/test_bench_watch.py)."""

import pytest

from gradviz.bench import watch


@pytest.mark.bench
def test_watch_at_its_defaults_costs_at_most_5_percent_of_a_training_step():
    lines = []
    result = watch.run(repeats=5, quick=False, emit=lines.append)
    assert result["target"]["met"], "\n".join(lines)


@pytest.mark.bench
def test_a_reader_sees_a_logged_step_within_a_second():
    result = watch.run(repeats=1, quick=True, emit=lambda line: None)
    assert result["follow_latency_ms"]["max"] < 1000
