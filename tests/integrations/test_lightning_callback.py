"""The Lightning callback against the real package: a tiny model, random data, a few steps."""

from __future__ import annotations

import functools
import importlib.util
import math

import numpy as np
import pytest
import torch
from tiny_nets import tiny_net

from gradviz.core.record.reader import Reader

# Only whether Lightning is there: importing it takes ~10 s, which every pytest-xdist worker
# would pay at collection although one of them runs these tests (_lightning imports it).
if importlib.util.find_spec("lightning") is None:
    pytest.skip("Lightning is not installed (the lightning extra)", allow_module_level=True)

NAN_STEP = 4
STEPS = 7
# Lightning's advice for real runs (more data-loader workers, a logger), not failures.
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*does not have many workers:UserWarning",
    "ignore:.*(smaller than the logging interval|LightningModule.log).*:UserWarning",
    "ignore::DeprecationWarning",
    # Lightning 2.6 on torch 2.13's pytree (theirs to change).
    "ignore:.*LeafSpec.*:FutureWarning",
)


@functools.cache
def _lightning():
    """``lightning.pytorch`` and TinyModule (a LightningModule), imported on first use."""
    import lightning.pytorch as pl

    class TinyModule(pl.LightningModule):
        def __init__(self, nan_at: int | None = None) -> None:
            super().__init__()
            self.net = tiny_net()
            self.nan_at = nan_at
            self.returned: list[float] = []  # each training step's loss, as returned

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            if self.global_step == self.nan_at:
                loss = loss * float("nan")
            self.log("train_mse", loss.detach())
            self.returned.append(float(loss.detach()))
            return loss

        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            sched = torch.optim.lr_scheduler.StepLR(opt, 2, 0.5)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    return pl, TinyModule


def _tiny_module(nan_at: int | None = None):
    return _lightning()[1](nan_at=nan_at)


def _data():
    g = torch.Generator().manual_seed(0)
    ds = torch.utils.data.TensorDataset(
        torch.randn(64, 4, generator=g), torch.randn(64, 1, generator=g)
    )
    return torch.utils.data.DataLoader(ds, batch_size=8)


def _fit(tmp_path, module, **trainer_args):
    from gradviz.integrations.lightning import GradvizCallback

    pl = _lightning()[0]
    callback = GradvizCallback(tmp_path / "run", every=3)
    trainer = pl.Trainer(
        max_steps=STEPS,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback],
        default_root_dir=tmp_path,
        **trainer_args,
    )
    trainer.fit(module, _data())
    return Reader(tmp_path / "run")


def test_one_callback_records_gradients_loss_and_learning_rate(tmp_path):
    reader = _fit(tmp_path, _tiny_module(nan_at=NAN_STEP))
    summary = reader.describe()
    assert summary["complete"] and summary["source"] == "lightning"
    assert summary["tensors"] == ["net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"]
    stream = reader.rank(0)
    # Every 3rd step and the first non-finite one (and those after it: NaN weights).
    assert list(stream.step_numbers())[:3] == [0, 3, NAN_STEP]
    assert summary["first_nonfinite"]["step"] == NAN_STEP
    assert summary["first_nonfinite"]["tensor"] == "net.0.weight"
    loss = stream.scalar("loss")
    assert list(loss.steps) == list(range(STEPS))
    assert all(math.isfinite(v) for v in loss.values[:NAN_STEP]) and math.isnan(
        loss.values[NAN_STEP]
    )
    lr = stream.scalar("lr")
    np.testing.assert_allclose(lr.values, [0.1 * 0.5 ** (s // 2) for s in range(STEPS)])
    assert "train_mse" in stream.scalar_names()


def test_the_step_record_carries_the_training_steps_loss(tmp_path):
    stream = _fit(tmp_path, _tiny_module()).rank(0)
    recorded = stream.step_numbers()
    loss = stream.scalar("loss")
    np.testing.assert_array_equal(stream.losses(), loss.values[recorded])


def test_the_lightning_example_records_a_run(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "resources" / "examples" / "lightning_callback.py"
    spec = importlib.util.spec_from_file_location("lightning_callback", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.train(tmp_path / "run", steps=12, every=5)
    summary = Reader(tmp_path / "run").describe()
    assert summary["complete"] and summary["first_nonfinite"] is None
    assert {"loss", "lr", "train_loss"} <= set(summary["scalars"])
    assert Reader(tmp_path / "run").rank(0).scalar("loss").steps.tolist() == list(range(12))


def test_gradient_accumulation_gives_one_value_per_optimizer_step(tmp_path):
    module = _tiny_module()
    stream = _fit(tmp_path, module, accumulate_grad_batches=2).rank(0)
    loss = stream.scalar("loss")
    assert list(loss.steps) == list(range(STEPS))  # not step 0 three times
    # Each step's loss: the mean of its two micro-batches' losses (float64 reference).
    micro = np.array(module.returned[: 2 * STEPS], dtype=np.float64).reshape(STEPS, 2)
    np.testing.assert_allclose(loss.values, micro.mean(axis=1), rtol=1e-6)
    for name in stream.scalar_names():
        steps = list(stream.scalar(name).steps)
        assert steps == sorted(set(steps)), name


# Every optimizer step is skipped, so the scheduler steps before any did: torch says so.
@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)`:UserWarning")
def test_a_scaler_that_skips_every_step_still_has_the_steps_of_the_interval(tmp_path):
    # 16-mixed on the CPU with an init scale far too high: float16's backward overflows at
    # every step, and the GradScaler skips them all (the scale halving each time).
    from lightning.pytorch.plugins.precision import MixedPrecision

    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**60)
    reader = _fit(tmp_path, _tiny_module(), plugins=[MixedPrecision("16-mixed", "cpu", scaler)])
    stream = reader.rank(0)
    assert [e["step"] for e in stream.skipped] == list(range(STEPS))
    assert [e["scale"] for e in stream.skipped[:2]] == [2.0**60, 2.0**59]
    assert list(stream.step_numbers()) == [0, 3, 6]  # every=3, skipped as they all were
    assert reader.first_nonfinite() is None
