"""The Snapshots of a distance-fit run: frozen pictures of its latest forward/backward,
reduced to display size, and the full-resolution cells behind them.

``FitPictures`` is the part of ``fit.DistanceFitRun`` that makes them; it reads the run's
state (its step counts, histories, latest ``Capture`` and settings) and keeps the target's
display-sized matrix, made once and shared by every Snapshot.
"""

from __future__ import annotations

import numpy as np
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab import display
from gradviz.core.lab.capture import Capture
from gradviz.core.lab.fit_pass import to_numpy
from gradviz.core.lab.snapshot import Snapshot


class FitPictures:
    """Snapshots and cell readouts of a ``DistanceFitRun`` (its base class: it reads the
    run's ``_capture``, ``_attempts``, ``_fresh_capture()``, step counts, histories and
    settings)."""

    _capture: Capture | None  # the latest forward/backward's, until the next step starts
    _target_display: tuple[int, np.ndarray] | None = None  # (block, matrix), made on first use

    def target_distances_numpy(self) -> np.ndarray:
        """Target distances for display, reduced like every matrix of this run's Snapshots
        (``display_block``): a read-only float32 copy, made once and shared by every
        Snapshot, which is safe because nobody can write to it."""
        block = self.display_block
        if self._target_display is None or self._target_display[0] != block:
            array = display.reduce_mean(self.target_distances, block)
            array.flags.writeable = False
            self._target_display = (block, array)
        return self._target_display[1]

    @property
    def display_block(self) -> int:
        """Entries per side of one display cell of the Snapshots' (N, N) matrices."""
        return display.display_block(self.n_points, self.max_display)

    def snapshot(self, generation: int | None = None) -> Snapshot:
        """A frozen picture of the run after ``completed_steps`` optimizer steps.

        Its coordinates, matrices, loss, gradients and Jacobians all come from one
        forward/backward: that of the latest step when it ran with ``capture=True`` (so the
        picture shows the gradients that step k used, at the coordinates before its update:
        the naive method's NaN is seen where it is born, on finite coordinates), else a
        fresh one of the current parameters, which does not count as a step.
        """
        capture = self._capture
        if capture is None or capture.attempt != self._attempts - 1:
            capture = self._fresh_capture()
        capture.step = self.completed_steps  # the Snapshot's step, for cell_values
        block = self.display_block
        target_d = self.target_distances_numpy()
        return Snapshot(
            generation=self.generation if generation is None else generation,
            step=self.completed_steps,
            loss=capture.loss,
            loss_history=self.loss_history,
            grad_norm_history=self.grad_norm_history,
            history_steps=self.history_steps,
            grad_norm_names=self.grad_norm_names,
            reference_loss=self.reference_loss,
            coords=_f32(capture.coords),
            target_coords=self.target_points.astype(np.float32),
            target_distances=target_d,
            **capture.display_matrices(block, self.target_distances),
            coord_grads=_f32(capture.coord_grads),
            coord_health=to_numpy(capture.coord_health),
            param_health=capture.param_health,
            param_norms=capture.param_norms,
            param_values=capture.param_values,
            jacobians=None if capture.jacobians is None else _f32(capture.jacobians),
            first_nonfinite_grad_step=self.first_nonfinite_grad_step,
            first_nonfinite_loss_step=self.first_nonfinite_loss_step,
            steps_per_second=self.steps_per_second,
            device=str(self.device),
            method=self.config.method,
            done=self.done,
            display_block=block,
            threads=self.thread_choice.text(),
        )

    def cell_values(self, i: int, j: int, step: int | None = None) -> dict[str, float]:
        """Full-resolution entries (i, j) of the latest Snapshot's matrices, by Snapshot
        field name (``distances``, ``target_distances``, ``error``, ``squared`` where the
        method has it, ``entry_grads``, ``entry_health`` as a Health code).

        ``step``, when given, is the Snapshot's step: a GradvizError says so when the run
        has moved on since (its matrices are freed when the next step starts).
        """
        capture = self._capture
        if capture is None or (step is not None and capture.step != step):
            raise GradvizError(
                f"The values of step {step if step is not None else self.completed_steps} "
                "are gone (the run has moved on); read the cell again in the newest picture."
            )
        if not (0 <= i < self.n_points and 0 <= j < self.n_points):
            raise GradvizError(
                f"Cell ({i}, {j}) is outside the {self.n_points:,} x {self.n_points:,} matrix."
            )
        return capture.cell_values(i, j, self.target_distances)

    def _snapshot_side(self) -> int | None:
        """Side of the Snapshots' matrices, or None for full resolution."""
        return None if self.max_display is None else min(self.n_points, self.max_display)


def _f32(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(device="cpu", dtype=torch.float32, copy=True).numpy()
