"""Lightning: ``trainer = Trainer(callbacks=[GradvizCallback("run1")])`` records the run.

Gradients are read in ``on_before_optimizer_step``: after the backward pass (and, under
``precision="16-mixed"``, after Lightning's ``scaler.unscale_``), before gradient clipping,
so the statistics are unscaled and a NaN is seen in the tensor where it arose (clipping
spreads one NaN to every gradient). The steps are the trainer's ``global_step``. Under a
DDP strategy the recorder checks each rank's own gradients before the all-reduce (see
``gradviz.watch``), unless the strategy registers a communication hook of its own. The
training step's loss (``outputs["loss"]``) and the learning rate each optimizer used in that
step are scalars at every step, with whatever the module logs with ``self.log``
(``trainer.callback_metrics``, numbers only) when ``metrics=True``: one value per optimizer
step, also under ``accumulate_grad_batches`` (the loss is then the sum of the micro-batches'
losses, each of which Lightning divided by their count: their mean; the metrics are the
last micro-batch's).
"""

from __future__ import annotations

import os

import torch

from gradviz.core.record.recorder import DEFAULT_BUDGET_BYTES, DEFAULT_EVERY, Recorder
from gradviz.integrations._common import is_number, missing, start_recorder

try:  # the `lightning` package first; `pytorch_lightning` where only that one is installed
    from lightning.pytorch import Callback
except ImportError:  # pragma: no cover - exercised where only pytorch_lightning exists
    try:
        from pytorch_lightning import Callback
    except ImportError:
        raise missing("lightning", "Lightning", "lightning", "lightning") from None


class GradvizCallback(Callback):
    """Records the LightningModule's gradients into the recording at ``path``.

    ``every``: record gradient statistics every this many optimizer steps (and every step
    with a non-finite gradient); ``budget_bytes`` per rank as ``gradviz.watch`` takes it;
    ``metrics``: also record the numbers the module logs with ``self.log``.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        every: int = DEFAULT_EVERY,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        metrics: bool = True,
    ) -> None:
        super().__init__()
        self.path = path
        self.every = every
        self.budget_bytes = budget_bytes
        self.metrics = metrics
        self.recorder: Recorder | None = None
        self._loss: torch.Tensor | None = None  # the micro-batches' losses since the last step
        self._steps_seen = 0  # the trainer's global_step at the last batch's end

    def on_fit_start(self, trainer, pl_module) -> None:
        wrapped = getattr(trainer.strategy, "model", None)
        ddp_model = (
            wrapped if isinstance(wrapped, torch.nn.parallel.DistributedDataParallel) else None
        )
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        self._loss, self._steps_seen = None, trainer.global_step
        self.recorder = start_recorder(
            pl_module, self.path, self.every, self.budget_bytes, scaler, "lightning", ddp_model
        )

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if self.recorder is not None:  # the learning rates this step uses (a scheduler may
            # step before on_train_batch_end)
            self.recorder.log(step=trainer.global_step, **_learning_rates(trainer))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.recorder is None:
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            loss = loss.detach().reshape(())
            self._loss = loss if self._loss is None else self._loss + loss
        if trainer.global_step == self._steps_seen:
            return  # a micro-batch of a step still accumulating
        # global_step has moved past the step just taken.
        self._steps_seen = trainer.global_step
        step = trainer.global_step - 1
        values = {}
        if self._loss is not None:
            values["loss"], self._loss = self._loss, None
        if self.metrics:
            for name, value in trainer.callback_metrics.items():
                if name not in values and is_number(value):
                    values[name] = value
        self.recorder.add_scalars(step=step, **values)

    def on_fit_end(self, trainer, pl_module) -> None:
        self._close()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self._close()

    def _close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None


def _learning_rates(trainer) -> dict[str, float]:
    """``lr`` of the first optimizer's first parameter group, ``lr-<i>-<j>`` of the others."""
    rates = {}
    for i, opt in enumerate(trainer.optimizers):
        for j, group in enumerate(opt.param_groups):
            rates["lr" if (i, j) == (0, 0) else f"lr-{i}-{j}"] = float(group["lr"])
    return rates
