"""The explorer's computation: a job in, an ExplorerResult of numpy copies out.

Runs on the worker thread and imports torch there (the GUI's import path must not). Each
stage calls ``should_stop`` first so that closing the tab does not wait for later stages.
Everything numeric comes from gradviz.core (Jacobians, batch statistics, full batch
Jacobian, gradient field, histograms); this module only wires them up.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from gradviz.core.errors import GradvizError
from gradviz.gui.explorer.jobs import ExplorerJob, ExplorerResult, InputSettings

#: The largest full batch Jacobian the explorer builds (entries): beyond it, building it
#: takes tens of seconds and its picture hundreds of MB, for blocks too small to see.
MAX_FULL_ENTRIES = 1 << 22


class Stopped(Exception):
    """The job was abandoned because the tab is closing or a newer job arrived."""


def run_job(job: ExplorerJob, should_stop: Callable[[], bool] = lambda: False) -> ExplorerResult:
    """Compute everything the explorer shows for ``job``; raises GradvizError for bad input."""
    import torch

    from gradviz.core import jacobians as jac_mod

    started = time.perf_counter()
    dtype = torch.float64 if job.dtype == "float64" else torch.float32
    model = _model(job, dtype)
    x = torch.as_tensor(make_inputs(job.inputs, job.in_dim), dtype=dtype)

    _check(should_stop)
    result = jac_mod.compute_jacobians(model, x)
    jac = result.jacobians
    stats = jac_mod.batch_statistics(jac)
    batch, m, n = jac.shape
    pieces: dict = {}

    _check(should_stop)
    entries = batch * m * batch * n
    if batch > jac_mod.MAX_FULL_BATCH:
        pieces["full_note"] = (
            f"The full batch Jacobian is drawn for batches of up to {jac_mod.MAX_FULL_BATCH} "
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


def make_inputs(settings: InputSettings, in_dim: int) -> np.ndarray:
    """The batch (B, n) float64 for these settings."""
    if settings.kind == "random":
        if settings.batch < 1:
            raise GradvizError(f"The batch size must be at least 1, not {settings.batch}.")
        rng = np.random.default_rng(settings.seed)
        return rng.standard_normal((settings.batch, in_dim))
    if settings.kind == "grid":
        xs, ys = _grid_axes(settings)
        grid = np.repeat(_base(settings, in_dim)[None, :], len(xs) * len(ys), axis=0)
        gy, gx = np.meshgrid(ys, xs, indexing="ij")
        first, second = _grid_dims(settings, in_dim)
        grid[:, first] = gx.ravel()
        grid[:, second] = gy.ravel()
        return grid
    if settings.kind == "file":
        from gradviz.core.pointsets import load_points

        if not settings.path:
            raise GradvizError("Choose an input file (CSV or NPY, one input per row) first.")
        points = load_points(settings.path)
        if points.shape[1] != in_dim:
            raise GradvizError(
                f"The input file has {points.shape[1]} columns but the network takes "
                f"{in_dim} inputs; give one row of {in_dim} numbers per input."
            )
        return points
    raise GradvizError(f"Unknown input source {settings.kind!r}.")


# ---- stages ---------------------------------------------------------------------------------
def _model(job: ExplorerJob, dtype):
    from gradviz.core.networks import NetworkSpec, module_copy

    if job.module is not None:
        # A copy per job: converting the dtype in place would lose precision for later jobs.
        return module_copy(job.module, dtype)
    if job.spec_text is None:
        raise GradvizError("There is no network yet: type a spec such as 2-20-20-4:tanh.")
    return NetworkSpec.parse(job.spec_text).build(seed=job.net_seed, dtype=dtype)


def _field(model, job: ExplorerJob, dtype) -> dict:
    import torch

    from gradviz.core.jacobians import gradient_field

    if job.in_dim < 2:
        return {"field_note": "The gradient field needs a network with at least two inputs."}
    settings = job.inputs
    dims = _grid_dims(settings, job.in_dim)
    base = torch.as_tensor(_base(settings, job.in_dim), dtype=dtype)
    side = _side(settings)
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
    from gradviz.core.histograms import parameter_gradient_histograms

    target = None
    if job.loss == "mse":
        if not job.target_path:
            return {
                "histogram_note": "The MSE loss needs a target file: one row of "
                f"{job.out_dim} numbers per input. Choose one, or pick another loss."
            }
        from gradviz.core.pointsets import load_points

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
def _grid_dims(settings: InputSettings, in_dim: int) -> tuple[int, int]:
    first, second = settings.dims
    if in_dim < 2 or first == second or not (0 <= first < in_dim and 0 <= second < in_dim):
        raise GradvizError(
            f"The grid needs two different input dimensions between 0 and {in_dim - 1}; "
            f"got {first} and {second}."
        )
    return first, second


def _side(settings: InputSettings) -> int:
    if not 2 <= settings.side <= 256:
        raise GradvizError(f"The grid side must be between 2 and 256, not {settings.side}.")
    return settings.side


def _grid_axes(settings: InputSettings) -> tuple[np.ndarray, np.ndarray]:
    side = _side(settings)
    return np.linspace(*settings.x_range, side), np.linspace(*settings.y_range, side)


def _base(settings: InputSettings, in_dim: int) -> np.ndarray:
    """The fixed values of the inputs that are not on the grid: (n,) float64."""
    base = settings.base
    if not base:
        return np.zeros(in_dim)
    if len(base) == 1:
        return np.full(in_dim, base[0], dtype=np.float64)
    if len(base) != in_dim:
        raise GradvizError(
            f"Give one fixed value for every input ({in_dim}), or a single value for all; "
            f"got {len(base)}."
        )
    return np.asarray(base, dtype=np.float64)


def _numpy(tensor) -> np.ndarray:
    """A numpy copy off the device (``Tensor.numpy()`` would share memory)."""
    return tensor.detach().cpu().numpy().copy()


def _check(should_stop: Callable[[], bool]) -> None:
    if should_stop():
        raise Stopped
