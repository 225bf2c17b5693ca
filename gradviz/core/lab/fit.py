"""The distance-fit run: move N points in D dimensions until their distance matrix matches a
target's, with a chosen distance method, and watch where the gradients go wrong.

One class, ``DistanceFitRun``, serves the CLI, the GUI and the benchmarks. A step is the
classic training loop (zero_grad, forward, MSE, backward, optimizer step) plus one cheap
finiteness check. Everything the views need (matrices, gradient health, Jacobians) is
gathered only for steps run with ``capture=True`` and handed out as a frozen Snapshot.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from gradviz.core.common import diagnostics
from gradviz.core.common.devices import resolve_device
from gradviz.core.common.errors import GradvizError
from gradviz.core.common.run_threads import ThreadChoice, ThreadPlan
from gradviz.core.common.step_series import StepSeries
from gradviz.core.lab import display, mds, memory
from gradviz.core.lab.capture import Capture, parameter_values
from gradviz.core.lab.distances import DistanceResult, pairwise_distances
from gradviz.core.lab.pointsets import FILE_PREFIX, check_seed, generate, resolve_points
from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.nets.jacobians import compute_jacobians
from gradviz.core.nets.networks import NetworkSpec
from gradviz.core.settings.config import FitConfig
from gradviz.core.settings.drawn import is_drawn

DTYPES = {"float32": torch.float32, "float64": torch.float64}

# Independent random streams derived from the one user seed, so that e.g. a gaussian target
# and a random init never coincide.
_INIT_STREAM, _FEATURE_STREAM = 1, 2  # the target uses the seed itself

_EXACT = "donot_use_mm_for_euclid_dist"  # torch.cdist from differences, not the Gram formula


class DistanceFitRun:
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

        self.target_points, init_points = _point_sets(config, with_net=self.spec is not None)
        self.n_points, self.dim = self.target_points.shape
        self.max_display = max_display
        self._threads = ThreadPlan(config.threads, self.n_points, self.device.type, cores)
        self._threads.before_step()  # the target matrix and step 0's picture use it too
        # Refuse in words before anything of size N x N exists, rather than fail in torch.
        memory.check_fits(config, self.device, self.n_points, self._snapshot_side())
        self.target_distances = _exact_distance_matrix(self.target_points, self.dtype, self.device)

        self.model: torch.nn.Module | None = None
        self.features: torch.Tensor | None = None
        self.coords_param: torch.nn.Parameter | None = None
        if self.spec is not None:
            self._build_network()
            named = list(self.model.named_parameters())
        else:
            start = torch.as_tensor(init_points, dtype=self.dtype)
            self.coords_param = torch.nn.Parameter(start.to(self.device))
            named = [("coords", self.coords_param)]
        self._named_params = named
        self._params = [p for _, p in named]
        self._optimizer: torch.optim.Optimizer | None = None  # made at the first step

        self.completed_steps = 0
        self.done = config.steps == 0
        self.stop_on_nan = config.stop_on_nan  # may be switched while the run goes on
        self.stopped_on_nan = False
        self.first_nonfinite_grad_step: int | None = None
        self.first_nonfinite_loss_step: int | None = None
        # Each completed step's loss and gradient norm per parameter tensor: every step,
        # or thinned to at most ``history_rows`` rows (core.step_series).
        self.grad_norm_names = tuple(name for name, _ in named)
        self._history = StepSeries(1 + len(named), capacity=history_rows)
        self._attempts = 0  # forward/backward passes run by step() or for a snapshot
        self._step_zero_loss: float | None = None
        self._timed_seconds = 0.0  # time inside step() for steps after the first
        self._timed_steps = 0
        self._gather_seconds = 0.0  # of the last step: what capture added to it
        self._capture: Capture | None = None
        self._reference_loss: float | None = None
        self._target_display: tuple[int, np.ndarray] | None = None  # (block, matrix)

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
        self._clear_grads()
        loss, coords, result, entry_grad = self._forward_backward(capture)
        loss_value, grads_finite, grad_norms = self._read_step(loss)
        if index == 0:
            self._step_zero_loss = loss_value
        if not math.isfinite(loss_value) and self.first_nonfinite_loss_step is None:
            self.first_nonfinite_loss_step = index
        if not grads_finite and self.first_nonfinite_grad_step is None:
            self.first_nonfinite_grad_step = index
        self._gather_seconds = 0.0
        if capture:
            started = time.perf_counter()
            self._capture = self._gather(loss_value, coords, result, entry_grad)
            self._gather_seconds = time.perf_counter() - started
        return loss_value, grads_finite, grad_norms

    def _snapshot_side(self) -> int | None:
        """Side of the Snapshots' matrices, or None for full resolution."""
        return None if self.max_display is None else min(self.n_points, self.max_display)

    def _fail_if_out_of_memory(self, exc: Exception) -> None:
        """Turn an allocation failure into memory.RunOutOfMemoryError (else return).

        The step's partial graph and gradients are dropped, so the memory they held comes
        back; the parameters, losses and step count stay those of the last completed step
        (an optimizer update that failed part-way may have moved some parameters).
        """
        if not memory.is_out_of_memory(exc):
            return
        self._clear_grads()
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
        return self._coords().detach()

    @torch.no_grad()
    def evaluate(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Coordinates (N, D), distances (N, N) and loss of the current parameters, in the
        run's dtype (numpy copies)."""
        coords = self._coords()
        distances = pairwise_distances(coords, self.config.method).distances
        loss = F.mse_loss(distances, self.target_distances)
        return _to_numpy(coords), _to_numpy(distances), float(loss)

    def final_loss(self) -> float:
        """The loss re-evaluated at the current parameters (after the last update)."""
        return self.evaluate()[2]

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
            coord_health=_to_numpy(capture.coord_health),
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

    # ---- internals -----------------------------------------------------------------------------
    def _build_network(self) -> None:
        spec = self.spec
        if spec.out_dim != self.dim:
            raise GradvizError(
                f"The network's output width is {spec.out_dim} but the points have D = "
                f"{self.dim}; end the network spec with -{self.dim}."
            )
        self.model = spec.build(seed=self.config.seed, dtype=self.dtype).to(self.device)
        rng = np.random.default_rng([self.config.seed, _FEATURE_STREAM])
        features = rng.standard_normal((self.n_points, spec.in_dim))
        self.features = torch.as_tensor(features, dtype=self.dtype, device=self.device)

    def _coords(self) -> torch.Tensor:
        if self.model is not None:
            return self.model(self.features)
        return self.coords_param

    def _forward_backward(
        self, capture: bool
    ) -> tuple[torch.Tensor, torch.Tensor, DistanceResult, list[torch.Tensor]]:
        """Forward, loss and backward; with ``capture`` also the entry gradient (dLoss/d
        squared where the method has a pre-sqrt node, else dLoss/d distances) in the list.

        The entry gradient is kept by a hook that holds the tensor autograd passes on
        (``retain_grad`` would clone it: one more (N, N) matrix at the step's peak).
        """
        coords = self._coords()
        if capture and not coords.is_leaf:
            coords.retain_grad()
        result = pairwise_distances(coords, self.config.method)
        entry_grad: list[torch.Tensor] = []
        if capture:
            node = next(
                (
                    t
                    for t in (result.squared, result.distances)
                    if t is not None and t.requires_grad
                ),
                None,
            )
            if node is not None:
                node.register_hook(entry_grad.append)
        loss = F.mse_loss(result.distances, self.target_distances)
        loss.backward()
        return loss, coords, result, entry_grad

    def _read_step(self, loss: torch.Tensor) -> tuple[float, bool, np.ndarray]:
        """The loss value, whether every gradient is finite and the (T,) float64 norm of
        each parameter's gradient: the one host read of a step."""
        grads = [p.grad for p in self._params]
        norms = diagnostics.grad_norms(grads, self.device)  # one multi-tensor kernel
        if self.device.type == "cpu":
            # Host memory: plain reads cost nothing, where stacking them into one
            # transfer adds a few small torch ops (about 3% of a step at N = 10). A finite
            # norm means finite entries (a NaN or Inf entry makes the norm NaN or Inf); only
            # a non-finite norm (which also comes of a finite gradient whose norm overflows)
            # needs the entries looked at.
            values = np.array(norms.tolist(), dtype=np.float64)
            ok = bool(np.isfinite(values).all()) or bool(diagnostics.all_finite(grads, self.device))
            return loss.item(), ok, values
        ok = diagnostics.all_finite(grads, self.device)
        # On an accelerator all values come back in one transfer (one sync), in the loss's
        # dtype (MPS has no float64; a float32 norm is exact in it).
        head = torch.stack([loss.detach(), ok.to(loss.dtype)])
        values = torch.cat([head, norms.to(loss.dtype)]).cpu().numpy().astype(np.float64)
        return float(values[0]), bool(values[1] == 1.0), values[2:]

    def _gather(
        self,
        loss_value: float,
        coords: torch.Tensor,
        result: DistanceResult,
        entry_grad: list[torch.Tensor],
    ) -> Capture:
        """Keep what a Snapshot shows out of the live graph (before the optimizer moves it)."""
        squared = result.squared
        # The graph's own gradient (nothing changes it after the backward pass), or zeros
        # where no gradient reached the distances.
        entry_grads = entry_grad[0].detach() if entry_grad else torch.zeros_like(result.distances)
        coord_grads = coords.grad
        if coord_grads is None:
            coord_grads = torch.zeros_like(coords)
        coord_grads = coord_grads.detach().clone()
        return Capture(
            attempt=self._attempts,
            step=self.completed_steps,
            loss=loss_value,
            coords=coords.detach().clone(),  # free coordinates: the optimizer moves these
            distances=result.distances.detach(),
            squared=None if squared is None else squared.detach(),
            entry_grads=entry_grads,
            entry_health=diagnostics.entry_health(entry_grads, result.blocked),
            coord_grads=coord_grads,
            coord_health=diagnostics.coord_health(coord_grads),
            param_health=diagnostics.parameter_health(self._named_params),
            jacobians=self._jacobians(),
            param_norms=self._param_norms(),
            param_values=parameter_values(self.model),
        )

    def _param_norms(self) -> tuple[tuple[str, float], ...]:
        """(name, gradient norm) of each parameter now, as ``grad_norm_history`` keeps them."""
        norms = diagnostics.grad_norms([p.grad for p in self._params], self.device)
        values = norms.to("cpu", torch.float64).tolist()
        return tuple(zip(self.grad_norm_names, values, strict=True))

    def _fresh_capture(self) -> Capture:
        """Forward/backward of the current parameters without an optimizer step (nor the
        optimizer: step 0's picture comes before its imports)."""
        self._threads.before_step()
        self._clear_grads()
        loss, coords, result, entry_grad = self._forward_backward(capture=True)
        capture = self._gather(float(loss.detach()), coords, result, entry_grad)
        self._clear_grads()  # leave no gradients behind: this was not a step
        self._attempts += 1
        self._capture = capture
        return capture

    def _clear_grads(self) -> None:
        """As ``optimizer.zero_grad()`` (set to None), without making the optimizer."""
        for param in self._params:
            param.grad = None

    def _jacobians(self) -> torch.Tensor | None:
        if self.model is None:
            return None
        # Points do not interact in these networks, so "auto" takes one backward pass per
        # output coordinate (no torch.func start-up); it leaves the parameters' .grad alone.
        return compute_jacobians(self.model, self.features, method="auto").jacobians.detach()


def _point_sets(config: FitConfig, with_net: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Target and initial points (float64), with N and D taken from a file where one is given."""
    if with_net and config.init != "random":
        raise GradvizError(
            "The initial coords (init) do not apply when a network (net) produces the "
            "coordinates; keep init at random, or fit free coordinates."
        )
    target = _load_if_file(config.target)
    init = _load_if_file(config.init)
    n, dim = config.n, config.dim
    for points in (target, init):
        if points is not None:
            n, dim = points.shape
            break
    if target is None:
        target = generate(config.target, n, dim, config.seed)
    if with_net:
        return target, None
    if init is None:
        init_seed = int(np.random.SeedSequence([config.seed, _INIT_STREAM]).generate_state(1)[0])
        name = "gaussian" if config.init == "random" else config.init
        init = generate(name, n, dim, init_seed)
    if init.shape != target.shape:
        raise GradvizError(
            f"The initial points have shape {init.shape} but the target has {target.shape}; "
            "use point sets with the same number of points and dimensions."
        )
    return target, init


def _load_if_file(spec: str) -> np.ndarray | None:
    """The points of a file or a drawn set (which set N and D), else None (a generator)."""
    fixed = spec.startswith(FILE_PREFIX) or is_drawn(spec)
    return resolve_points(spec, 0, 0) if fixed else None


def _exact_distance_matrix(
    points: np.ndarray, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """(N, N) exact distances of float64 points, rounded once to ``dtype``, on ``device``.

    Computed in float64 from coordinate differences (torch.cdist without the Gram-formula
    shortcut), in row blocks so the float64 intermediate stays small.
    """
    compute = device if device.type != "mps" else torch.device("cpu")  # MPS has no float64
    x = torch.as_tensor(points, dtype=torch.float64).to(compute)
    n = x.shape[0]
    out = torch.empty((n, n), dtype=dtype, device=device)
    block = 1024
    for start in range(0, n, block):
        rows = torch.cdist(x[start : start + block], x, compute_mode=_EXACT)
        out[start : start + block] = rows.to(device=device, dtype=dtype)
    return out


def _make_optimizer(name: str, params: list[torch.nn.Parameter], lr: float):
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.SGD(params, lr=lr)


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    """A numpy copy on the host (``Tensor.numpy()`` alone would share the tensor's memory)."""
    return t.detach().to(device="cpu", copy=True).numpy()


def _f32(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(device="cpu", dtype=torch.float32, copy=True).numpy()
