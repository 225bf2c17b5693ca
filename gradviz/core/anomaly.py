"""Diagnose: re-run one step of a distance fit under ``torch.autograd.detect_anomaly`` and
name the operation that made the NaN, with the forward call that created it.

The desktop app's Diagnose action calls this from its worker for the pinned first-NaN step.
Two things are reported:

- the backward: the first autograd node whose backward returned NaN (``SqrtBackward0``)
  and the forward traceback torch recorded for it;
- the forward: the first torch operation that turned finite inputs into a non-finite
  output (``torch.sqrt`` of a negative Gram square, ``torch.cdist`` overflowing), found with
  a ``torch.overrides.TorchFunctionMode``, because when the forward pass is already NaN the
  backward's first NaN is only the loss's.

Anomaly mode is process-wide and slow, so it is switched on only inside ``diagnose_step``,
for one step; the warnings torch raises meanwhile are captured here and never leak.
Another thread running autograd at the same time is slowed down (and checked) too: the app
should pause its other runs while a diagnosis runs.
"""

from __future__ import annotations

import math
import os
import re
import traceback
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch.overrides import TorchFunctionMode, resolve_name

from gradviz.core.config import FitConfig
from gradviz.core.errors import GradvizError
from gradviz.core.fit import DistanceFitRun
from gradviz.core.snapshot import Snapshot

_NAN_ERROR = re.compile(r"Function '([^']+)' returned nan values in its (\d+)\w* output")
_TRACE_HEADER = re.compile(r"Error detected in (\S+)\. Traceback of forward call")
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
_ANOMALY_ENABLED = "Anomaly Detection has been enabled"
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_THIS_FILE = os.path.normcase(os.path.abspath(__file__))


@dataclass(frozen=True)
class TraceFrame:
    """One frame of a forward traceback."""

    filename: str
    lineno: int
    function: str
    code: str  # the source line, stripped ("" when unknown)

    @property
    def short_filename(self) -> str:
        """The path from the package folder on, e.g. ``gradviz/core/distances.py``."""
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

    operation: str  # "SqrtBackward0" (an autograd node) or "torch.sqrt" (a forward function)
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
    """What one re-run step showed. ``found`` is False when nothing went non-finite."""

    step: int | None  # the step re-run (0-based), when known
    loss: float  # the loss of that step's forward pass (NaN allowed)
    backward: OperationTrace | None  # the node whose backward returned NaN, and its forward trace
    output_index: int | None  # which output of that backward was NaN
    forward: OperationTrace | None  # the first forward op with finite inputs, non-finite output
    message: str  # torch's error message ("" when it raised none)
    summary: str  # two or three sentences for the Diagnose panel

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
            output_index=None,
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
    """Re-run one forward and backward of ``config``'s run under anomaly detection.

    ``parameters``: the state to re-run, as from ``pin_parameters`` (name -> array), or an
    (N, D) coordinate array for a run with free coordinates; None re-runs the initial state
    (step 0). ``step`` only labels the report. Raises GradvizError when the parameters do
    not fit the run that ``config`` builds.
    """
    run = DistanceFitRun(config.with_changes(steps=1, stop_on_nan=True, threads=None))
    if parameters is not None:
        _load_parameters(run, parameters)
    elif step is None:
        step = 0
    loss = run.final_loss()  # forward only, before anomaly mode: the step's loss
    finder = _FirstNonfiniteForward()
    message, backward, output_index = "", None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly(check_nan=True), finder:
                run.step()
        except RuntimeError as exc:
            match = _NAN_ERROR.search(str(exc))
            if match is None:
                raise
            message, output_index = str(exc), int(match.group(2))
            backward = OperationTrace(match.group(1), ())
    traced = _forward_trace_from_warnings(caught)
    if backward is not None and traced is not None and traced.operation == backward.operation:
        backward = traced
    report = AnomalyReport(step, loss, backward, output_index, finder.found, message, "")
    return _with_summary(report)


class _FirstNonfiniteForward(TorchFunctionMode):
    """Remembers the first torch function, before ``backward``, whose output has a NaN or Inf
    while none of its tensor inputs has one, with the Python stack that called it."""

    def __init__(self) -> None:
        super().__init__()
        self.found: OperationTrace | None = None
        self._in_backward = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = resolve_name(func) or getattr(func, "__name__", repr(func))
        if name in ("torch.Tensor.backward", "torch.autograd.backward"):
            self._in_backward = True  # what follows is backward and optimizer, not forward
        out = func(*args, **kwargs)
        if (
            self.found is None
            and not self._in_backward
            and _any_nonfinite(out)
            and not _any_nonfinite((args, kwargs))
        ):
            self.found = OperationTrace(name, _caller_frames())
        return out


def _any_nonfinite(data) -> bool:
    if isinstance(data, torch.Tensor):
        return (
            data.is_floating_point() and data.numel() > 0 and not bool(torch.isfinite(data).all())
        )
    if isinstance(data, (list, tuple)):
        return any(_any_nonfinite(item) for item in data)
    if isinstance(data, dict):
        return any(_any_nonfinite(item) for item in data.values())
    return False


def _caller_frames() -> tuple[TraceFrame, ...]:
    """The stack up to the call into torch (torch's own dispatch frames left out)."""
    stack = traceback.extract_stack()[:-2]  # drop this function and __torch_function__
    while stack and stack[-1].filename.startswith(_TORCH_DIR):
        stack.pop()
    frames = (TraceFrame(f.filename, f.lineno or 0, f.name, (f.line or "").strip()) for f in stack)
    return _without_this_module(frames)


def _forward_trace_from_warnings(caught: list[warnings.WarningMessage]) -> OperationTrace | None:
    """Parse torch's "Error detected in X. Traceback of forward call ..." warning; re-issue
    any warning that is not anomaly mode's own."""
    found = None
    for w in caught:
        text = str(w.message)
        header = _TRACE_HEADER.search(text)
        if header is not None and found is None:
            found = OperationTrace(header.group(1), _parse_frames(text))
        elif header is None and not text.startswith(_ANOMALY_ENABLED):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return found


def _parse_frames(text: str) -> tuple[TraceFrame, ...]:
    lines = text.splitlines()
    frames = []
    for k, line in enumerate(lines):
        match = _FRAME.match(line)
        if match is None:
            continue
        nxt = lines[k + 1] if k + 1 < len(lines) else ""
        code = nxt.strip() if nxt.startswith("    ") and _FRAME.match(nxt) is None else ""
        frames.append(TraceFrame(match["file"], int(match["line"]), match["func"].strip(), code))
    return _without_this_module(frames)


def _without_this_module(frames) -> tuple[TraceFrame, ...]:
    """Leave out the diagnosis's own frames (its call of the step, the function mode)."""
    return tuple(f for f in frames if os.path.normcase(os.path.abspath(f.filename)) != _THIS_FILE)


def _with_summary(r: AnomalyReport) -> AnomalyReport:
    sentences = []
    if r.forward is not None:
        where = f" at {r.forward.origin}" if r.forward.origin else ""
        sentences.append(
            f"The forward pass made the first non-finite value in {r.forward.operation}{where} "
            "(its inputs were finite)."
        )
    if r.backward is not None:
        where = f" Its forward call: {r.backward.origin}." if r.backward.origin else ""
        sentences.append(
            f"In the backward pass, {r.backward.operation} returned NaN (output "
            f"{r.output_index}).{where}"
        )
    if not sentences:
        sentences.append("No operation produced NaN in this step's backward pass")
        sentences[-1] += "." if math.isfinite(r.loss) else f", but the loss is {r.loss}."
    return replace(r, summary=" ".join(sentences))


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
