"""Speed target of the Runs page: drawing a run of 100,000 logged steps (smoothed, with 100
NaN marks) takes under 150 ms, painting included, so a followed recording re-read every
0.5 s leaves the window responsive
(run with: pytest -m bench tests/bench/test_bench_runs_page.py -s).
"""

import statistics
import time

import numpy as np
import pytest

TARGET_MS = 150.0
STEPS = 100_000


@pytest.mark.bench
def test_a_100000_step_run_is_drawn_within_150_ms(qtbot):
    from gradviz.core.record.run_series import live_series
    from gradviz.gui.pages.runs.overlay import RunsOverlay

    page = RunsOverlay()
    qtbot.addWidget(page)
    page.resize(1200, 700)
    page.show()
    qtbot.waitExposed(page)
    losses = np.exp(-np.arange(STEPS) / 3e4) + 0.01 * np.random.default_rng(0).random(STEPS)
    losses[50_000:50_100] = np.nan
    series = live_series("big", losses, time.time() + 0.01 * np.arange(STEPS))
    run = page._new_run("big")
    page.set_series("big", series)
    qtbot.waitUntil(lambda: len(run.drawn.steps) == STEPS)
    times = []
    for _ in range(7):
        started = time.perf_counter()
        page._draw_run(run)
        page.plot.repaint()  # the painted frame, not only the request for one
        times.append((time.perf_counter() - started) * 1000)
    median = statistics.median(times)
    print(f"\nRuns page: one {STEPS:,}-step run drawn in {median:.0f} ms (median of 7)")
    assert median < TARGET_MS, f"drawing took {median:.0f} ms (target {TARGET_MS:.0f} ms)"
