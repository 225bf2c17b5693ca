"""Diagnose: re-run one step of a distance fit under gradviz's non-finite tracer and name
the operation that made the first NaN or Inf, with its module, source line, entries and cause.

The desktop app's Diagnose action calls this from its worker for the pinned first-NaN step.
The step (forward, backward and optimizer update) runs under ``core.origin``'s
``trace_nonfinite``, which reports where the first non-finite value started:

- in the backward: the autograd node running the operation (``SqrtBackward0``) and the
  forward call that created it (``torch.sqrt`` in ``gradviz/core/lab/distances.py``);
- in the forward: the first operation that turned finite inputs into a non-finite output
  (``aten.sqrt`` of a negative Gram square, an overflowing distance).

The tracer is a dispatch mode of the calling thread only: unlike ``detect_anomaly`` it
neither raises nor slows other threads' autograd.
"""

from __future__ import annotations

import linecache
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.lab.fit import DistanceFitRun
from gradviz.core.lab.snapshot import Snapshot
from gradviz.core.origin.result import place_words
from gradviz.core.settings.config import FitConfig


@dataclass(frozen=True)
class TraceFrame:
    """One frame of a forward traceback."""

    filename: str
    lineno: int
    function: str
    code: str  # the source line, stripped ("" when unknown)

    @property
    def short_filename(self) -> str:
        """The path from the package folder on, e.g. ``gradviz/core/lab/distances.py``."""
        parts = self.filename.replace("\\", "/").split("/")
        if "gradviz" in parts:
            return "/".join(parts[len(parts) - 1 - parts[::-1].index("gradviz") :])
        return parts[-1]

    def __str__(self) -> str:
        code = f": {self.code}" if self.code else ""
        return f"{self.short_filename}:{self.lineno} in {self.function}{code}"


@dataclass(frozen=True)
class OperationTrace:
    """An operation and the call stack that ran it (outermost first, the call itself last)."""

    operation: str  # "SqrtBackward0" (an autograd node) or "aten.sqrt.default" (an operation)
    frames: tuple[TraceFrame, ...]

    @property
    def origin(self) -> TraceFrame | None:
        """The innermost frame in gradviz's own code (where to look), else the innermost."""
        for frame in reversed(self.frames):
            if "gradviz/" in frame.filename.replace("\\", "/"):
                return frame
        return self.frames[-1] if self.frames else None


@dataclass(frozen=True)
class AnomalyReport:
    """What one re-run step showed. ``found`` is False when nothing went non-finite.

    ``origin`` is the tracer's full answer (core.origin.Origin: phase, op, node, module,
    source, entries, cause); ``backward`` / ``forward`` say the same as an operation with
    its source line, for the one of the two phases where it started."""

    step: int | None  # the step re-run (0-based), when known
    loss: float  # the loss of that step's forward pass (NaN allowed)
    backward: OperationTrace | None  # the node whose backward made it, and its forward call
    forward: OperationTrace | None  # the first op with finite inputs and a non-finite output
    message: str  # the origin in words ("" when there is none)
    summary: str  # two or three sentences for the Diagnose panel
    origin: object = None  # core.origin.Origin | None

    @property
    def found(self) -> bool:
        return self.backward is not None or self.forward is not None


@dataclass(frozen=True)
class PinnedState:
    """A run's first non-finite step: its parameters before that step's update (numpy
    copies, for ``diagnose_step``) and the Snapshot of that step's forward and backward
    (for ``explain.explain_first_nan`` and the views)."""

    step: int
    parameters: dict[str, np.ndarray]
    snapshot: Snapshot


def pin_parameters(run: DistanceFitRun) -> dict[str, np.ndarray]:
    """Copies of ``run``'s optimised parameters by name: ``{"coords": (N, D)}`` for free
    coordinates, the network's ``named_parameters`` otherwise, in the run's dtype.

    After a stop-on-NaN run stopped, these are exactly the parameters of its NaN step.
    """
    return {
        name: p.detach().to(device="cpu", copy=True).numpy()
        for name, p in _named_parameters(run).items()
    }


def replay_to_first_nonfinite(
    config: FitConfig,
    should_stop: Callable[[], bool] | None = None,
    max_display: int | None = None,
) -> PinnedState | None:
    """Re-run ``config`` from the start, stopping on NaN, and pin the first non-finite step.

    Use it when the live run went past its first NaN (stop on NaN off). Runs are seeded, so
    this reproduces the original run's first NaN when its settings (e.g. the learning rate)
    were not changed while it ran. None when the run never goes non-finite within
    ``config.steps``, or when ``should_stop()`` turns true (checked before every step).
    ``max_display`` caps the Snapshot's matrices (see DistanceFitRun); ``pinned_run`` gives
    the full-resolution values on request.
    """
    run = DistanceFitRun(
        config.with_changes(stop_on_nan=True, threads=None), max_display=max_display
    )
    while not run.done:
        if should_stop is not None and should_stop():
            return None
        run.step()
    if not run.stopped_on_nan:
        return None
    # A stop-on-NaN run keeps the parameters of its NaN step, so a fresh snapshot re-runs
    # exactly that step's forward and backward.
    return PinnedState(run.completed_steps, pin_parameters(run), run.snapshot())


def pinned_run(config: FitConfig, pinned: PinnedState) -> DistanceFitRun:
    """A run of ``config`` holding the pinned first-NaN state at full resolution: its
    ``snapshot()`` re-runs that step's forward and backward (its ``step`` reads 0: the run
    took no steps of its own), after which ``cell_values(i, j)`` reads any entry exactly.
    Costs one step's memory and time; drop it when done."""
    run = DistanceFitRun(config.with_changes(stop_on_nan=True, threads=None))
    _load_parameters(run, pinned.parameters)
    return run


def diagnose_first_nonfinite(
    config: FitConfig, should_stop: Callable[[], bool] | None = None
) -> AnomalyReport | None:
    """Replay ``config`` to its first non-finite step and diagnose that step.

    None if ``should_stop()`` turned true. A run that stays finite gets a report with
    ``found`` False that says so.
    """
    run_cancelled = []

    def stop() -> bool:
        if should_stop is not None and should_stop():
            run_cancelled.append(True)
            return True
        return False

    pinned = replay_to_first_nonfinite(config, stop)
    if run_cancelled:
        return None
    if pinned is None:
        return AnomalyReport(
            step=None,
            loss=math.nan,
            backward=None,
            forward=None,
            message="",
            summary=f"The run stays finite for all {config.steps} steps: nothing to diagnose.",
        )
    return diagnose_step(config, pinned.parameters, step=pinned.step)


def diagnose_step(
    config: FitConfig,
    parameters: Mapping[str, object] | np.ndarray | torch.Tensor | None = None,
    step: int | None = None,
) -> AnomalyReport:
    """Re-run one forward, backward and update of ``config``'s run under the tracer.

    ``parameters``: the state to re-run, as from ``pin_parameters`` (name -> array), or an
    (N, D) coordinate array for a run with free coordinates; None re-runs the initial state
    (step 0). ``step`` only labels the report. Raises GradvizError when the parameters do
    not fit the run that ``config`` builds.
    """
    from dataclasses import replace

    from gradviz.core.origin import trace_nonfinite

    run = DistanceFitRun(config.with_changes(steps=1, stop_on_nan=True, threads=None))
    if parameters is not None:
        _load_parameters(run, parameters)
    elif step is None:
        step = 0
    loss = run.final_loss()  # forward only, before the trace: the step's loss
    # gradviz's distance methods are the code under study here: their lines are the answer.
    with trace_nonfinite(skip_gradviz=False) as t:
        run.step()
    origin = t.origin  # while ``run`` still holds the step's gradients and parameters
    backward = forward = None
    if origin is not None:
        origin = replace(origin, how="replayed")  # seen in the step run again, not as it ran
        trace = OperationTrace(origin.node or origin.op, _frames(origin))
        if origin.phase == "backward":
            backward = trace
        else:
            forward = trace
    message = origin.words() if origin is not None else ""
    report = AnomalyReport(step, loss, backward, forward, message, "", origin)
    return _with_summary(report)


def _frames(origin) -> tuple[TraceFrame, ...]:
    """The origin's source line as a one-frame trace (its code read from the file)."""
    path, _, line = origin.source.rpartition(":")
    if not path or not line.isdigit():
        return ()
    code = linecache.getline(path, int(line)).strip()
    return (TraceFrame(path, int(line), origin.function, code),)


def _with_summary(r: AnomalyReport) -> AnomalyReport:
    o = r.origin
    if o is None:
        text = "No operation made a NaN or Inf in this step"
        text += "." if math.isfinite(r.loss) else f", but the loss is {r.loss}."
        return replace(r, summary=text)
    trace = r.backward or r.forward
    frame = trace.origin if trace is not None else None
    where = f" {place_words(o.module, True)}" if o.module or o.in_model else ""
    if o.phase == "backward":
        first = f"In the backward pass, {o.node} made {o.kind} ({o.op}){where}."
        if frame is not None:
            first += f" Its forward call: {frame}."
    else:
        at = f" at {frame}" if frame is not None else ""
        first = f"The {o.phase} made the first non-finite value in {o.op}{where}{at}."
    return replace(r, summary=f"{first} {o.cause}")


def _named_parameters(run: DistanceFitRun) -> dict[str, torch.nn.Parameter]:
    if run.model is not None:
        return dict(run.model.named_parameters())
    return {"coords": run.coords_param}


def _load_parameters(run: DistanceFitRun, parameters) -> None:
    named = _named_parameters(run)
    if not isinstance(parameters, Mapping):
        if run.model is not None:
            raise GradvizError(
                "This run's coordinates come from a network: give its parameters by name ("
                + ", ".join(named)
                + "), not a coordinate array."
            )
        parameters = {"coords": parameters}
    if set(parameters) != set(named):
        raise GradvizError(
            f"The pinned parameters are {', '.join(sorted(parameters))} but this run has "
            f"{', '.join(sorted(named))}; pin the state of a run built from the same settings."
        )
    with torch.no_grad():
        for name, p in named.items():
            value = parameters[name]
            value = value.detach().cpu() if isinstance(value, torch.Tensor) else value
            array = np.asarray(value)
            if array.shape != tuple(p.shape):
                raise GradvizError(
                    f"The pinned {name} has shape {array.shape} but this run's has "
                    f"{tuple(p.shape)}; pin the state of a run built from the same settings."
                )
            p.copy_(torch.as_tensor(array).to(device=p.device, dtype=p.dtype))
