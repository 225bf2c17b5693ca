"""A fake distance-fit run for the worker and the session (no torch): step k's loss is
1 / (k + 1), NaN gradients from a chosen step. Import with ``from fake_run import FakeRun``
(pytest puts this folder on sys.path)."""

from __future__ import annotations

import numpy as np

from gradviz.core.common.health import Health
from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.settings.config import FitConfig

N, D = 4, 2


class FakeRun:
    """What the worker drives, without torch: step k's loss is 1 / (k + 1); from step
    ``nan_at`` on (0-based) its gradients are NaN. ``lrs`` records set_lr calls."""

    max_display = None

    def __init__(self, config: FitConfig, nan_at: int | None = None) -> None:
        self.config, self.nan_at = config, nan_at
        self.completed_steps = 0
        self.losses: list[float] = []
        self.lrs: list[float] = []
        self.first_nonfinite_grad_step: int | None = None

    @property
    def done(self) -> bool:
        return self.completed_steps >= self.config.steps

    def step(self, capture: bool = True) -> None:  # noqa: ARG002 - the worker's call
        k = self.completed_steps
        self.losses.append(1.0 / (k + 1))
        if self.nan_at is not None and k >= self.nan_at and self.first_nonfinite_grad_step is None:
            self.first_nonfinite_grad_step = k
        self.completed_steps += 1

    def set_lr(self, lr: float) -> None:
        self.lrs.append(lr)

    def snapshot(self, generation: int = 0) -> Snapshot:
        bad = self.first_nonfinite_grad_step is not None
        health = np.full((N, N), Health.NAN if bad else Health.FINITE, np.uint8)
        grads = np.full((N, N), np.nan if bad else 0.5, np.float32)
        coords = np.arange(N * D, dtype=np.float32).reshape(N, D)
        distances = np.ones((N, N), np.float32)
        return Snapshot(
            generation=generation,
            step=self.completed_steps,
            loss=self.losses[-1] if self.losses else 1.0,
            loss_history=np.array(self.losses, dtype=np.float64),
            reference_loss=None,
            coords=coords,
            target_coords=coords,
            distances=distances,
            target_distances=distances,
            error=distances * 0,
            squared=None,
            entry_grads=grads,
            entry_health=health,
            coord_grads=np.zeros((N, D), np.float32),
            coord_health=np.zeros((N, D), np.uint8),
            param_health=(),
            jacobians=None,
            first_nonfinite_grad_step=self.first_nonfinite_grad_step,
            first_nonfinite_loss_step=None,
            steps_per_second=float("nan"),
            device="cpu",
            method=self.config.method,
            done=self.done,
        )
