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

from gradviz.core.record import stats
from gradviz.core.record.recorder import DEFAULT_BUDGET_BYTES, Recorder
from gradviz.core.record.writer import fit_into

#: At most this many recorded steps carry matrices.
MAX_SNAPSHOTS = 200


class FitRecording:
    """Records a DistanceFitRun; call ``after_step(run)`` after each step, then ``close()``."""

    def __init__(self, run, path: str | os.PathLike, budget_bytes: int = DEFAULT_BUDGET_BYTES):
        # Snapshots reduced on the run's device: no full (N, N) host copies per recorded step.
        run.max_display = stats.MAX_IMAGE_SIDE
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
                    "distances": _small(snap.distances),
                    "error": _small(snap.error),
                    "entry_health": _small(snap.entry_health),
                },
            )

    def close(self) -> None:
        self.recorder.close()


def _small(matrix: np.ndarray) -> np.ndarray:
    """At most MAX_IMAGE_SIDE a side (block means; block maxima of Health codes)."""
    return fit_into(np.asarray(matrix), (stats.MAX_IMAGE_SIDE, stats.MAX_IMAGE_SIDE))
