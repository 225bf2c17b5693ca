"""Hugging Face: ``Trainer(..., callbacks=[GradvizCallback("run1")])`` records the run.

Gradients are read in ``on_pre_optimizer_step``, just before ``optimizer.step()``: after the
Trainer's gradient clipping (``max_grad_norm``, 1.0 by default), which spreads one NaN to
every gradient, so set ``max_grad_norm=0`` to see which tensor a NaN arose in. Under fp16
the Trainer's GradScaler is followed (skipped steps are recorded as skipped, statistics
unscaled). Steps count optimizer steps from 0: step ``s`` is the Trainer's ``global_step``
``s + 1``. The learning rate each step used is a scalar at every step; the numbers the
Trainer logs (``grad_norm``, ``learning_rate``, ``epoch``, ...) are scalars at the steps it
logs them, once per step (its summary at the end repeats ``epoch`` at the last step: kept
once).

The loss is the one the model returned (a forward hook on the model reads ``loss`` from its
training forwards' outputs), one value per optimizer step, NaN and Inf as they were: the
Trainer's own logged ``loss`` is an average since its last log in which its
``logging_nan_inf_filter`` (on by default) replaced a NaN or Inf loss, so a NaN step logged
0.0. Where the model returns no loss (the Trainer computes it: ``compute_loss_func``, a label
smoother, an overridden ``compute_loss``) the logged one is kept, except at a step the filter
may have changed (it is on and the step's logged ``grad_norm`` is not finite): there ``loss``
is NaN (not known) and the scalar ``loss_filtered_by_trainer`` is 1.

Under DDP every rank writes its stream; the Trainer hands callbacks the unwrapped model, so
each rank's gradients are read after the all-reduce there (the first non-finite step is
right; the rank is not).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import torch

from gradviz.core.record.recorder import DEFAULT_BUDGET_BYTES, DEFAULT_EVERY, Recorder
from gradviz.integrations._common import is_number, missing, start_recorder

try:
    from transformers import TrainerCallback
except ImportError:
    raise missing(
        "transformers", "transformers", "transformers", "transformers accelerate"
    ) from None


class GradvizCallback(TrainerCallback):
    """Records the Trainer's model's gradients into the recording at ``path``.

    ``every``: record gradient statistics every this many optimizer steps (and every step
    with a non-finite gradient); ``budget_bytes`` per rank as ``gradviz.watch`` takes it.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        every: int = DEFAULT_EVERY,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
    ) -> None:
        self.path = path
        self.every = every
        self.budget_bytes = budget_bytes
        self.recorder: Recorder | None = None
        self._losses: ReturnedLoss | None = None
        self._model_loss = False  # a step's loss was the model's own
        self._logged_at: dict[str, int] = {}  # name -> the last step it was recorded at

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        scaler = getattr(optimizer, "scaler", None)  # accelerate's optimizer under fp16
        self.recorder = start_recorder(
            model, self.path, self.every, self.budget_bytes, scaler, "transformers"
        )
        self._losses = ReturnedLoss(model) if model is not None else None
        self._model_loss = False
        self._logged_at = {}

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        if self.recorder is None:
            return
        rates = {}
        if optimizer is not None:
            groups = optimizer.param_groups
            rates = {"lr" if j == 0 else f"lr-{j}": float(g["lr"]) for j, g in enumerate(groups)}
        loss = self._losses.take() if self._losses is not None else None
        self._model_loss = self._model_loss or loss is not None
        self.recorder.log(loss=loss, step=state.global_step, **rates)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.recorder is None or not logs or state.global_step < 1:
            return
        step = state.global_step - 1
        numbers = {name: value for name, value in logs.items() if is_number(value)}
        if "loss" in numbers:
            numbers.update(self._logged_loss(args, numbers))
        # One value per step: the Trainer's summary at the end repeats the last ``epoch``.
        numbers = {n: v for n, v in numbers.items() if self._logged_at.get(n) != step}
        self._logged_at.update(dict.fromkeys(numbers, step))
        if numbers:
            self.recorder.add_scalars(step=step, **numbers)

    def _logged_loss(self, args, numbers: dict) -> dict:
        """What the Trainer's logged ``loss`` adds: nothing where the model's own loss is
        recorded at every step; else the logged one, or NaN and the mark where the
        Trainer's filter may have replaced a NaN or Inf loss by an average."""
        logged = numbers.pop("loss")
        if self._model_loss:
            return {}
        grad_norm = numbers.get("grad_norm")
        filtered = getattr(args, "logging_nan_inf_filter", False) and (
            grad_norm is not None and not math.isfinite(float(grad_norm))
        )
        if filtered:
            return {"loss": math.nan, "loss_filtered_by_trainer": 1.0}
        return {"loss": logged}

    def on_train_end(self, args, state, control, **kwargs):
        if self._losses is not None:
            self._losses.remove()
            self._losses = None
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None


class ReturnedLoss:
    """The losses the model's training forwards returned since the last optimizer step (a
    forward hook on the model, which the Trainer calls, wrapped by DDP or not): 0-d float64
    tensors on the model's device, never read here (no synchronisation)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._parts: list[torch.Tensor] = []
        self._forwards = 0
        self._summed = False
        self._handle = model.register_forward_hook(self._heard, with_kwargs=True)

    def _heard(self, module, args, kwargs, output) -> None:
        if not module.training or not torch.is_grad_enabled():
            return  # an evaluation's forward
        self._forwards += 1
        loss = returned_loss(output)
        if loss is not None:
            self._parts.append(loss.detach().reshape(()).to(torch.float64))
            # Normalised by the whole accumulated batch's items: the step's loss is the sum.
            self._summed = kwargs.get("num_items_in_batch") is not None

    def take(self) -> torch.Tensor | None:
        """The loss of the optimizer step now ending: its micro-batches' losses summed where
        the model divided each by the items of all of them (``num_items_in_batch``), else
        their mean; None where a training forward returned no loss."""
        parts, forwards = self._parts, self._forwards
        self._parts, self._forwards = [], 0
        if not parts or len(parts) != forwards:
            return None
        stacked = torch.stack(parts)
        return stacked.sum() if self._summed else stacked.mean()

    def remove(self) -> None:
        self._handle.remove()


def returned_loss(output) -> torch.Tensor | None:
    """The one-element ``loss`` of a model's output (a dict or ``ModelOutput``, or an object
    with a ``loss`` attribute), else None (a tuple's first element may be logits)."""
    loss = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return loss
    return None
