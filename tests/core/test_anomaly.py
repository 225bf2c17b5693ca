"""Diagnose: a step re-run under the non-finite tracer names the failing operation, the
forward call that created it, the entries and the cause, and leaves no anomaly mode or
warning behind."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab.anomaly import (
    diagnose_first_nonfinite,
    diagnose_step,
    pin_parameters,
    replay_to_first_nonfinite,
)
from gradviz.core.lab.explain import explain_first_nan
from gradviz.core.lab.fit import DistanceFitRun
from gradviz.core.settings.config import FitConfig as _FitConfig

#: The small run these tests were written for (the shared defaults are the app's
#: teaching experiment, 200 points for 2000 steps); a test's own values win.
FitConfig = partial(_FitConfig, target="gaussian", n=10, method="safe", lr=1e-3, steps=500)

DIVERGING = {"method": "safe", "optimizer": "sgd", "lr": 1e3, "steps": 100}


def near_coincident_at_scale_100() -> np.ndarray:
    """(32, 3): 16 points at coordinate scale 100, each with a partner 1e-4 away."""
    rng = np.random.default_rng(0)
    base = 100 * rng.standard_normal((16, 3))
    return np.concatenate([base, base + 1e-4 * rng.standard_normal((16, 3))])


def test_naive_at_step_0_names_sqrt_backward_and_its_call_in_distances(recwarn):
    config = FitConfig(method="naive")
    report = diagnose_step(config)
    assert report.found and report.step == 0
    assert report.backward.operation == "SqrtBackward0"
    origin = report.backward.origin
    assert origin.short_filename == "gradviz/core/lab/distances.py"
    assert origin.function == "naive" and "torch.sqrt" in origin.code
    assert "SqrtBackward0" in report.message
    assert report.forward is None  # sqrt(0) = 0: the forward pass is finite
    assert math.isfinite(report.loss)
    assert "SqrtBackward0" in report.summary and "distances.py" in report.summary
    # The tracer's answer: the diagonal entries, 0 / 0 in sqrt's backward, and why.
    traced = report.origin
    assert (traced.phase, traced.op, traced.module) == ("backward", "aten.div.Tensor", "")
    assert traced.count == config.n  # the N diagonal entries
    assert traced.indices == ((0, 0), (1, 1), (2, 2), (3, 3))
    assert traced.cause_code == "sqrt_at_zero" and "sqrt at 0" in report.summary
    assert traced.how == "replayed"  # seen in the step run again, not as the run ran it
    assert len(recwarn) == 0
    assert not torch.is_anomaly_enabled()


def test_safe_reports_no_anomaly(recwarn):
    report = diagnose_step(FitConfig(method="safe"))
    assert not report.found
    assert report.backward is None and report.forward is None and report.message == ""
    assert report.summary == "No operation made a NaN or Inf in this step."
    assert len(recwarn) == 0 and not torch.is_anomaly_enabled()


def test_masked_on_near_coincident_points_names_sqrt_in_the_forward_pass():
    report = diagnose_step(FitConfig(method="masked", n=32), near_coincident_at_scale_100())
    assert report.forward.operation == "aten.sqrt.default"
    assert report.forward.origin.function == "masked"
    assert report.forward.origin.short_filename == "gradviz/core/lab/distances.py"
    # The origin is the forward's sqrt of a negative Gram square; the backward only spread it.
    assert report.backward is None
    assert report.origin.cause_code == "domain" and "sqrt of a negative number" in report.summary
    assert math.isnan(report.loss)


def test_diverging_run_is_replayed_to_its_first_nan_step_and_blames_the_overflow():
    plain = DistanceFitRun(FitConfig(**DIVERGING))
    plain.run()
    report = diagnose_first_nonfinite(FitConfig(**DIVERGING))
    assert report.step == plain.first_nonfinite_grad_step is not None
    # Overflow of finite coordinates, inside the exact distances' forward.
    assert report.forward.operation == "aten._cdist_forward.default"
    assert report.origin.cause_code == "float_overflow" and report.origin.kind == "inf"
    assert report.origin.spread_code == "division_by_zero"  # then Inf / 0 on the diagonal
    assert report.backward is None and not math.isfinite(report.loss)


def test_replay_pins_the_same_parameters_as_a_stop_on_nan_run():
    run = DistanceFitRun(FitConfig(**DIVERGING, stop_on_nan=True))
    run.run()
    pinned = replay_to_first_nonfinite(FitConfig(**DIVERGING))
    assert pinned.step == run.completed_steps == run.first_nonfinite_grad_step
    live = pin_parameters(run)
    assert list(live) == ["coords"] and live["coords"].dtype == np.float32
    np.testing.assert_array_equal(pinned.parameters["coords"], live["coords"])
    from_live = diagnose_step(run.config, live, step=run.completed_steps)
    from_replay = diagnose_step(FitConfig(**DIVERGING), pinned.parameters, step=pinned.step)
    assert from_live.summary == from_replay.summary


def test_replayed_snapshot_shows_the_first_nan_step_as_a_stop_on_nan_capture_does():
    run = DistanceFitRun(FitConfig(**DIVERGING, stop_on_nan=True))
    while not run.done:
        run.step(capture=True)
    live = run.snapshot()
    replayed = replay_to_first_nonfinite(FitConfig(**DIVERGING)).snapshot
    assert replayed.step == live.step == run.first_nonfinite_grad_step
    np.testing.assert_array_equal(replayed.coords, live.coords)
    np.testing.assert_array_equal(replayed.entry_health, live.entry_health)
    np.testing.assert_array_equal(replayed.loss_history, live.loss_history)
    assert explain_first_nan(replayed) == explain_first_nan(live)


def test_network_run_is_diagnosed_from_its_parameters_by_name():
    config = FitConfig(method="naive", net="3-8-3:tanh", steps=3)
    run = DistanceFitRun(config)
    report = diagnose_step(config, pin_parameters(run))
    assert report.backward.operation == "SqrtBackward0"
    with pytest.raises(GradvizError, match="come from a network"):
        diagnose_step(config, np.zeros((10, 3)))


def test_pinned_parameters_that_do_not_fit_the_run_are_clear_errors():
    with pytest.raises(GradvizError, match=r"shape \(4, 3\)"):
        diagnose_step(FitConfig(method="naive"), np.zeros((4, 3)))
    with pytest.raises(GradvizError, match="pinned parameters are 0.weight"):
        diagnose_step(FitConfig(method="naive"), {"0.weight": np.zeros((3, 3))})


def test_run_that_stays_finite_has_nothing_to_diagnose():
    report = diagnose_first_nonfinite(FitConfig(method="safe", steps=20))
    assert not report.found and report.step is None
    assert "stays finite for all 20 steps" in report.summary


def test_replay_stops_when_asked():
    calls = []

    def stop_after_three() -> bool:
        calls.append(1)
        return len(calls) > 3

    assert diagnose_first_nonfinite(FitConfig(**DIVERGING), stop_after_three) is None
    assert len(calls) == 4
