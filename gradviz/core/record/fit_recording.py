"""``gradviz fit --record RUN``: a lab run recorded in the same format as ``gradviz.watch``.

The run's parameters (the free coordinates, or the network's weights) are recorded from the
optimizer's step like a watched model; at most ``MAX_SNAPSHOTS`` recorded steps also carry
the run's matrices (distances, error, per-entry gradient health), downsampled to at most
``stats.MAX_IMAGE_SIDE`` a side, so a long run stays small, and the (N, D) coordinate
gradients with their health codes (only where N is at most ``stats.MAX_IMAGE_SIDE``).
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
    """Records a DistanceFitRun stepped through ``step(run)``; then ``close()``.

    For snapshots reduced on the run's device, build the run with ``max_display`` at most
    ``stats.MAX_IMAGE_SIDE`` (the CLI does); a larger one (the app's) is reduced here.
    """

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

    def step(self, run, capture: bool = False) -> float:
        """One step of ``run``, recorded: its gradients (from the optimizer's step), its
        loss, and on snapshot steps the matrices this very step captured."""
        index = run.completed_steps
        pictures = index % self.every == 0
        loss = run.step(capture=capture or pictures)
        if run.stopped_on_nan:
            # The step that stopped the run never reached the optimizer (and its hook).
            self.recorder.record(loss=loss)
        else:
            self.recorder.log(loss=loss)
        if pictures:
            snap = run.snapshot()  # this step's capture, not a fresh forward and backward
            images = {"distances": snap.distances, "error": snap.error}
            images["entry_health"] = snap.entry_health
            images = {k: _small(v) for k, v in images.items()}
            if snap.coord_grads.shape[0] <= stats.MAX_IMAGE_SIDE:
                # Kept whole or not at all: a reduced (N, D) would name the wrong points.
                images["coord_grads"] = np.asarray(snap.coord_grads, np.float32)
                images["coord_health"] = np.asarray(snap.coord_health, np.uint8)
            self.recorder.add_images(index, images)
        return loss

    def close(self) -> None:
        self.recorder.close()


def _small(matrix: np.ndarray) -> np.ndarray:
    """At most MAX_IMAGE_SIDE a side (block means; block maxima of Health codes)."""
    return fit_into(np.asarray(matrix), (stats.MAX_IMAGE_SIDE, stats.MAX_IMAGE_SIDE))
