"""Statistics of watched gradients, reduced on the tensors' device into one small tensor.

Everything here stays on the device: the caller stacks the results of a recorded step and
copies them to the host once (one synchronisation), instead of one ``.item()`` per number.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from gradviz.core.common.diagnostics import classify_tensor, finite_in_place, finiteness_sum
from gradviz.core.record import decades
from gradviz.core.record import layout as L

#: Largest side of a recorded per-entry health image (bigger matrices are downsampled).
MAX_IMAGE_SIDE = 512
#: Gradients of up to this many entries in all are laid end to end in a Workspace's kept
#: buffers (a few of them, 4 bytes an entry each); larger ones are reduced tensor by tensor
#: with temporaries, as memory allows.
FUSED_ENTRIES_LIMIT = 1 << 22


class Workspace:
    """Reusable flat buffers for the passes of ``gradient_rows``: a recorded step then
    allocates (and page-faults) no fresh memory the size of its gradients. Not shared
    between threads; each Recorder has its own."""

    def __init__(self) -> None:
        self._buffers: dict[tuple, torch.Tensor] = {}
        self._offsets: tuple[tuple, torch.Tensor] | None = None
        #: The flag ``diagnostics.finite_in_place`` writes a non-finite find into (kept 0).
        self.flag = torch.zeros(1)

    #: Consecutive entries are counted in this many separate histograms (summed after):
    #: bincount then rarely adds to the count it added to just before, which stalls.
    LANES = 4

    def take(self, n: int, dtype: torch.dtype, device: torch.device, slot: str) -> torch.Tensor:
        """A flat tensor of ``n`` elements (uninitialised), valid until ``slot`` is taken again."""
        key = (slot, dtype, device)
        buffer = self._buffers.get(key)
        if buffer is None or buffer.numel() < n:
            buffer = torch.empty(n, dtype=dtype, device=device)
            self._buffers[key] = buffer
        return buffer[:n]

    def bin_offsets(self, sizes: list[int], device: torch.device) -> torch.Tensor:
        """(sum(sizes),) int32 to add to the bin indices of tensors of ``sizes`` laid end to
        end, so that one bincount of length LANES * len(sizes) * BINS gives every tensor's
        histogram: t * BINS for an entry of the t-th tensor, plus (its position modulo
        LANES) * len(sizes) * BINS."""
        key = (tuple(sizes), device)
        if self._offsets is None or self._offsets[0] != key:
            starts = torch.arange(len(sizes), dtype=torch.int32) * L.BINS
            offsets = torch.repeat_interleave(starts, torch.tensor(sizes))
            lane = torch.arange(len(offsets), dtype=torch.int32) % self.LANES
            offsets += lane * (len(sizes) * L.BINS)
            self._offsets = (key, offsets.to(device))
        return self._offsets[1]


def histogram_bins(
    values: torch.Tensor, workspace: Workspace | None = None, finite: bool = False
) -> torch.Tensor:
    """Bin index (int32, flat) of each entry of ``values`` in the layout's fixed bins.

    With k = floor(log10|g|) - LOWEST_DECADE + 1 (1 .. DECADES for finite non-zero values,
    DECADES + 1 for an infinity, 0 for zero), the bin is ZERO_BIN + k with the sign of g:
    zero lands on ZERO_BIN, NaN on NAN_BIN, the infinities one past the outermost finite
    bins (NEG_INF_BIN, POS_INF_BIN). Read from the floats' bits (``decades``: the same
    cost for zeros, subnormals and normals, bitwise the bins of log10). Values other than
    float64 are binned as float32. With a ``workspace`` the result is one of its buffers
    (valid until the next call with it); ``finite`` True says no entry is NaN or Inf.
    """
    flat = values.detach().reshape(-1)
    if flat.dtype != torch.float64:
        flat = flat.to(torch.float32)
    return decades.bins_from_bits(flat, workspace, may_be_nan=not finite)


def gradient_rows(
    grads: list[torch.Tensor | None],
    params: list[torch.Tensor | None],
    device: torch.device,
    finite: list[bool] | None = None,
    workspace: Workspace | None = None,
) -> torch.Tensor:
    """(T, ROW_WIDTH) float64 on ``device``: per tensor the STAT_COLUMNS and the histogram.

    ``grads[t]`` None (no gradient reached it) gives NaN statistics and an empty histogram;
    ``params[t]`` None (a bare tensor whose value is not tracked) gives a NaN parameter norm.
    The update column is left NaN here (the recorder fills it in from the next step). The
    first-bad-index column holds the flat index of the first non-finite entry, or 0 when
    there is none (the histogram's NaN and Inf counts say which). ``finite[t]`` True says
    the caller already knows gradient t has no NaN or Inf (its search is then skipped).

    Per tensor a few passes: one copy without the non-finite entries, its L2 norm, its
    minimum and maximum (the largest |g|), the histogram's bin indices and one bincount.
    The numbers of all tensors are assembled on the device and written into ``rows`` at once.
    """
    if workspace is not None and _fusable(grads, device):
        return _fused_rows(grads, params, device, finite, workspace)
    # Big tensors (or mixed dtypes): temporaries, freed tensor by tensor.
    width = len(L.STAT_COLUMNS)
    rows = torch.full((len(grads), L.ROW_WIDTH), math.nan, dtype=torch.float64, device=device)
    rows[:, width:] = 0  # a missing gradient: an empty histogram
    nan = torch.full((), math.nan, dtype=torch.float64, device=device)
    zero = torch.zeros((), dtype=torch.float64, device=device)
    stat_rows, hist_rows, hist_index = [], [], []
    for t, (g, p) in enumerate(zip(grads, params)):
        param_norm = nan if p is None else vector_norm(p.detach().to(device))
        if g is None:
            stat_rows.append(torch.stack([nan, nan, param_norm, nan, nan]))
            continue
        g = g.detach().to(device).reshape(-1)
        if g.numel():
            clean = torch.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0)
            low, high = torch.aminmax(clean)  # the largest |g|, exactly, in one pass
            max_abs = torch.maximum(high, -low).to(torch.float64)
            if finite is not None and finite[t]:
                first_bad = zero
            else:  # NaN != 0 and Inf != 0: the entries nan_to_num changed are the bad ones.
                first_bad = clean.ne(g).view(torch.uint8).argmax().to(torch.float64)
            stat_rows.append(torch.stack([vector_norm(clean), max_abs, param_norm, nan, first_bad]))
        else:
            stat_rows.append(torch.stack([zero, zero, param_norm, nan, zero]))
        hist_rows.append(_count(histogram_bins(g)))
        hist_index.append(t)
    rows[:, :width] = torch.stack(stat_rows)
    if hist_rows:
        counts = torch.stack(hist_rows).to(torch.float64)
        if len(hist_index) == len(grads):
            rows[:, width:] = counts
        else:
            rows[torch.tensor(hist_index, device=device), width:] = counts
    return rows


def _fusable(grads: list[torch.Tensor | None], device: torch.device) -> bool:
    """Whether the gradients can be laid end to end in one buffer: all present, non-empty,
    of one floating dtype, on ``device`` and not too many entries in all."""
    if not grads or any(g is None or g.numel() == 0 for g in grads):
        return False
    if sum(g.numel() for g in grads) > FUSED_ENTRIES_LIMIT:
        return False
    dtype = grads[0].dtype
    return dtype.is_floating_point and all(g.dtype == dtype and g.device == device for g in grads)


def _fused_rows(
    grads: list[torch.Tensor],
    params: list[torch.Tensor | None],
    device: torch.device,
    finite: list[bool] | None,
    workspace: Workspace,
) -> torch.Tensor:
    """``gradient_rows`` for gradients laid end to end in one workspace buffer: the
    histograms of all tensors in one pass and one bincount, the norms and largest |g| in
    one multi-tensor call each, whatever the number of tensors."""
    sizes = [g.numel() for g in grads]
    n, dtype = sum(sizes), grads[0].dtype
    flat = workspace.take(n, dtype, device, "flat")
    torch.cat([g.detach().reshape(-1) for g in grads], out=flat)
    known_finite = finite is not None and all(finite)
    if known_finite:
        clean = flat  # no NaN or Inf to take out
    else:
        clean = workspace.take(n, dtype, device, "clean")
        torch.nan_to_num(flat, nan=0.0, posinf=0.0, neginf=0.0, out=clean)
    pieces = clean.split(sizes)
    grad_norm = norms(pieces)
    magnitude = torch.abs(clean, out=workspace.take(n, dtype, device, "absolute"))
    max_abs = _each_max(magnitude.split(sizes)).to(torch.float64)
    bins = histogram_bins(flat, workspace, finite=known_finite)
    first_bad = torch.zeros(len(grads), dtype=torch.float64, device=device)
    if not known_finite:
        for t, (c, g) in enumerate(zip(pieces, flat.split(sizes))):
            if finite is None or not finite[t]:
                # NaN != 0 and Inf != 0: the entries nan_to_num changed are the bad ones.
                first_bad[t] = c.ne(g).view(torch.uint8).argmax()  # the first maximum
    param_norm = torch.full((len(grads),), math.nan, dtype=torch.float64, device=device)
    tracked = [t for t, p in enumerate(params) if p is not None]
    if tracked:
        values = norms([params[t].detach().to(device) for t in tracked])
        if len(tracked) == len(params):
            param_norm = values
        else:
            param_norm[torch.tensor(tracked, device=device)] = values
    bins += workspace.bin_offsets(sizes, device)
    lanes = _count(bins, Workspace.LANES * len(sizes) * L.BINS)
    counts = lanes.reshape(Workspace.LANES, len(sizes), L.BINS).sum(0)
    update = torch.full_like(param_norm, math.nan)  # filled in by the recorder
    columns = torch.stack([grad_norm, max_abs, param_norm, update, first_bad], dim=1)
    return torch.cat([columns, counts.to(torch.float64)], dim=1)


def norms(tensors: list[torch.Tensor] | tuple[torch.Tensor, ...]) -> torch.Tensor:
    """(len(tensors),) float64: each tensor's L2 norm, in its own dtype like
    ``vector_norm``; one multi-tensor call where they share a dtype and device."""
    if len({(t.dtype, t.device) for t in tensors}) == 1 and hasattr(torch, "_foreach_norm"):
        return torch.stack(torch._foreach_norm(list(tensors))).to(torch.float64)
    return torch.stack([vector_norm(t) for t in tensors])


def _each_max(pieces: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """(len(pieces),) the largest entry of each piece: one multi-tensor call where torch
    has it (``_foreach_max`` is torch's own but private: if it goes, one call per piece)."""
    if hasattr(torch, "_foreach_max"):
        return torch.stack(torch._foreach_max(list(pieces)))
    return torch.stack([piece.max() for piece in pieces])


def _count(bins: torch.Tensor, length: int = L.BINS) -> torch.Tensor:
    """(length,) counts of bin indices. bincount on the CPU (one pass); elsewhere
    index_add_, because CUDA's bincount reads the largest index back to the host (a sync)."""
    if bins.device.type == "cpu":
        return torch.bincount(bins, minlength=length)
    counts = torch.zeros(length, dtype=torch.int64, device=bins.device)
    return counts.index_add_(0, bins.long(), torch.ones_like(bins, dtype=torch.int64))


def vector_norm(values: torch.Tensor, order: float = 2.0) -> torch.Tensor:
    """The vector norm in the values' own dtype (no float64 copy of a whole tensor)."""
    return torch.linalg.vector_norm(values, ord=order).to(torch.float64)


def fused_layout(tensors: list[torch.Tensor]) -> tuple[int, torch.dtype, torch.device] | None:
    """(entries in all, dtype, device) of gradients shaped like ``tensors`` where they can
    be laid end to end (see ``_fusable``), else None."""
    if not tensors or not _fusable(tensors, tensors[0].device):
        return None
    return sum(t.numel() for t in tensors), tensors[0].dtype, tensors[0].device


def gradients_known_finite(
    grads: list[torch.Tensor | None],
    device: torch.device,
    workspace: Workspace,
    layout: tuple[int, torch.dtype, torch.device] | None = None,
) -> bool:
    """True when every entry of every gradient is known finite, from one pass over all of
    them instead of a reduction per tensor (a small model's 72 sums cost three times as
    much; ``diagnostics.all_finite`` is the exact per-tensor test that stays on the
    device). On the CPU in float32 and float64 that pass is the exact test of
    ``diagnostics.finite_in_place``; otherwise it is one sum over the gradients laid end
    to end in ``workspace``. False is only "not known": the gradients could not be laid
    end to end, or an entry is non-finite, or (the sum) finite values overflowed; the
    caller then tests tensor by tensor. ``layout`` (from ``fused_layout`` of the tensors
    whose gradients these are) saves looking at each."""
    if device.type == "cpu":
        # Exact and in place, without a no_grad block: nothing here records a graph (a
        # gradient that is part of one is not tested in place), and between a step's
        # large operations entering one costs some twenty microseconds.
        known = finite_in_place(grads, workspace.flag)
        if known is not None:
            return known
    if layout is not None and layout[2] == device:
        if any(g is None for g in grads):
            return False
        n, dtype = layout[0], layout[1]
    elif not _fusable(grads, device):
        return False
    else:
        n, dtype = sum(g.numel() for g in grads), grads[0].dtype
    with torch.no_grad():
        flat = workspace.take(n, dtype, device, "flat")
        torch.cat([g.reshape(-1) for g in grads], out=flat)
        return math.isfinite(finiteness_sum(flat).item())


def finiteness_sums(grads: list[torch.Tensor | None], device: torch.device) -> torch.Tensor:
    """(T,) float64: the sum of each gradient (0 for None): non-finite when the gradient has
    a NaN or Inf (or, rarely, when a finite sum overflows: ``finite_flags`` settles it)."""
    present = [g.detach() for g in grads if g is not None]
    if len(present) == len(grads) and len({(g.dtype, g.device) for g in present}) == 1:
        return torch.stack([finiteness_sum(g) for g in present]).to(
            device=device, dtype=torch.float64
        )
    zero = torch.zeros((), dtype=torch.float64, device=device)
    return (
        torch.stack(
            [
                zero
                if g is None
                else finiteness_sum(g.detach()).to(device=device, dtype=torch.float64)
                for g in grads
            ]
        )
        if grads
        else torch.zeros(0, dtype=torch.float64, device=device)
    )


def finite_flags(grads: list[torch.Tensor | None], sums: list[float]) -> list[bool]:
    """Whether each gradient is finite, from its ``finiteness_sums`` value read on the host;
    a non-finite sum is only a suspicion (finite values may overflow it), settled on the
    tensor's entries. A missing gradient (sum 0) counts as finite."""
    return [math.isfinite(value) or bool(torch.isfinite(g).all()) for g, value in zip(grads, sums)]


def health_image(grad: torch.Tensor) -> torch.Tensor:
    """(H, W) uint8 Health codes of a matrix's gradient, at most MAX_IMAGE_SIDE a side.

    Codes as the lab classifies them (``diagnostics.classify_tensor``); a vector counts as
    one row, higher dimensions are flattened to (first dimension, rest). Downsampling keeps
    each block's largest code, its most alarming category, so one NaN entry stays visible.
    """
    codes = classify_tensor(grad.detach())
    if codes.ndim == 0:
        codes = codes.reshape(1, 1)
    elif codes.ndim == 1:
        codes = codes.reshape(1, -1)
    elif codes.ndim > 2:
        codes = codes.reshape(codes.shape[0], -1)
    rows, cols = codes.shape
    ky, kx = math.ceil(rows / MAX_IMAGE_SIDE), math.ceil(cols / MAX_IMAGE_SIDE)
    if ky == 1 and kx == 1:
        return codes
    pooled = F.max_pool2d(
        codes[None, None].to(torch.float32), (ky, kx), ceil_mode=True
    )  # small integers are exact in float32
    return pooled[0, 0].to(torch.uint8)
