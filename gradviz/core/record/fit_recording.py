"""``gradviz fit --record RUN``: a lab run recorded in the same format as ``gradviz.watch``.

The run's parameters (the free coordinates, or the network's weights) are recorded from the
optimizer's step like a watched model; at most ``MAX_SNAPSHOTS`` recorded steps also carry
the run's matrices (distances, error, per-entry gradient health), downsampled to at most
``stats.MAX_IMAGE_SIDE`` a side, so a long run stays small.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict

import numpy as np
import torch
import torch.nn.functional as F

from gradviz.core.record import stats
from gradviz.core.record.recorder import DEFAULT_BUDGET_BYTES, Recorder

#: At most this many recorded steps carry matrices.
MAX_SNAPSHOTS = 200


class FitRecording:
    """Records a DistanceFitRun; call ``after_step(run)`` after each step, then ``close()``."""

    def __init__(self, run, path: str | os.PathLike, budget_bytes: int = DEFAULT_BUDGET_BYTES):
        steps = max(1, run.config.steps)
        self.every = max(1, math.ceil(steps / MAX_SNAPSHOTS))
        self.recorder = Recorder(
            dict(run._named_params),
            path,
            every=self.every,
            optimizer=run.optimizer,
            budget_bytes=budget_bytes,
            source="fit",
            meta={"config": asdict(run.config)},
        )

    def after_step(self, run) -> None:
        """Add the loss, and on snapshot steps the matrices, to the step just taken."""
        step = run.completed_steps - 1
        if step < 0:
            return
        self.recorder.log(loss=float(run.loss_history[-1]))
        if step % self.every == 0:
            snap = run.snapshot()
            self.recorder.add_images(
                step,
                {
                    "distances": _block_mean(snap.distances),
                    "error": _block_mean(snap.error),
                    "entry_health": _block_max(snap.entry_health),
                },
            )

    def close(self) -> None:
        self.recorder.close()


def _factors(shape: tuple[int, int]) -> tuple[int, int]:
    return tuple(math.ceil(n / stats.MAX_IMAGE_SIDE) for n in shape)


def _block_mean(matrix: np.ndarray) -> np.ndarray:
    """(N, N) float32 -> at most MAX_IMAGE_SIDE a side, block means (NaN/Inf kept visible)."""
    k = _factors(matrix.shape)
    if k == (1, 1):
        return np.asarray(matrix, dtype=np.float32)
    t = torch.from_numpy(np.asarray(matrix, dtype=np.float32))[None, None]
    return F.avg_pool2d(t, k, ceil_mode=True)[0, 0].numpy()


def _block_max(codes: np.ndarray) -> np.ndarray:
    """(N, N) uint8 Health codes -> at most MAX_IMAGE_SIDE a side, the most alarming code."""
    k = _factors(codes.shape)
    if k == (1, 1):
        return np.asarray(codes, dtype=np.uint8)
    t = torch.from_numpy(np.asarray(codes, dtype=np.float32))[None, None]
    return F.max_pool2d(t, k, ceil_mode=True)[0, 0].numpy().astype(np.uint8)
