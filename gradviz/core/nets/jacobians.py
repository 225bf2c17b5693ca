"""Per-input Jacobians of a network over a batch, and the batch structure around them.

For a model f: R^n -> R^m run on a batch X of shape (B, n), the per-input Jacobians are
J (B, m, n) with J[b] = d f(X)[b] / d X[b]: the diagonal blocks of the full batch Jacobian
(B*m, B*n). When samples do not interact (Linear layers and activations), every block off the
diagonal is exactly zero, which is what makes the fast methods valid.

Methods, by name (``compute_jacobians(model, X, method=...)``):

- ``loop``: one ``torch.autograd.grad`` per sample and output coordinate, the way people write
  it by hand. The reference for tests and benchmarks; B*m backward passes.
- ``batchsum``: one backward pass of the batch-summed output per output coordinate (m passes).
  Valid only when samples do not interact.
- ``jacrev`` / ``jacfwd``: ``torch.func.vmap`` of ``jacrev`` / ``jacfwd`` over single samples.
  Their first call in a process costs 1-2 s (torch.func imports torch._dynamo lazily).
- ``auto`` (the default): ``batchsum`` when the model cannot mix samples, else ``blocks``: the
  diagonal blocks of the full batch Jacobian from batched vector-Jacobian products. It never
  touches torch.func or forward mode on its fast path, so a CLI call does not pay their start-up.

Every method accepts inputs without ``requires_grad`` and leaves the model as it found it:
train/eval mode, ``requires_grad`` flags, ``.grad`` and buffers (BatchNorm's running statistics,
which a forward pass in training mode would otherwise update).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gradviz.core.common.errors import GradvizError
from gradviz.core.common.torch_notices import torch_deprecations_logged
from gradviz.core.settings.config import (
    MAX_FULL_BATCH,  # the one limit (torch-free for the CLI and app)
)

#: Method names a caller may ask for; ``config.JACOBIAN_METHODS`` must agree (a test checks).
METHODS: tuple[str, ...] = ("auto", "loop", "batchsum", "jacrev", "jacfwd")
#: Samples in the probe batch that ``auto`` uses to look for cross-sample derivatives.
PROBE_SAMPLES = 4
#: Tangent elements per vmap chunk of jacrev / jacfwd (bounds their memory on big batches).
_CHUNK_ELEMENTS = 1 << 24
#: Cotangent elements per batched vector-Jacobian chunk of ``blocks`` and the full J: smaller
#: chunks keep the per-row work in cache (1 << 24 ran twice as slow as this on a BatchNorm net).
_VJP_CHUNK_ELEMENTS = 1 << 20

# Modules whose forward treats every sample alone, whatever the batch (exact types only: a
# subclass may override forward). Dropout joins them in eval mode, where it is the identity.
_PER_SAMPLE_TYPES: tuple[type[nn.Module], ...] = (
    nn.Linear,
    nn.Identity,
    nn.ReLU,
    nn.Tanh,
    nn.Sigmoid,
    nn.GELU,
    nn.Softplus,
    nn.LeakyReLU,
    nn.ELU,
    nn.SiLU,
)


@dataclass(frozen=True)
class JacobianResult:
    """jacobians: (B, m, n) in the model's dtype and device; outputs: f(X), (B, m).

    ``method`` is the method that ran (``loop``, ``batchsum``, ``jacrev``, ``jacfwd`` or, as
    ``auto``'s fallback for models that mix samples, ``blocks``); ``reason`` says why.
    """

    jacobians: torch.Tensor
    outputs: torch.Tensor
    method: str
    reason: str


def compute_jacobians(
    model: nn.Module, inputs: torch.Tensor, method: str = "auto"
) -> JacobianResult:
    """Per-input Jacobians J (B, m, n) of ``model`` at each row of ``inputs`` (B, n).

    ``inputs`` are moved to the model's device and dtype (the model is not changed) and need
    no ``requires_grad``. A model output of shape (B,) counts as m = 1.
    """
    if method not in METHODS:
        raise GradvizError(
            f"Unknown Jacobian method {method!r}; choose one of: {', '.join(METHODS)}."
        )
    x = _prepare_inputs(model, inputs)
    elsewhere = _elsewhere(model)
    if elsewhere is not None:  # a program in its own process: computed there at once
        return elsewhere("jacobians", x, method)
    with _model_untouched(model), torch.enable_grad():
        if method == "auto":
            return _auto(model, x)
        if method == "loop":
            jac, out = _loop(model, x)
            return JacobianResult(
                jac,
                out,
                "loop",
                "requested: one backward pass per sample and output coordinate (the reference)",
            )
        if method == "batchsum":
            jac, out = _batchsum(model, x)
            return JacobianResult(
                jac,
                out,
                "batchsum",
                "requested: one backward pass of the "
                "batch-summed output per output coordinate; assumes samples "
                "do not interact",
            )
        jac, out = _vmapped(model, x, forward_mode=method == "jacfwd")
        return JacobianResult(
            jac, out, method, f"requested: torch.func.vmap of {method} over single samples"
        )


# ---- methods --------------------------------------------------------------------------------
def _loop(
    model: nn.Module, x: torch.Tensor, samples: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference: autograd.grad per sample and output coordinate, on one forward pass.

    ``samples`` limits the work to the first samples (the benchmark extrapolates from it);
    the other rows of J stay zero.
    """
    x = x.detach().requires_grad_(True)
    y = _forward(model, x)
    batch, m = y.shape
    jac = x.new_zeros(batch, m, x.shape[1])
    for b in range(batch if samples is None else min(samples, batch)):
        for i in range(m):
            (grad,) = torch.autograd.grad(y[b, i], x, retain_graph=True)
            jac[b, i] = grad[b]
    return jac, y.detach()


def _batchsum(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """m backward passes: d(sum_b f_i(X)[b]) / dX = row b of block (b, b) when samples do not
    interact, since every other term of the sum does not depend on X[b]."""
    x = x.detach().requires_grad_(True)
    y = _forward(model, x)
    batch, m = y.shape
    jac = x.new_empty(batch, m, x.shape[1])
    for i in range(m):
        # A scalar output and no grad_outputs: passing a cotangent tensor makes autograd
        # import torch.fx's symbolic shapes (and sympy), ~0.3-0.6 s on a first call.
        (grad,) = torch.autograd.grad(y[:, i].sum(), x, retain_graph=i < m - 1)
        jac[:, i] = grad
    return jac, y.detach()


def _vmapped(
    model: nn.Module, x: torch.Tensor, forward_mode: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.func.vmap of jacrev or jacfwd of the one-sample function."""
    from torch.func import jacfwd, jacrev, vmap  # deferred: the first call costs 1-2 s

    def one_sample(xb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = model(xb.unsqueeze(0)).reshape(-1)
        return y, y

    transform = jacfwd if forward_mode else jacrev
    name = "jacfwd" if forward_mode else "jacrev"
    try:
        # torch's forward-mode decompositions still use torch.jit.script on first use, which
        # warns about its own deprecation; that is torch's business, not the user's.
        with torch_deprecations_logged():
            chunk = _vmap_chunk(model, x)
            jac, out = vmap(transform(one_sample, has_aux=True), chunk_size=chunk)(x.detach())
    except RuntimeError as exc:
        raise GradvizError(
            f"The {name} method could not run this model one sample at a time "
            f"({_first_line(exc)}); models that mix samples (e.g. BatchNorm in training mode) "
            "or use layers that torch.func cannot batch (e.g. LSTMs) need the auto or loop "
            "method."
        ) from None
    return jac.detach(), out.detach()


def _vmap_chunk(model: nn.Module, x: torch.Tensor) -> int | None:
    """Samples per vmap chunk, so that the per-sample tangents of the widest layer stay near
    _CHUNK_ELEMENTS (jacfwd on a 64-256-256-10 net at B = 16384 would otherwise hold ~6 GB);
    None where the whole batch fits."""
    linears = [mod for mod in model.modules() if isinstance(mod, nn.Linear)]
    widest = max([x.shape[1]] + [max(lin.in_features, lin.out_features) for lin in linears])
    # Each sample carries n (jacfwd) or m (jacrev) tangent rows; m is the last Linear's width.
    rows = max(x.shape[1], linears[-1].out_features if linears else 1)
    chunk = max(1, _CHUNK_ELEMENTS // (rows * widest))
    return None if chunk >= len(x) else chunk


def _blocks(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Diagonal blocks of the full batch Jacobian: one batched vector-Jacobian product per
    chunk of samples, with a one-hot cotangent for each (sample, output coordinate)."""
    x = x.detach().requires_grad_(True)
    y = _forward(model, x)
    batch, m = y.shape
    n = x.shape[1]
    jac = x.new_empty(batch, m, n)
    per_chunk = _samples_per_vjp_chunk(batch, m, n)
    for start in range(0, batch, per_chunk):
        samples = torch.arange(start, min(start + per_chunk, batch), device=x.device)
        grads = _one_hot_vjps(y, x, samples)  # (len, m, B, n)
        jac[samples] = grads[torch.arange(len(samples), device=x.device), :, samples]
    return jac, y.detach()


def _samples_per_vjp_chunk(batch: int, m: int, n: int) -> int:
    """Samples per batched vector-Jacobian product: a chunk of k samples holds one-hot
    cotangents (k*m, B, m) and gradients (k*m, B, n), kept near _VJP_CHUNK_ELEMENTS."""
    return max(1, min(batch, _VJP_CHUNK_ELEMENTS // (batch * m * (m + n))))


def _one_hot_vjps(y: torch.Tensor, x: torch.Tensor, samples: torch.Tensor) -> torch.Tensor:
    """Rows of the full batch Jacobian for the given samples: (len(samples), m, B, n)."""
    batch, m = y.shape
    k = len(samples)
    cotangents = y.new_zeros(k, m, batch, m)
    coords = torch.arange(m, device=y.device)
    rows = torch.arange(k, device=y.device)[:, None]
    cotangents[rows, coords[None, :], samples[:, None], coords[None, :]] = 1
    (grads,) = torch.autograd.grad(
        y, x, cotangents.reshape(k * m, batch, m), retain_graph=True, is_grads_batched=True
    )
    return grads.reshape(k, m, batch, x.shape[1])


def _auto(model: nn.Module, x: torch.Tensor) -> JacobianResult:
    """batchsum when samples provably or observably do not interact; blocks otherwise."""
    if _per_sample_by_construction(model):
        reason = (
            "every layer acts on each sample alone (a plain Sequential of Linear layers "
            "and activations), so the batch-summed backward is exact"
        )
    elif len(x) == 1:
        reason = "one sample: there is nothing to mix, so the batch-summed backward is exact"
    else:
        probe = x[:PROBE_SAMPLES]
        off = _probe_cross_sample(model, probe)
        if off != off:  # NaN: the model computes NaN here, which hides whether it mixes
            jac, out = _blocks(model, x)
            return JacobianResult(
                jac,
                out,
                "blocks",
                "the probe's cross-sample derivatives are NaN (NaN or Inf in the weights or "
                "outputs), so mixing could not be ruled out; computed the diagonal blocks with "
                "batched backward passes",
            )
        if off != 0:
            jac, out = _blocks(model, x)
            return JacobianResult(
                jac,
                out,
                "blocks",
                f"fell back from batchsum: the model mixes samples (largest cross-sample "
                f"derivative on a probe of {len(probe)} samples: {off:.3g}), so batchsum "
                "would be wrong; computed the diagonal blocks with batched backward passes",
            )
        reason = (
            f"a probe of {len(probe)} samples showed no cross-sample derivatives, so the "
            "batch-summed backward was used (a probe cannot rule out mixing that appears only "
            "on other inputs)"
        )
    jac, out = _batchsum(model, x)
    return JacobianResult(jac, out, "batchsum", reason)


def _probe_cross_sample(model: nn.Module, probe: torch.Tensor) -> float:
    """Largest |d f(P)[a]_i / d P[b]| with a != b, for a the first and the last probe sample
    (2m backward passes; catches symmetric mixing such as batch statistics and one-directional
    mixing such as a running sum over the batch). NaN counts as mixing."""
    x = probe.detach().requires_grad_(True)
    y = _forward(model, x)
    size, m = y.shape
    largest = 0.0
    for a in (0, size - 1):
        others = torch.arange(size, device=x.device) != a
        for i in range(m):
            (grad,) = torch.autograd.grad(y[a, i], x, retain_graph=True)
            cross = grad[others].abs()
            if cross.isnan().any():
                return float("nan")
            largest = max(largest, float(cross.max()))
    return largest


def _per_sample_by_construction(model: nn.Module) -> bool:
    """True for a plain nn.Sequential (nested allowed) of modules that act on each sample
    alone, with no hooks that could change that."""
    from torch.nn.modules import module as module_mod

    if getattr(module_mod, "_global_forward_hooks", None) or getattr(
        module_mod, "_global_forward_pre_hooks", None
    ):
        return False
    return _plain_per_sample(model)


def _plain_per_sample(module: nn.Module) -> bool:
    if module._forward_hooks or module._forward_pre_hooks:
        return False
    if type(module) is nn.Sequential:
        return all(_plain_per_sample(child) for child in module)
    if type(module) is nn.Dropout:
        return not module.training
    return type(module) in _PER_SAMPLE_TYPES


# ---- full batch Jacobian -----------------------------------------------------------------
def full_batch_jacobian(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """The full Jacobian of the batched model, (B*m, B*n): entry (b*m + i, c*n + j) is
    d f(X)[b, i] / d X[c, j]. Block (b, b) is J[b]; the rest is zero unless samples interact.

    For B <= MAX_FULL_BATCH (256); GradvizError above, since it grows as B^2.
    """
    x = _prepare_inputs(model, inputs)
    batch, n = x.shape
    if batch > MAX_FULL_BATCH:
        raise GradvizError(
            f"The full batch Jacobian is limited to {MAX_FULL_BATCH} samples (it grows as B^2); "
            f"this batch has {batch}: use a smaller batch."
        )
    elsewhere = _elsewhere(model)
    if elsewhere is not None:
        return elsewhere("full", x)
    with _model_untouched(model), torch.enable_grad():
        x = x.detach().requires_grad_(True)
        y = _forward(model, x)
        m = y.shape[1]
        per_chunk = _samples_per_vjp_chunk(batch, m, n)
        rows = [
            _one_hot_vjps(y, x, torch.arange(s, min(s + per_chunk, batch), device=x.device))
            for s in range(0, batch, per_chunk)
        ]
    return torch.cat(rows).reshape(batch * m, batch * n).detach()


def max_off_block(full: torch.Tensor, batch: int, m: int, n: int) -> float:
    """Largest |entry| of the full batch Jacobian (B*m, B*n) outside its diagonal (m, n)
    blocks, on this batch: exactly 0 for models without cross-sample operations."""
    if full.shape != (batch * m, batch * n):
        raise GradvizError(
            f"A full batch Jacobian for B={batch}, m={m}, n={n} has shape "
            f"({batch * m}, {batch * n}), not {tuple(full.shape)}."
        )
    if batch == 1:
        return 0.0
    blocks = full.reshape(batch, m, batch, n).abs()
    off = ~torch.eye(batch, dtype=torch.bool, device=full.device)
    return float(blocks.permute(0, 2, 1, 3)[off].max())


# ---- batch statistics ---------------------------------------------------------------------
@dataclass(frozen=True)
class BatchStatistics:
    """Per-entry statistics of J (B, m, n) across the batch, each (m, n): ``mean``, ``std``
    (population, so B = 1 gives 0) and ``spread`` (max - min). ``tolerance`` is the spread
    allowed by ``constant_across_batch``: 8 * eps(dtype) * max|J|."""

    mean: torch.Tensor
    std: torch.Tensor
    spread: torch.Tensor
    tolerance: float
    constant_across_batch: bool


def batch_statistics(jacobians: torch.Tensor) -> BatchStatistics:
    """Mean, standard deviation and spread of each Jacobian entry across the batch.

    ``constant_across_batch`` is true when, for every entry, max - min across the batch is at
    most 8 * eps(dtype) * max|J|. It is a verdict about this batch, not about the model: a
    linear net is constant everywhere, but a ReLU net whose samples all fall in one linear
    region is constant too, and any batch of one sample is. NaN anywhere makes it false.
    """
    if jacobians.ndim != 3 or len(jacobians) == 0:
        raise GradvizError(
            f"Batch statistics need Jacobians of shape (B, m, n) with B >= 1, "
            f"not {tuple(jacobians.shape)}."
        )
    jac = jacobians.detach()
    spread = jac.amax(dim=0) - jac.amin(dim=0)
    tolerance = 8 * torch.finfo(jac.dtype).eps * float(jac.abs().max())
    return BatchStatistics(
        mean=jac.mean(dim=0),
        std=jac.std(dim=0, correction=0),
        spread=spread,
        tolerance=tolerance,
        constant_across_batch=bool((spread <= tolerance).all()),
    )


def constant_across_batch(jacobians: torch.Tensor) -> bool:
    """Whether J (B, m, n) is the same for every sample of this batch; see batch_statistics."""
    return batch_statistics(jacobians).constant_across_batch


# ---- gradient field over a 2-D grid --------------------------------------------------------
@dataclass(frozen=True)
class GradientField:
    """J over a grid of inputs that varies two input dimensions, the others fixed at ``base``.

    xs: (W,) values of input ``dims[0]`` (columns); ys: (H,) values of ``dims[1]`` (rows);
    jacobians: (H, W, m, n); outputs: (H, W, m). ``heatmap`` gives one entry as an image.
    """

    xs: torch.Tensor
    ys: torch.Tensor
    dims: tuple[int, int]
    jacobians: torch.Tensor
    outputs: torch.Tensor
    method: str
    reason: str

    def heatmap(self, out_index: int, in_index: int) -> np.ndarray:
        """d f_out / d x_in over the grid: (H, W) float32, C-contiguous, row = y, column = x
        (what ``pyqtgraph.ImageItem(axisOrder="row-major")`` wants)."""
        m, n = self.jacobians.shape[2:]
        if not (0 <= out_index < m and 0 <= in_index < n):
            raise GradvizError(
                f"Jacobian entry ({out_index}, {in_index}) does not exist; outputs run 0..{m - 1} "
                f"and inputs 0..{n - 1}."
            )
        image = self.jacobians[:, :, out_index, in_index].detach().cpu().numpy()
        return np.ascontiguousarray(image, dtype=np.float32)


def gradient_field(
    model: nn.Module,
    in_dim: int,
    *,
    dims: tuple[int, int] = (0, 1),
    base: torch.Tensor | None = None,
    x_range: tuple[float, float] = (-2.0, 2.0),
    y_range: tuple[float, float] = (-2.0, 2.0),
    shape: tuple[int, int] = (64, 64),
    method: str = "auto",
) -> GradientField:
    """Per-input Jacobians on an (H, W) = ``shape`` grid over ``x_range`` x ``y_range`` of
    inputs ``dims``; the other of the ``in_dim`` inputs are fixed at ``base`` (n,), default 0."""
    first, second = dims
    if in_dim < 2 or first == second or not (0 <= first < in_dim and 0 <= second < in_dim):
        raise GradvizError(
            f"A gradient field needs two different input dimensions of the {in_dim} inputs; "
            f"got {dims}."
        )
    height, width = shape
    if height < 1 or width < 1:
        raise GradvizError(f"A gradient field needs a grid of at least 1 x 1, not {shape}.")
    dtype, device = _model_dtype_device(model)
    dtype = dtype or torch.get_default_dtype()
    xs = torch.linspace(*x_range, width, dtype=dtype, device=device)
    ys = torch.linspace(*y_range, height, dtype=dtype, device=device)
    if base is None:
        base = torch.zeros(in_dim, dtype=dtype, device=device)
    if base.shape != (in_dim,):
        raise GradvizError(f"The base point must have {in_dim} entries, not {tuple(base.shape)}.")
    grid = base.to(dtype=dtype, device=device).repeat(height * width, 1)
    grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
    grid[:, first] = grid_x.reshape(-1)
    grid[:, second] = grid_y.reshape(-1)
    result = compute_jacobians(model, grid, method)
    m = result.jacobians.shape[1]
    return GradientField(
        xs=xs,
        ys=ys,
        dims=(first, second),
        jacobians=result.jacobians.reshape(height, width, m, in_dim),
        outputs=result.outputs.reshape(height, width, m),
        method=result.method,
        reason=result.reason,
    )


# ---- plumbing -----------------------------------------------------------------------------
def _elsewhere(model: nn.Module):
    """``run_elsewhere(name, inputs, *args)`` of a model that runs in another process (a
    trusted program, gradviz.core.modelio.remote_program), else None: batched backward
    passes (vmap) cannot reach it, so whole computations are asked of that process."""
    return getattr(model, "run_elsewhere", None)


def _model_dtype_device(model: nn.Module) -> tuple[torch.dtype | None, torch.device | None]:
    for tensor in model.parameters():
        return tensor.dtype, tensor.device
    return None, None


def _prepare_inputs(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """A detached (B, n) tensor in the model's dtype and device."""
    if not isinstance(inputs, torch.Tensor):
        raise GradvizError(f"Inputs must be a torch tensor of shape (B, n), not {type(inputs)}.")
    if inputs.ndim != 2 or inputs.shape[0] == 0 or inputs.shape[1] == 0:
        raise GradvizError(
            f"Inputs must have shape (B, n) with B >= 1 and n >= 1, not {tuple(inputs.shape)}."
        )
    if not inputs.is_floating_point():
        raise GradvizError(f"Inputs must be floating point, not {inputs.dtype}.")
    dtype, device = _model_dtype_device(model)
    x = inputs.detach().to(dtype=dtype or inputs.dtype, device=device or inputs.device)
    return x.clone() if x.is_inference() else x


def _forward(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """model(x) as (B, m); a (B,) output counts as m = 1."""
    try:
        y = model(x)
    except RuntimeError as exc:
        message = _first_line(exc)
        hint = "; check that the input width matches the model" if "shape" in message else ""
        raise GradvizError(
            f"The model could not run on inputs of shape {tuple(x.shape)} ({message}){hint}."
        ) from None
    if not isinstance(y, torch.Tensor) or y.shape[:1] != x.shape[:1] or y.ndim > 2:
        shape = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise GradvizError(
            f"The model must map (B, n) inputs to (B, m) outputs; it returned {shape} for "
            f"inputs of shape {tuple(x.shape)}."
        )
    return y.reshape(len(x), -1)


@contextmanager
def _model_untouched(model: nn.Module) -> Iterator[None]:
    """Restore the model's buffers (e.g. BatchNorm running statistics updated by a forward
    pass in training mode) and train/eval flags after the block."""
    buffers = [(buf, buf.detach().clone()) for buf in model.buffers()]
    modes = [(module, module.training) for module in model.modules()]
    try:
        yield
    finally:
        with torch.no_grad():
            for buf, saved in buffers:
                buf.copy_(saved)
        for module, training in modes:
            if module.training != training:  # Module.__setattr__ is slow: 20,000 modules
                module.training = training


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0].rstrip(".") if text else type(exc).__name__
