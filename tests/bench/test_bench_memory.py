"""Memory targets (run with: pytest -m bench tests/bench/test_bench_memory.py -s; about 8 GB
and several minutes at N = 20000)."""

import sys

import pytest

from gradviz.bench import memory as memory_bench


@pytest.fixture(scope="module")
def figures():
    return memory_bench.run(repeats=1, quick=False, emit=print)


@pytest.mark.bench
@pytest.mark.parametrize("n", memory_bench.SIZES)
def test_the_app_costs_at_most_a_gigabyte_more_than_the_headless_run(figures, n):
    row = figures[str(n)]
    if row["app"] is None:
        pytest.skip(row["skipped"])
    assert row["app"] <= row["headless"] + memory_bench.TARGET_APP_OVER_HEADLESS


@pytest.mark.bench
@pytest.mark.parametrize("n", memory_bench.SIZES)
def test_the_estimate_is_within_a_third_of_the_headless_peak(figures, n):
    row = figures[str(n)]
    if row["headless"] is None:
        pytest.skip(row["skipped"])
    assert row["headless"] / 1.35 <= row["estimate"] <= row["headless"] * 1.35


def test_peak_rss_of_a_child_counts_what_it_allocated():
    code = "b = bytearray(300_000_000); b[::4096] = b'x' * len(b[::4096])"
    assert memory_bench.peak_rss([sys.executable, "-c", code]) >= 300_000_000
