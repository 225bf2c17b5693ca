"""Hugging Face: ``Trainer(..., callbacks=[GradvizCallback("run1")])`` records the run.

Gradients are read in ``on_pre_optimizer_step``, just before ``optimizer.step()``: after the
Trainer's gradient clipping (``max_grad_norm``, 1.0 by default), which spreads one NaN to
every gradient, so set ``max_grad_norm=0`` to see which tensor a NaN arose in. Under fp16
the Trainer's GradScaler is followed (skipped steps are recorded as skipped, statistics
unscaled). Steps count optimizer steps from 0: step ``s`` is the Trainer's ``global_step``
``s + 1``. The learning rate each step used is a scalar at every step; the numbers the
Trainer logs (``loss``, ``grad_norm``, ``learning_rate``, ...) are scalars at the steps it
logs them (every ``logging_steps``; its ``logging_nan_inf_filter``, on by default, replaces
a NaN loss in those logs by an average). Under DDP every rank writes its stream; the
Trainer hands callbacks the unwrapped model, so each rank's gradients are read after the
all-reduce there (the first non-finite step is right; the rank is not).
"""

from __future__ import annotations

import os

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

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        scaler = getattr(optimizer, "scaler", None)  # accelerate's optimizer under fp16
        self.recorder = start_recorder(
            model, self.path, self.every, self.budget_bytes, scaler, "transformers"
        )

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        if self.recorder is None:
            return
        rates = {}
        if optimizer is not None:
            groups = optimizer.param_groups
            rates = {"lr" if j == 0 else f"lr-{j}": float(g["lr"]) for j, g in enumerate(groups)}
        self.recorder.log(step=state.global_step, **rates)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.recorder is None or not logs or state.global_step < 1:
            return
        numbers = {name: value for name, value in logs.items() if is_number(value)}
        if numbers:
            self.recorder.add_scalars(step=state.global_step - 1, **numbers)

    def on_train_end(self, args, state, control, **kwargs):
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None
