"""The explorer's computation: a request (ExplorerJob) in, an ExplorerResult of numpy out.

A job is a frozen description of one computation; a result holds plain numpy copies, so the
app never touches a live tensor. ``run_job`` runs on the explorer's worker thread and imports
torch there (the GUI's import path must not). Each stage calls ``should_stop`` first so that
closing the tab does not wait for later stages. Everything numeric comes from gradviz.core
(Jacobians, batch statistics, full batch Jacobian, gradient field, histograms); this module
wires them up. The batches come from gradviz.core.explorer.batches, which the CLI's
``gradviz jacobian`` uses too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gradviz.core.common.errors import GradvizError
from gradviz.core.explorer.batches import (
    InputSettings,
    base_values,
    grid_dims,
    grid_side,
    make_inputs,
)
from gradviz.core.settings.config import MAX_FULL_BATCH


@dataclass(frozen=True)
class ExplorerJob:
    """One computation: a network (spec + seed, or a module), inputs, histogram loss.

    ``module`` is the explorer's private copy of a network set with ``set_network``; it is
    only read (never trained) by the worker.
    """

    label: str
    in_dim: int
    out_dim: int
    inputs: InputSettings
    spec_text: str | None = None
    net_seed: int = 0
    module: Any = None
    dtype: str = "float32"
    loss: str = "sum"
    target_path: str = ""
    bins: int = 30
    in_shape: tuple[int, ...] | None = None  # one sample's shape; None: (in_dim,)


@dataclass(frozen=True)
class SaliencyResult:
    """Inputs of shape (B, *in_shape) whose per-sample Jacobian is too big to compute: the
    gradient of one output per sample (see core.input_gradients), as numpy copies.

    values and grad_x_input (B, *in_shape); inputs (B, *in_shape); outputs (B, m);
    explained (B,) the output index each sample's gradient is of; norms (B,).
    """

    label: str
    values: np.ndarray
    grad_x_input: np.ndarray
    inputs: np.ndarray
    outputs: np.ndarray
    explained: np.ndarray
    norms: np.ndarray
    method: str
    reason: str
    seconds: float = 0.0

    @property
    def batch(self) -> int:
        return int(self.values.shape[0])

    @property
    def in_shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.values.shape[1:])


@dataclass(frozen=True)
class ExplorerResult:
    """Everything the views show, as numpy copies.

    jacobians (B, m, n); inputs (B, n); outputs (B, m); mean/std (m, n). ``full`` is the
    (B*m, B*n) batch Jacobian or None (B > 256: ``full_note`` says why). ``field`` is the
    grid's Jacobians (H, W, m, n) with ``field_xs`` (W,) and ``field_ys`` (H,), or None
    (``field_note``). ``histograms`` is a list of core LayerHistogram or None
    (``histogram_note``).
    """

    label: str
    jacobians: np.ndarray
    inputs: np.ndarray
    outputs: np.ndarray
    method: str
    reason: str
    mean: np.ndarray
    std: np.ndarray
    constant: bool
    tolerance: float
    full: np.ndarray | None = None
    max_off_block: float | None = None
    full_note: str = ""
    field: np.ndarray | None = None
    field_xs: np.ndarray | None = None
    field_ys: np.ndarray | None = None
    field_dims: tuple[int, int] = (0, 1)
    field_note: str = ""
    histograms: list | None = None
    histogram_note: str = ""
    seconds: float = 0.0
    #: For samples with a shape of their own (an image (C, H, W)): the same gradients as a
    #: saliency map, each sample's largest output's row of J reshaped to the sample.
    saliency: SaliencyResult | None = None

    @property
    def batch(self) -> int:
        return int(self.jacobians.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        """(m, n): outputs and inputs of the network."""
        return int(self.jacobians.shape[1]), int(self.jacobians.shape[2])


def parse_indices(text: str, count: int, what: str) -> list[int]:
    """Indices from text like ``all``, ``0-3, 7`` or ``5`` (ranges inclusive), in order.

    ``count`` is how many there are; GradvizError names a bad part or an index out of range.
    """
    text = text.strip().lower()
    if text in ("", "all", "*"):
        return list(range(count))
    chosen: list[int] = []
    for part in text.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        first, dash, last = part.partition("-")
        try:
            lo = int(first)
            hi = int(last) if dash else lo
        except ValueError:
            raise GradvizError(
                f"The {what} selection has a bad part {part!r}; write indices like 0-3, 7 or all."
            ) from None
        if not (0 <= lo <= hi < count):
            raise GradvizError(
                f"The {what} selection {part!r} is outside 0..{count - 1}; "
                f"there are {count} {what}s."
            )
        chosen.extend(k for k in range(lo, hi + 1) if k not in chosen)
    if not chosen:
        raise GradvizError(f"The {what} selection is empty; write indices like 0-3, 7 or all.")
    return chosen


#: The largest full batch Jacobian the explorer builds (entries): beyond it, building it
#: takes tens of seconds and its picture hundreds of MB, for blocks too small to see.
MAX_FULL_ENTRIES = 1 << 22


class Stopped(Exception):
    """The job was abandoned because the tab is closing or a newer job arrived."""


def run_job(
    job: ExplorerJob, should_stop: Callable[[], bool] = lambda: False
) -> ExplorerResult | SaliencyResult:
    """Compute everything the explorer shows for ``job``; raises GradvizError for bad input.

    Samples with a shape of their own (``job.in_shape``, e.g. (3, 32, 32)) are flattened to
    (B, n) for every view while the per-sample Jacobian has at most MAX_JACOBIAN_ENTRIES
    entries; above that the result is a SaliencyResult (core.input_gradients)."""
    import torch

    from gradviz.core.nets import jacobians as jac_mod

    started = time.perf_counter()
    dtype = torch.float64 if job.dtype == "float64" else torch.float32
    model = _model(job, dtype)
    x = torch.as_tensor(make_inputs(job.inputs, job.in_dim, job.in_shape), dtype=dtype)
    shaped = x if x.ndim > 2 else None
    if x.ndim > 2:
        _check(should_stop)
        model, x, saliency = _shaped(model, x, job, started)
        if saliency is not None:
            return saliency

    _check(should_stop)
    result = jac_mod.compute_jacobians(model, x)
    jac = result.jacobians
    stats = jac_mod.batch_statistics(jac)
    batch, m, n = jac.shape
    pieces: dict = {}

    _check(should_stop)
    entries = batch * m * batch * n
    if batch > MAX_FULL_BATCH:
        pieces["full_note"] = (
            f"The full batch Jacobian is drawn for batches of up to {MAX_FULL_BATCH} "
            f"samples (it has (B·m) x (B·n) entries); this batch has {batch}."
        )
    elif entries > MAX_FULL_ENTRIES:
        pieces["full_note"] = (
            f"The full batch Jacobian would have {entries:,} entries ({batch * m} x "
            f"{batch * n}); the explorer draws up to {MAX_FULL_ENTRIES:,}: use a smaller batch."
        )
    else:
        full = jac_mod.full_batch_jacobian(model, x)
        pieces["full"] = _numpy(full)
        pieces["max_off_block"] = jac_mod.max_off_block(full, batch, m, n)

    _check(should_stop)
    pieces.update(_field(model, job, dtype))

    _check(should_stop)
    pieces.update(_histograms(model, x, job))
    if shaped is not None:
        pieces["saliency"] = _saliency_of(jac, result.outputs, shaped, job.label, result)

    return ExplorerResult(
        label=job.label,
        jacobians=_numpy(jac),
        inputs=_numpy(x),
        outputs=_numpy(result.outputs),
        method=result.method,
        reason=result.reason,
        mean=_numpy(stats.mean),
        std=_numpy(stats.std),
        constant=stats.constant_across_batch,
        tolerance=float(stats.tolerance),
        seconds=time.perf_counter() - started,
        **pieces,
    )


# ---- stages ---------------------------------------------------------------------------------
def _model(job: ExplorerJob, dtype):
    from gradviz.core.nets.networks import NetworkSpec, module_copy

    if job.module is not None:
        # A copy per job: converting the dtype in place would lose precision for later jobs.
        return module_copy(job.module, dtype)
    if job.spec_text is None:
        raise GradvizError("There is no network yet: type a spec such as 2-20-20-4:tanh.")
    return NetworkSpec.parse(job.spec_text).build(seed=job.net_seed, dtype=dtype)


def _shaped(model, x, job: ExplorerJob, started: float):
    """(model, x, None) flattened to (B, n) where the per-sample Jacobian is small enough,
    else (model, x, the SaliencyResult)."""
    import torch

    from gradviz.core.explorer.input_gradients import _outputs, flattened, input_gradients
    from gradviz.core.modelio.limits import MAX_JACOBIAN_ENTRIES

    with torch.no_grad():
        m = _outputs(model, x).shape[1]
    n = x[0].numel()
    if m * n <= MAX_JACOBIAN_ENTRIES:
        return flattened(model, tuple(x.shape[1:])), x.reshape(len(x), n), None
    grads = input_gradients(model, x)
    saliency = SaliencyResult(
        label=job.label,
        values=_numpy(grads.values),
        grad_x_input=_numpy(grads.grad_x_input),
        inputs=_numpy(x),
        outputs=_numpy(grads.outputs),
        explained=_numpy(grads.explained),
        norms=_numpy(grads.norms),
        method=grads.method,
        reason=grads.reason,
        seconds=time.perf_counter() - started,
    )
    return model, x, saliency


def _saliency_of(jac, outputs, shaped, label: str, result) -> SaliencyResult:
    """The saliency map of samples with a shape of their own, from their (B, m, n) Jacobian
    (no second computation): row k_b of J, k_b each sample's largest output (NaN counted
    as smallest, as core.input_gradients picks it), reshaped to (B, *in_shape)."""
    import math

    import torch

    explained = torch.nan_to_num(outputs.detach(), nan=-math.inf).argmax(dim=1)
    rows = jac[torch.arange(len(jac)), explained]  # (B, n)
    values = rows.reshape(shaped.shape)
    return SaliencyResult(
        label=label,
        values=_numpy(values),
        grad_x_input=_numpy(values * shaped),
        inputs=_numpy(shaped),
        outputs=_numpy(outputs),
        explained=_numpy(explained),
        norms=_numpy(rows.norm(dim=1)),
        method=result.method,
        reason=f"the row of each sample's largest output in its Jacobian ({result.reason})",
    )


def _field(model, job: ExplorerJob, dtype) -> dict:
    import torch

    from gradviz.core.nets.jacobians import gradient_field

    if job.in_dim < 2:
        return {"field_note": "The gradient field needs a network with at least two inputs."}
    if job.in_shape is not None and len(job.in_shape) > 1:
        return {"field_note": "The gradient field needs a network with inputs of shape (B, n)."}
    settings = job.inputs
    dims = grid_dims(settings, job.in_dim)
    base = torch.as_tensor(base_values(settings, job.in_dim), dtype=dtype)
    side = grid_side(settings)
    field = gradient_field(
        model,
        job.in_dim,
        dims=dims,
        base=base,
        x_range=settings.x_range,
        y_range=settings.y_range,
        shape=(side, side),
    )
    return {
        "field": _numpy(field.jacobians),
        "field_xs": _numpy(field.xs),
        "field_ys": _numpy(field.ys),
        "field_dims": dims,
    }


def _histograms(model, x, job: ExplorerJob) -> dict:
    from gradviz.core.explorer.histograms import parameter_gradient_histograms

    target = None
    if job.loss == "mse":
        if not job.target_path:
            return {
                "histogram_note": "The MSE loss needs a target file: one row of "
                f"{job.out_dim} numbers per input. Choose one, or pick another loss."
            }
        from gradviz.core.lab.pointsets import load_points

        try:
            target = load_points(job.target_path)
        except GradvizError as exc:
            return {"histogram_note": str(exc)}
    try:
        hists = parameter_gradient_histograms(model, x, job.loss, target, job.bins)
    except GradvizError as exc:
        return {"histogram_note": str(exc)}
    if not hists:
        return {"histograms": [], "histogram_note": "This network has no trainable parameters."}
    return {"histograms": hists}


# ---- helpers --------------------------------------------------------------------------------
def _numpy(tensor) -> np.ndarray:
    """A numpy copy off the device (``Tensor.numpy()`` would share memory)."""
    return tensor.detach().cpu().numpy().copy()


def _check(should_stop: Callable[[], bool]) -> None:
    if should_stop():
        raise Stopped
