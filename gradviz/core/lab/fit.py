"""The distance-fit run: move N points in D dimensions until their distance matrix matches a
target's, with a chosen distance method, and watch where the gradients go wrong.

One class, ``DistanceFitRun``, serves the CLI, the GUI and the benchmarks. A step is the
classic training loop (zero_grad, forward, MSE, backward, optimizer step) plus one cheap
finiteness check. Everything the views need (matrices, gradient health, Jacobians) is
gathered only for steps run with ``capture=True`` and handed out as a frozen Snapshot.

The run is made of: its point sets (``fit_points``), the parameters and one forward/backward
of them (``fit_pass.FitPass``), the Snapshots (``fit_pictures.FitPictures``, its base class)
and, here, the steps: optimizer, thread choice, histories, first non-finite steps.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable

import numpy as np
import torch

from gradviz.core.common.devices import resolve_device
from gradviz.core.common.errors import GradvizError
from gradviz.core.common.run_threads import ThreadChoice, ThreadPlan
from gradviz.core.common.step_series import StepSeries
from gradviz.core.lab import mds, memory
from gradviz.core.lab.capture import Capture
from gradviz.core.lab.fit_pass import FitPass
from gradviz.core.lab.fit_pictures import FitPictures
from gradviz.core.lab.fit_points import exact_distance_matrix, point_sets
from gradviz.core.lab.pointsets import check_seed
from gradviz.core.nets.networks import NetworkSpec
from gradviz.core.settings.config import FitConfig

DTYPES = {"float32": torch.float32, "float64": torch.float64}


class DistanceFitRun(FitPictures):
    """A distance-matrix fit built from a FitConfig (see config.FitConfig for the settings).

    Attributes read by callers: ``completed_steps``, ``done``, ``stopped_on_nan``,
    ``first_nonfinite_grad_step``, ``first_nonfinite_loss_step``, ``device``, ``n_points``,
    ``dim``; ``stop_on_nan`` may also be set between steps. Raises GradvizError for bad
    settings or point files, and its subclass memory.NotEnoughMemoryError (before
    allocating anything of size N x N) when a step would not fit in the memory available.

    ``max_display`` caps the side of the (N, N) matrices a Snapshot carries (block means,
    NaN and Inf kept; see core.display); ``cell_values`` reads the full-resolution entries
    behind them. None keeps full resolution.

    The torch CPU threads of its steps are ``config.threads`` or, unset, chosen by
    ``run_threads.ThreadPlan`` (``cores``: the cores that choice may use; default: all of
    this process's); ``thread_choice`` says which and why.

    ``history_rows`` bounds the per-step loss and gradient-norm history (None: every step,
    as ``gradviz fit --out`` saves it; the app bounds it, so a long run's memory stays flat).
    """

    def __init__(
        self,
        config: FitConfig,
        generation: int = 0,
        max_display: int | None = None,
        cores: int | None = None,
        history_rows: int | None = None,
    ) -> None:
        self.config = config = config.validated()
        check_seed(config.seed)
        self.generation = generation
        self.device = resolve_device(config.device)
        self.dtype = DTYPES[config.dtype]
        if self.device.type == "mps" and self.dtype == torch.float64:
            raise GradvizError(
                "MPS devices have no float64; choose the float32 dtype or the cpu device."
            )
        self.spec = NetworkSpec.parse(config.net) if config.net else None

        self.target_points, init_points = point_sets(config, with_net=self.spec is not None)
        self.n_points, self.dim = self.target_points.shape
        self.max_display = max_display
        self._threads = ThreadPlan(config.threads, self.n_points, self.device.type, cores)
        self._threads.before_step()  # the target matrix and step 0's picture use it too
        # Refuse in words before anything of size N x N exists, rather than fail in torch.
        memory.check_fits(config, self.device, self.n_points, self._snapshot_side())
        self.target_distances = exact_distance_matrix(self.target_points, self.dtype, self.device)

        self._pass = fit_pass = FitPass(
            self.spec,
            init_points,
            self.target_distances,
            config.method,
            config.seed,
            self.dim,
            self.device,
        )
        self.model = fit_pass.model
        self.features = fit_pass.features
        self.coords_param = fit_pass.coords_param
        self._named_params = fit_pass.named_params
        self._params = fit_pass.params
        self._optimizer: torch.optim.Optimizer | None = None  # made at the first step

        self.completed_steps = 0
        self.done = config.steps == 0
        self.stop_on_nan = config.stop_on_nan  # may be switched while the run goes on
        self.stopped_on_nan = False
        self.first_nonfinite_grad_step: int | None = None
        self.first_nonfinite_loss_step: int | None = None
        # Each completed step's loss and gradient norm per parameter tensor: every step,
        # or thinned to at most ``history_rows`` rows (core.step_series).
        self.grad_norm_names = fit_pass.grad_norm_names
        self._history = StepSeries(1 + len(self._params), capacity=history_rows)
        self._attempts = 0  # forward/backward passes run by step() or for a snapshot
        self._step_zero_loss: float | None = None
        self._timed_seconds = 0.0  # time inside step() for steps after the first
        self._timed_steps = 0
        self._gather_seconds = 0.0  # of the last step: what capture added to it
        self._capture: Capture | None = None
        self._reference_loss: float | None = None

    @property
    def thread_choice(self) -> ThreadChoice:
        """The torch CPU threads the steps run on, and why (see core.run_threads)."""
        return self._threads.choice

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The run's optimizer, made on first use: the first optimizer of a process imports
        torch._dynamo (seconds), which step 0's picture (a forward and a backward) does not
        need, so the app can show it first."""
        if self._optimizer is None:
            self._optimizer = _make_optimizer(self.config.optimizer, self._params, self.config.lr)
        return self._optimizer

    # ---- settings that may change while running ---------------------------------------------
    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def set_lr(self, lr: float) -> None:
        """Change the learning rate; it takes effect at the next step."""
        if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
            raise GradvizError(f"The learning rate must be a positive number, got {lr}.")
        for group in self.optimizer.param_groups:
            group["lr"] = float(lr)

    # ---- stepping ----------------------------------------------------------------------------
    def step(self, capture: bool = False) -> float:
        """Run one optimizer step; return the loss computed in it (before its update).

        With ``capture`` the step also keeps its matrices, gradients, health codes and
        Jacobians for the next ``snapshot()``. With stop-on-NaN, a step whose loss or
        gradients are not finite does not update the parameters and ends the run.
        """
        if self.done:
            raise GradvizError("The run has finished; start a new run to take more steps.")
        index = self.completed_steps
        started = time.perf_counter()
        self._threads.before_step()
        self._capture = None  # free the previous step's matrices before this one allocates
        try:
            loss_value, grads_finite, grad_norms = self._evaluate_step(capture)
        except Exception as exc:
            self._fail_if_out_of_memory(exc)
            raise
        self._attempts += 1
        if self.stop_on_nan and not (grads_finite and math.isfinite(loss_value)):
            # Keep the last finite parameters: this step's update would spoil them.
            self.stopped_on_nan = True
            self.done = True
            return loss_value
        try:
            self.optimizer.step()
        except Exception as exc:
            self._fail_if_out_of_memory(exc)
            raise
        self._history.append(self.completed_steps, [loss_value, *grad_norms])
        self.completed_steps += 1
        seconds = time.perf_counter() - started
        # The thread count is chosen on the step's own work, not on what capture adds.
        self._threads.after_step(seconds - self._gather_seconds, timed=index > 0)
        if index > 0:
            self._timed_seconds += seconds
            self._timed_steps += 1
        if self.completed_steps >= self.config.steps:
            self.done = True
        return loss_value

    def _evaluate_step(self, capture: bool) -> tuple[float, bool, np.ndarray]:
        """Forward and backward of step ``completed_steps``: its loss, whether every
        gradient is finite and each parameter's (T,) gradient norm; records first
        non-finite steps and, with ``capture``, what the next Snapshot shows."""
        index = self.completed_steps
        self._pass.clear_grads()
        loss, coords, result, entry_grad = self._pass.forward_backward(capture)
        loss_value, grads_finite, grad_norms = self._pass.read_step(loss)
        if index == 0:
            self._step_zero_loss = loss_value
        if not math.isfinite(loss_value) and self.first_nonfinite_loss_step is None:
            self.first_nonfinite_loss_step = index
        if not grads_finite and self.first_nonfinite_grad_step is None:
            self.first_nonfinite_grad_step = index
        self._gather_seconds = 0.0
        if capture:
            started = time.perf_counter()
            self._capture = self._pass.gather(
                self._attempts, self.completed_steps, loss_value, coords, result, entry_grad
            )
            self._gather_seconds = time.perf_counter() - started
        return loss_value, grads_finite, grad_norms

    def _fail_if_out_of_memory(self, exc: Exception) -> None:
        """Turn an allocation failure into memory.RunOutOfMemoryError (else return).

        The step's partial graph and gradients are dropped, so the memory they held comes
        back; the parameters, losses and step count stay those of the last completed step
        (an optimizer update that failed part-way may have moved some parameters).
        """
        if not memory.is_out_of_memory(exc):
            return
        self._pass.clear_grads()
        self._capture = None
        self.done = True
        traceback.clear_frames(exc.__traceback__)  # the failed step's tensors are freed now
        memory.return_freed_memory()
        raise memory.out_of_memory(
            exc,
            self.config,
            self.device,
            self.n_points,
            self.completed_steps,
            self._snapshot_side(),
        ) from exc

    def run(self, callback: Callable[[DistanceFitRun], object] | None = None) -> None:
        """Step until done; ``callback(run)`` after each step (e.g. a progress bar)."""
        while not self.done:
            self.step()
            if callback is not None:
                callback(self)

    # ---- results -------------------------------------------------------------------------------
    @property
    def loss_history(self) -> np.ndarray:
        """(S,) float64: the loss computed in each step of ``history_steps`` (every
        completed step, S = completed_steps, unless the history is thinned)."""
        return self._history.column(0)

    @property
    def grad_norm_history(self) -> np.ndarray:
        """(T, S) float64: column s holds the L2 norm of each parameter tensor's gradient
        (``grad_norm_names``) in step ``history_steps[s]``, from the same backward pass as
        its loss, before that step's update; NaN or Inf where the gradient held them."""
        return self._history.values[1:]

    @property
    def history_steps(self) -> np.ndarray | None:
        """(S,) int64 steps of ``loss_history``, or None while it holds every completed
        step (entry k is step k)."""
        return None if self._history.every_step else self._history.steps

    @property
    def initial_loss(self) -> float:
        """The loss computed in step 0 (of the initial state, whether or not step 0 ran)."""
        if self._step_zero_loss is not None:
            return self._step_zero_loss
        return self.final_loss()

    @property
    def steps_per_second(self) -> float:
        """Optimizer steps per second, leaving out the first (warm-up) step; NaN before
        two steps have run."""
        if self._timed_steps == 0 or self._timed_seconds <= 0:
            return float("nan")
        return self._timed_steps / self._timed_seconds

    @property
    def reference_loss(self) -> float:
        """Loss of the classical-MDS embedding of the target: the best reachable loss for a
        Euclidean target (exactly zero when the target lives in D dimensions, as a point
        set of this run does). Float64, computed once on first use."""
        if self._reference_loss is None:
            self._reference_loss = mds.reference_loss(self.target_points, self.dim)
        return self._reference_loss

    @torch.no_grad()
    def current_coords(self) -> torch.Tensor:
        """(N, D) coordinates of the current parameters (after the last update)."""
        return self._pass.coords().detach()

    def evaluate(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Coordinates (N, D), distances (N, N) and loss of the current parameters, in the
        run's dtype (numpy copies)."""
        return self._pass.evaluate()

    def final_loss(self) -> float:
        """The loss re-evaluated at the current parameters (after the last update)."""
        return self.evaluate()[2]

    # ---- internals -----------------------------------------------------------------------------

    def _fresh_capture(self) -> Capture:
        """Forward/backward of the current parameters without an optimizer step (nor the
        optimizer: step 0's picture comes before its imports)."""
        self._threads.before_step()
        self._pass.clear_grads()
        loss, coords, result, entry_grad = self._pass.forward_backward(capture=True)
        loss_value = float(loss.detach())
        capture = self._pass.gather(
            self._attempts, self.completed_steps, loss_value, coords, result, entry_grad
        )
        self._pass.clear_grads()  # leave no gradients behind: this was not a step
        self._attempts += 1
        self._capture = capture
        return capture


def _make_optimizer(name: str, params: list[torch.nn.Parameter], lr: float):
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.SGD(params, lr=lr)
