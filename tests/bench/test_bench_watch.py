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


@pytest.mark.bench
def test_rec_log_on_zeros_and_subnormals_costs_within_1_3x_of_dense_values(tmp_path):
    ms = watch.log_cost_by_content(tmp_path, repeats=3)
    assert ms["zeros+subnormals"] <= watch.CONTENT_TARGET * ms["dense"], ms


@pytest.mark.bench
@pytest.mark.skipif(
    not (watch.tensorboard_available() and watch.wandb_available()), reason="peers not installed"
)
def test_every_step_on_zero_heavy_and_subnormal_nets_costs_less_than_both_peers():
    lines = []
    result = watch.run(repeats=3, quick=False, emit=lines.append)
    assert result["every_step_below_peers"]["met"], "\n".join(lines)
