"""Mixed precision: GradScaler's skipped steps are not failures, statistics are unscaled."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

import gradviz
from gradviz.cli import main
from gradviz.core.common.errors import GradvizError
from gradviz.core.record.reader import Reader

OVERFLOW_STEP = 3
STEPS = 6


def _setup(seed: int = 0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    return model, opt, x, y


def _loss(model, x, y, step: int, nan_at: int | None = None) -> torch.Tensor:
    loss = nn.functional.mse_loss(model(x), y)
    if step == OVERFLOW_STEP:
        # Finite, but times the scale (65536) past float32's largest value: the scaled
        # gradients overflow, as fp16 gradients do when the scale is too high.
        loss = loss * 1e35
    if step == nan_at:
        loss = loss * float("nan")
    return loss


def _true_norm(model) -> float:
    """The L2 norm of the first weight's unscaled gradient, in float64."""
    return float(model[0].weight.grad.double().norm())


def test_log_after_update_records_skipped_steps_and_unscaled_statistics(tmp_path):
    model, opt, x, y = _setup()
    scaler = torch.amp.GradScaler("cpu")
    expected = {}
    with gradviz.watch(model, tmp_path / "run", every=1, scaler=scaler) as rec:
        for step in range(STEPS):
            opt.zero_grad()
            loss = _loss(model, x, y, step)
            scaler.scale(loss).backward()
            scaler.step(opt)  # unscales the gradients in place; skips the overflowed step
            scaler.update()
            expected[step] = _true_norm(model)
            rec.log(loss=loss)
    reader = Reader(tmp_path / "run")
    stream = reader.rank(0)
    assert stream.skipped == [{"step": OVERFLOW_STEP, "scale": 65536.0, "new_scale": 32768.0}]
    assert reader.first_nonfinite() is None
    kept = [s for s in range(STEPS) if s != OVERFLOW_STEP]
    assert list(stream.step_numbers()) == kept
    series = stream.tensor("0.weight")
    np.testing.assert_allclose(series.grad_norm, [expected[s] for s in kept], rtol=1e-6)
    # The scalars are still logged at every step, the skipped one included.
    assert list(stream.scalar("loss").steps) == list(range(STEPS))


def test_log_before_the_scaler_step_divides_the_still_scaled_gradients(tmp_path):
    model, opt, x, y = _setup()
    reference, ref_opt, _, _ = _setup()  # the same run without a scaler
    scaler = torch.amp.GradScaler("cpu")
    with gradviz.watch(model, tmp_path / "run", every=1, scaler=scaler) as rec:
        for step in range(STEPS):
            opt.zero_grad()
            loss = _loss(model, x, y, step)
            scaler.scale(loss).backward()
            rec.log(loss=loss)  # the gradients are multiplied by the scale here
            scaler.step(opt)
            scaler.update()
            if step == 0:
                ref_opt.zero_grad()
                nn.functional.mse_loss(reference(x), y).backward()
                expected_first = _true_norm(reference)
    reader = Reader(tmp_path / "run")
    stream = reader.rank(0)
    assert [e["step"] for e in stream.skipped] == [OVERFLOW_STEP]
    assert stream.skipped[0]["scale"] == 65536.0 and stream.skipped[0]["new_scale"] == 32768.0
    assert reader.first_nonfinite() is None
    grad_norm = stream.tensor("0.weight").grad_norm
    np.testing.assert_allclose(grad_norm[0], expected_first, rtol=1e-6)
    # Unscaled: comparable with an unscaled run's gradients, not 65536 times larger.
    assert np.all(grad_norm < 100)


def test_a_nan_loss_under_a_scaler_is_a_failure_not_a_skip(tmp_path):
    model, opt, x, y = _setup()
    scaler = torch.amp.GradScaler("cpu")
    with gradviz.watch(model, tmp_path / "run", every=10, scaler=scaler) as rec:
        for step in range(STEPS):
            opt.zero_grad()
            loss = _loss(model, x, y, step, nan_at=5)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            rec.log(loss=loss)
    reader = Reader(tmp_path / "run")
    assert [e["step"] for e in reader.rank(0).skipped] == [OVERFLOW_STEP]
    first = reader.first_nonfinite()
    assert first["step"] == 5 and first["kind"] == "nan"


def test_the_scaler_is_found_on_the_optimizer_step(tmp_path, capsys):
    model, opt, x, y = _setup()
    scaler = torch.amp.GradScaler("cpu")
    with gradviz.watch(model, tmp_path / "run", every=1, optimizer=opt) as rec:
        for step in range(STEPS):
            opt.zero_grad()
            loss = _loss(model, x, y, step)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            rec.log(loss=loss)
    stream = Reader(tmp_path / "run").rank(0)
    assert [e["step"] for e in stream.skipped] == [OVERFLOW_STEP]
    assert list(stream.step_numbers()) == [s for s in range(STEPS) if s != OVERFLOW_STEP]
    assert list(stream.scalar("loss").steps) == list(range(STEPS))
    assert main(["inspect", str(tmp_path / "run")]) == 0
    assert "skipped by GradScaler" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "run"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["skipped_steps"] == [OVERFLOW_STEP] and summary["first_nonfinite"] is None
    # The wrappers are gone once the recording is closed: the scaler is as it was.
    assert "update" not in vars(scaler) and "scale" not in vars(scaler)


def test_a_scaler_that_is_not_a_grad_scaler_is_refused(tmp_path):
    w = torch.zeros(2, requires_grad=True)
    with pytest.raises(GradvizError, match="scaler= takes a torch.amp.GradScaler"):
        gradviz.watch({"w": w}, tmp_path / "run", scaler=object())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("placement", ["after update", "before step"])
def test_cuda_grad_scaler_skips_under_autocast_are_recorded_as_skips(tmp_path, placement):
    model, opt, x, y = _setup()
    model, x, y = model.cuda(), x.cuda(), y.cuda()
    scaler = torch.amp.GradScaler("cuda")
    with gradviz.watch(model, tmp_path / "run", every=1, scaler=scaler) as rec:
        for step in range(STEPS):
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = _loss(model, x, y, step)
            scaler.scale(loss).backward()
            if placement == "before step":
                rec.log(loss=loss)
            scaler.step(opt)
            scaler.update()
            if placement == "after update":
                rec.log(loss=loss)
    reader = Reader(tmp_path / "run")
    assert OVERFLOW_STEP in [e["step"] for e in reader.rank(0).skipped]
    assert reader.first_nonfinite() is None
    assert np.all(reader.rank(0).tensor("0.weight").grad_norm < 100)


def test_a_skipped_overflow_is_not_the_origin_of_a_later_nan(tmp_path):
    # The skipped step's scaled gradients overflow inside the modules' backward; the
    # module-level origin must name the later NaN's step, not that overflow.
    model, opt, x, y = _setup()
    scaler = torch.amp.GradScaler("cpu")
    nan_at = OVERFLOW_STEP + 2
    with gradviz.watch(model, tmp_path / "run", every=1, scaler=scaler) as rec:
        for step in range(STEPS):
            opt.zero_grad()
            loss = _loss(model, x, y, step, nan_at=nan_at)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            rec.log(loss=loss)
    first = Reader(tmp_path / "run").first_nonfinite()
    assert first["step"] == nan_at
    # The NaN is the loss's own (multiplied in outside every module): its forward, not a module's.
    origin = first["origin"]
    assert origin["step"] == nan_at and (origin["phase"], origin["module"]) == ("forward", "")
