"""Immutable pictures of a run, the only thing the views and the CLI ever read.

A Snapshot holds plain numpy arrays copied off the device (never views of live tensors)
and marked read-only, so a consumer on another thread can never see them change.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from gradviz.core.common.decimate import block_rows

#: Rows and columns of a parameter tensor a Snapshot keeps at most (its leading block): the
#: lab's networks are small, and a wide layer must not make every picture large.
PARAM_SIDE = 64


@dataclass(frozen=True, slots=True)
class ParamValues:
    """One parameter tensor of a network and its gradient, from one forward/backward.

    ``values`` and ``grads`` are host copies in the run's dtype (float32 or float64, exact,
    never rounded for display) of the tensor's leading block: ``[:PARAM_SIDE]`` of a vector,
    ``[:PARAM_SIDE, :PARAM_SIDE]`` of a matrix; ``shape`` is the whole tensor's. ``grads``
    are zeros where no gradient reached the tensor (``parameter_health`` calls that ZERO).
    """

    name: str  # as in param_health, e.g. "0.weight"
    shape: tuple[int, ...]  # the whole tensor's: (out,) or (out, in)
    values: np.ndarray  # (r,) or (r, c) with r, c <= PARAM_SIDE
    grads: np.ndarray  # as values

    def __post_init__(self) -> None:
        for array in (self.values, self.grads):
            array.flags.writeable = False

    @property
    def elided(self) -> bool:
        """Whether the tensor has more entries than are kept."""
        return tuple(self.values.shape) != tuple(self.shape)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The state of a distance-fit run after ``step`` completed optimizer steps.

    Matrices are float32 (for display); losses are float64. N points, D dimensions,
    F network input features. The (N, N) matrices may be display-sized: each of their
    cells then stands for a ``display_block x display_block`` block of the full matrix
    (block means, NaN and Inf kept; Health codes keep the most alarming of the block), so
    they are (M, M) with M = ceil(N / display_block); the run reads a cell's full-resolution
    values on request (``DistanceFitRun.cell_values``).
    """

    generation: int  # the run's generation; the GUI drops snapshots of older ones
    step: int  # completed optimizer steps (0 = the initial state)
    loss: float  # loss of the current state (NaN allowed: a result, not an error)
    loss_history: np.ndarray  # (S,) float64, loss computed in each step of history_steps
    reference_loss: float | None  # best reachable loss (classical MDS) when known
    coords: np.ndarray  # (N, D) predicted coordinates
    target_coords: np.ndarray  # (N, D) target coordinates
    distances: np.ndarray  # (M, M) predicted distance matrix
    target_distances: np.ndarray  # (M, M)
    error: np.ndarray  # (M, M) distances - target_distances
    squared: np.ndarray | None  # (M, M) pre-sqrt squared distances, where the method has them
    entry_grads: np.ndarray  # (M, M) dLoss/d squared (or d distance where there is no sq)
    entry_health: np.ndarray  # (M, M) uint8 Health codes of entry_grads (+ blocked mask)
    coord_grads: np.ndarray  # (N, D) dLoss/d coords
    coord_health: np.ndarray  # (N, D) uint8 Health codes
    param_health: tuple[tuple[str, int], ...]  # (parameter name, worst Health code)
    jacobians: np.ndarray | None  # (N, D, F) d coords_i / d features_i, with a network
    first_nonfinite_grad_step: int | None
    first_nonfinite_loss_step: int | None
    steps_per_second: float
    device: str
    method: str
    done: bool  # finished: all steps done, or stopped on NaN
    display_block: int = 1  # full-resolution entries per side of one (M, M) matrix cell
    entry_health_counts: tuple[int, ...] | None = None  # entries per Health code, full size
    # (T, S) float64: each parameter tensor's gradient norm in each step of history_steps,
    # as loss_history (NaN and Inf kept); the T tensors are named by grad_norm_names.
    grad_norm_history: np.ndarray | None = None
    grad_norm_names: tuple[str, ...] = ()
    # (parameter name, L2 norm of its gradient) from the same forward/backward as
    # param_health, in its order (NaN where a NaN is in it, Inf where an Inf is or it
    # overflows, NaN where no gradient reached it); () where not known (a recording).
    param_norms: tuple[tuple[str, float], ...] = ()
    # (S,) int64 steps of loss_history's entries, increasing; None: entry k is step k (every
    # completed step). A long run's history is thinned (core.step_series): its first and
    # last steps and both ends of every non-finite stretch are always among them.
    history_steps: np.ndarray | None = None
    # The torch CPU threads of the run's steps and why, in words (run_threads.ThreadChoice);
    # "" where not known (a recorded step).
    threads: str = ""
    # Each parameter tensor of the network and its gradient (leading blocks, ParamValues),
    # from the same forward/backward as param_health, in its order; () with free
    # coordinates or where not known (a recording).
    param_values: tuple[ParamValues, ...] = ()

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value.flags.writeable = False

    def full_indices(self, cell: int) -> range:
        """Full-resolution rows (or columns) behind row (or column) ``cell`` of the (M, M)
        matrices."""
        return block_rows(cell, self.display_block, self.n_points)

    def loss_steps(self) -> np.ndarray:
        """(S,) int64: the step of each entry of ``loss_history``."""
        if self.history_steps is not None:
            return self.history_steps
        return np.arange(len(self.loss_history), dtype=np.int64)

    @property
    def n_points(self) -> int:
        return int(self.coords.shape[0])

    @property
    def dim(self) -> int:
        return int(self.coords.shape[1])
