"""A lab recording (``gradviz fit --record``) shown in the lab's views, step by step.

``snapshot_at`` builds the Snapshot of one recorded matrix step from the recording's
arrays, so a recorded step reaches the views exactly as a live one does (``show``).
What a recording does not hold is filled plainly: the points are placed by classical MDS
from the recorded distances (right up to rotation and reflection), the entry gradients,
which are not recorded, are zero (their health codes are); the loss between two recorded
steps is interpolated. Coordinate gradients are recorded (N at most 512); where they are
not, the snapshot's are (0, D), "not known", so no legend counts gradients nobody measured.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from PySide6.QtCore import QObject, Signal, Slot

from gradviz.core.common.errors import GradvizError
from gradviz.core.common.health import Health
from gradviz.core.lab.mds import classical_mds_of_distances
from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.record import layout as L
from gradviz.core.record.recording_data import RecordingData
from gradviz.core.settings.config import FitConfig

#: Generations of recorded runs count down from here, far from the live runs' (1, 2, ...).
FIRST_RECORDED_GENERATION = -1_000_000


def matrix_steps(data: RecordingData) -> np.ndarray:
    """(K,) the steps at which the recording holds the run's matrices."""
    return data.images.get("distances", (np.zeros(0, np.int64), []))[0]


def snapshot_at(
    data: RecordingData, k: int, generation: int, target: tuple | None = None
) -> Snapshot:
    """The Snapshot of the k-th recorded matrix step of a fit recording. ``target``:
    the recording's target distances and their points, where already known (they are the
    same at every step)."""
    steps, distances = data.images["distances"]
    step = int(steps[k])
    d = np.asarray(distances[k], dtype=np.float32)
    error = _image(data, "error", k, np.zeros_like(d)).astype(np.float32)
    health = _image(data, "entry_health", k, np.zeros(d.shape, np.uint8)).astype(np.uint8)
    health[health == L.NO_ENTRY] = Health.BLOCKED  # outside a smaller recorded matrix
    config = data.meta.get("config", {})
    dim = int(config.get("dim", 2))
    target_distances, target_coords = target or target_of(d, error, dim)
    n = d.shape[0]
    coord_grads, coord_health = _coord_gradients(data, k, n, dim)
    history = loss_history(data, step)
    loss = float(history[-1]) if len(history) else float("nan")
    first = data.first_nonfinite
    return Snapshot(
        generation=generation,
        step=step + 1,  # the recorded step is the one just taken: step + 1 completed
        loss=loss,
        loss_history=history.astype(np.float64),
        reference_loss=None,
        coords=classical_mds_of_distances(d, dim),
        target_coords=target_coords,
        distances=d,
        target_distances=target_distances,
        error=error,
        squared=None,
        entry_grads=np.zeros_like(d),
        entry_health=health,
        coord_grads=coord_grads,
        coord_health=coord_health,
        param_health=(),
        jacobians=None,
        first_nonfinite_grad_step=None if first is None else int(first["step"]),
        first_nonfinite_loss_step=None,
        steps_per_second=float("nan"),
        device=str(config.get("device", "recorded")),
        method=str(config.get("method", "")),
        done=data.complete and k == len(steps) - 1,
    )


def recorded_config(data: RecordingData, config_class: type = FitConfig) -> FitConfig | None:
    """The settings a lab recording was made with (its ``config`` metadata), or None where
    the recording does not say or says something that is not valid settings."""
    raw = data.meta.get("config")
    if not isinstance(raw, dict):
        return None
    names = {f.name for f in dataclasses.fields(config_class)}
    try:
        return config_class(**{k: v for k, v in raw.items() if k in names}).validated()
    except (GradvizError, TypeError, ValueError):
        return None


def target_of(d: np.ndarray, error: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The target distances (recorded as the error ``d - target``) and their points."""
    target = d - error
    return target, classical_mds_of_distances(target, dim)


def loss_history(data: RecordingData, step: int) -> np.ndarray:
    """(step + 1,) float64 loss of steps 0 ... step: the recorded losses, linearly
    interpolated between recorded steps (a recording keeps every ``every``-th step)."""
    kept = data.steps <= step
    steps, losses = data.steps[kept], data.losses[kept]
    if not len(steps):
        return np.zeros(0)
    return np.interp(np.arange(step + 1), steps, losses)


def _coord_gradients(data: RecordingData, k: int, n: int, dim: int) -> tuple:
    """The k-th matrix step's (N, D) coordinate gradients and health codes, or two (0, D)
    arrays where the recording does not hold them (whole)."""
    grads = _image(data, "coord_grads", k, np.zeros((0, dim)))
    health = _image(data, "coord_health", k, np.zeros((0, dim)))
    if grads.shape != (n, dim) or health.shape != (n, dim):
        return np.zeros((0, dim), np.float32), np.zeros((0, dim), np.uint8)
    return grads.astype(np.float32), health.astype(np.uint8)


def _image(data: RecordingData, name: str, k: int, default: np.ndarray) -> np.ndarray:
    found = data.images.get(name)
    if found is None or k >= len(found[1]):
        return default
    return np.asarray(found[1][k])


class RecordedRun(QObject):
    """The snapshots of one opened fit recording; ``snapshotShown(snapshot)`` feeds the
    views as RunSession's signal of the same name does."""

    snapshotShown = Signal(object)

    _next_generation = FIRST_RECORDED_GENERATION

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.generation = RecordedRun._next_generation
        self.data: RecordingData | None = None
        self.shown: Snapshot | None = None
        self._target: tuple | None = None

    def set_data(self, data: RecordingData) -> None:
        """Show ``data`` from now on: a re-read of the same recording (followed while it
        grows) keeps the generation; another recording, or rank, is another run (a new
        generation, so the views start afresh)."""
        if self.data is None or (data.path, data.rank) != (self.data.path, self.data.rank):
            RecordedRun._next_generation -= 1
            self.generation = RecordedRun._next_generation
            self._target = None
        self.data = data

    @Slot(int)
    def show_index(self, k: int) -> None:
        """Show the k-th recorded matrix step."""
        data = self.data
        if data is None or not 0 <= k < len(matrix_steps(data)):
            return
        self.shown = snapshot_at(data, k, self.generation, self._target)
        self._target = (self.shown.target_distances, self.shown.target_coords)
        self.snapshotShown.emit(self.shown)
