"""The Hugging Face Trainer callback against the real package: a tiny model, random data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tiny_nets import tiny_net

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from gradviz.core.record.reader import Reader  # noqa: E402
from gradviz.integrations.transformers import GradvizCallback  # noqa: E402

STEPS = 6
NAN_STEP = 3


class TinyRegressor(torch.nn.Module):
    """What the Trainer needs: forward(**batch) -> {"loss": ...} (only the logits where no
    labels are given: the Trainer then computes the loss). ``returned``: each loss it
    returned, as a float."""

    def __init__(self, nan_at: int | None = None) -> None:
        super().__init__()
        self.net = tiny_net()
        self.nan_at = nan_at
        self.calls = 0
        self.returned: list[float] = []

    def forward(self, x, labels=None):
        out = self.net(x)
        if labels is None:
            return {"logits": out}
        loss = torch.nn.functional.mse_loss(out, labels)
        if self.calls == self.nan_at:
            loss = loss * float("nan")
        self.calls += 1
        self.returned.append(float(loss.detach()))
        return {"loss": loss, "logits": out}


def _dataset():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 4, generator=g), torch.randn(64, 1, generator=g)
    return [{"x": x[i], "labels": y[i]} for i in range(64)]


def _train(tmp_path, model, loss_func=None, **extra) -> Reader:
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=STEPS,
        per_device_train_batch_size=8,
        learning_rate=0.1,
        lr_scheduler_type="linear",
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        **extra,
    )
    callback = GradvizCallback(tmp_path / "run", every=2)
    trainer = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=_dataset(),
        callbacks=[callback],
        compute_loss_func=loss_func,
    )
    trainer.train()
    return Reader(tmp_path / "run")


def test_one_callback_records_gradients_learning_rate_and_the_logged_loss(tmp_path):
    reader = _train(tmp_path, TinyRegressor(nan_at=NAN_STEP), max_grad_norm=0.0)
    summary = reader.describe()
    assert summary["complete"] and summary["source"] == "transformers"
    assert summary["tensors"] == ["net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"]
    assert summary["first_nonfinite"]["step"] == NAN_STEP
    assert summary["first_nonfinite"]["tensor"] == "net.0.weight"
    stream = reader.rank(0)
    assert list(stream.step_numbers())[:3] == [0, 2, NAN_STEP]
    lr = stream.scalar("lr")
    assert list(lr.steps) == list(range(STEPS))
    # Linear decay from 0.1 to 0 over the run: the rate each step used.
    np.testing.assert_allclose(lr.values, [0.1 * (1 - s / STEPS) for s in range(STEPS)])
    loss = stream.scalar("loss")
    assert list(loss.steps) == list(range(STEPS))
    assert all(math.isfinite(v) for v in loss.values[:NAN_STEP])
    assert {"loss", "lr", "grad_norm", "learning_rate"} <= set(stream.scalar_names())


def test_the_loss_is_the_one_the_model_returned_nan_included_once_per_step(tmp_path):
    # The Trainer's logs replace a NaN loss (logging_nan_inf_filter): it logs 0.0 there.
    model = TinyRegressor(nan_at=NAN_STEP)
    stream = _train(tmp_path, model, max_grad_norm=0.0).rank(0)
    loss = stream.scalar("loss")
    assert list(loss.steps) == list(range(STEPS))
    np.testing.assert_array_equal(loss.values, model.returned)  # NaN from NAN_STEP on
    assert math.isnan(loss.values[NAN_STEP]) and 0.0 not in loss.values
    np.testing.assert_array_equal(stream.losses(), loss.values[stream.step_numbers()])
    # One value per optimizer step for every scalar (the summary repeats the last epoch).
    for name in stream.scalar_names():
        steps = list(stream.scalar(name).steps)
        assert steps == sorted(set(steps)), name
    assert list(stream.scalar("epoch").steps) == list(range(STEPS))
    assert "loss_filtered_by_trainer" not in stream.scalar_names()


def _mse(outputs, labels, num_items_in_batch=None):
    """A compute_loss_func: the Trainer's own loss, out of the callback's reach; NaN at
    its NAN_STEP-th call."""
    _mse.calls = getattr(_mse, "calls", 0) + 1
    loss = torch.nn.functional.mse_loss(outputs["logits"], labels)
    return loss * float("nan") if _mse.calls - 1 == NAN_STEP else loss


def test_a_loss_the_trainer_computes_is_marked_where_its_filter_may_have_replaced_it(tmp_path):
    _mse.calls = 0
    stream = _train(tmp_path, TinyRegressor(), loss_func=_mse, max_grad_norm=0.0).rank(0)
    loss = stream.scalar("loss")
    assert list(loss.steps) == list(range(STEPS))
    assert all(math.isfinite(v) and v > 0 for v in loss.values[:NAN_STEP])
    # The Trainer logged 0.0 from NAN_STEP on (NaN weights, NaN losses, all filtered).
    assert np.isnan(loss.values[NAN_STEP:]).all()
    marked = stream.scalar("loss_filtered_by_trainer")
    assert list(marked.steps) == list(range(NAN_STEP, STEPS)) and set(marked.values) == {1.0}


class _KinkAt(torch.nn.Module):
    """Identity forward; at call ``at`` its backward is 0 x Inf = NaN (sqrt at 0)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.calls = at, 0

    def forward(self, x):
        self.calls += 1
        if self.calls - 1 != self.at:
            return x
        return x + torch.sqrt((x - x.detach()).square())


class KinkedRegressor(torch.nn.Module):
    def __init__(self, nan_at: int) -> None:
        super().__init__()
        self.first, self.kink = torch.nn.Linear(4, 8), _KinkAt(nan_at)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x, labels=None):
        out = self.head(self.kink(self.first(x)))
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


def test_the_origin_survives_the_trainers_gradient_clipping(tmp_path):
    # max_grad_norm=1.0 (the Trainer's default) clips before the callback runs, and a NaN
    # total norm turns every gradient NaN: the origin still names the kink's backward.
    torch.manual_seed(0)
    reader = _train(tmp_path, KinkedRegressor(nan_at=NAN_STEP), max_grad_norm=1.0)
    first = reader.describe()["first_nonfinite"]
    assert first["step"] == NAN_STEP
    assert (first["origin"]["phase"], first["origin"]["module"]) == ("backward", "kink")
    assert "the output of module 'first'" in first["origin"]["cause"]
