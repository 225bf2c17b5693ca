"""The status bar's steps/s: the rate at which the step counter climbs, not lowered by the
one-off cost of a stretch's first step."""

from __future__ import annotations

import pytest

from gradviz.gui.run import worker


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(worker.time, "perf_counter", clock)
    return clock


def _run(meter, clock: Clock, first_step_s: float, step_s: float, steps: int) -> float:
    """A stretch: one slow first step, then ``steps`` steps of ``step_s``; the rate read at
    the last one (as a frame does)."""
    clock.now += first_step_s
    meter.stepped(1)
    done = 1
    for _ in range(steps):
        clock.now += step_s
        done += 1
        meter.stepped(done)
    return meter.rate(done)


def test_the_first_steps_warm_up_does_not_lower_the_rate(clock):
    meter = worker._RateMeter(0)
    # 2 s of warm-up (torch._dynamo's import) and then 10 steps/s: the counter climbs at 10/s.
    assert _run(meter, clock, first_step_s=2.0, step_s=0.1, steps=10) == pytest.approx(10.0)


def test_a_resumed_stretch_is_measured_from_its_own_first_step(clock):
    meter = worker._RateMeter(0)
    _run(meter, clock, first_step_s=0.1, step_s=0.1, steps=10)
    clock.now += 30.0  # paused for half a minute
    meter.restart(11)
    rate = _run(meter, clock, first_step_s=0.5, step_s=0.05, steps=10)
    assert rate == pytest.approx(20.0)
