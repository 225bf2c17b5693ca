"""Gradient health: which gradients flow, vanish, are blocked on purpose, or blow up.

The torch functions here run on the tensors' own device and return uint8 Health codes
(see gradviz.core.common.health), with the same semantics as the numpy ``health.classify``: the
codes are ordered by alarm, an entry under the method's blocked mask is BLOCKED unless its
gradient is more alarming (a NaN behind a mask is still a NaN).
"""

from __future__ import annotations

import math

import torch

from gradviz.core.common.health import Health


def classify_tensor(values: torch.Tensor, blocked: torch.Tensor | None = None) -> torch.Tensor:
    """Health code of every entry of ``values`` (any shape): uint8, same shape and device.

    Torch twin of ``health.classify``: FINITE, ZERO where exactly 0, BLOCKED where
    ``blocked`` (bool, same shape) is true, then -Inf, +Inf and NaN override in that order.
    """
    codes = torch.zeros(values.shape, dtype=torch.uint8, device=values.device)
    codes.masked_fill_(values == 0, int(Health.ZERO))
    if blocked is not None:
        codes.masked_fill_(blocked.to(torch.bool), int(Health.BLOCKED))
    codes.masked_fill_(values == float("-inf"), int(Health.NEG_INF))
    codes.masked_fill_(values == float("inf"), int(Health.POS_INF))
    codes.masked_fill_(torch.isnan(values), int(Health.NAN))
    return codes


def entry_health(entry_grads: torch.Tensor, blocked: torch.Tensor | None) -> torch.Tensor:
    """(N, N) uint8 health of each distance-matrix entry.

    ``entry_grads`` is dLoss/d(pre-sqrt squared distance) where the method has one, else
    dLoss/d(distance); ``blocked`` (the method's mask, or None) marks where it stops the
    gradient.
    """
    return classify_tensor(entry_grads, blocked)


def coord_health(coord_grads: torch.Tensor) -> torch.Tensor:
    """(N, D) uint8 health of each coordinate's gradient dLoss/dx_id."""
    return classify_tensor(coord_grads)


def worst_code(values: torch.Tensor | None) -> int:
    """The most alarming Health code among ``values``; ZERO for a missing gradient (None)."""
    if values is None:
        return int(Health.ZERO)
    if values.numel() == 0:
        return int(Health.FINITE)
    return int(classify_tensor(values.detach()).max())


def parameter_health(named_parameters) -> tuple[tuple[str, int], ...]:
    """(name, worst Health code of its .grad) for each parameter, in order.

    ``named_parameters`` is an iterable of (name, tensor), e.g. ``module.named_parameters()``.
    A parameter that received no gradient (grad None) counts as ZERO. One host sync in all.
    """
    items = list(named_parameters)
    if not items:
        return ()
    worst = []
    for _, p in items:
        if p.grad is None:
            worst.append(torch.tensor(int(Health.ZERO), dtype=torch.uint8, device=p.device))
        elif p.grad.numel() == 0:
            worst.append(torch.tensor(int(Health.FINITE), dtype=torch.uint8, device=p.device))
        else:
            worst.append(classify_tensor(p.grad.detach()).max())
    codes = torch.stack([w.to(items[0][1].device) for w in worst]).tolist()
    return tuple((name, int(code)) for (name, _), code in zip(items, codes, strict=True))


_HALF = (torch.float16, torch.bfloat16)


def finiteness_sum(t: torch.Tensor) -> torch.Tensor:
    """A finiteness test that stays on the device: the sum of ``t`` (half precision summed in
    float32) is NaN or Inf where ``t`` holds one. A sum of finite values near the limit of
    the dtype may overflow too, so a non-finite sum is only a suspicion (a float64
    accumulation would be exact but costs 25x a float32 sum on the CPU)."""
    return t.sum(dtype=torch.float32) if t.dtype in _HALF else t.sum()


#: The dtypes whose every value ``finite_in_place`` leaves as it was, bit for bit (in
#: bfloat16 it was seen to rewrite a NaN's payload).
_KEPT_BITWISE = (torch.float32, torch.float64)


def finite_in_place(tensors: list, flag: torch.Tensor | None = None) -> bool | None:
    """Whether every entry of CPU tensors is finite, exactly, in one multi-tensor pass: the
    non-finite check of torch's GradScaler with an unscale factor of 1, which it does not
    multiply by (it writes each value back as it read it: a test holds it to that, NaN
    payloads and subnormals under flush-to-zero included). A quarter of the cost of copying
    a small model's gradients end to end and summing them, and a third of a sum per tensor.
    None where it is not used: an old torch without it, a None among the tensors, a dtype
    other than float32 and float64, a tensor on another device, one that is itself part of
    a graph (a gradient made with ``create_graph=True``, perhaps saved for a gradient
    penalty's backward: torch does not count this write as a change today, and a torch
    that did would make that backward fail), or one whose entries share memory (the kernel
    refuses to write it). ``flag``: a (1,) float32 CPU tensor of 0 kept by a caller that
    tests at every step (the kernel only ever writes 1 into it; it is 0 again on return),
    instead of one allocated per call."""
    if _CHECK is None:
        return None
    for t in tensors:  # a loop, not any(): this runs at every logged step
        if t is None or t.requires_grad or t.dtype not in _KEPT_BITWISE:
            return None
    found = torch.zeros(1) if flag is None else flag
    try:
        _CHECK(tensors, found, _ONE)
    except RuntimeError:  # a tensor on another device, or with shared entries
        if flag is not None:
            flag.zero_()  # the tensors before the refused one may have set it
        return None
    if not found.item():
        return True
    if flag is not None:
        flag.zero_()
    return False


_CHECK = getattr(torch, "_amp_foreach_non_finite_check_and_unscale_", None)
_ONE = torch.ones(1)  # the unscale factor of ``finite_in_place``: read, never written


def all_finite(tensors, device: torch.device) -> torch.Tensor:
    """A 0-d bool tensor on ``device``: every tensor in ``tensors`` (None skipped) is finite.

    Stays on the device (no host sync), so the caller decides when to read it.
    """
    flags = [torch.isfinite(t).all() for t in tensors if t is not None]
    if not flags:
        return torch.ones((), dtype=torch.bool, device=device)
    return torch.stack(flags).all() if len(flags) > 1 else flags[0]


def grad_norms(tensors, device: torch.device) -> torch.Tensor:
    """(len(tensors),) tensor on ``device``: each tensor's L2 norm in its own dtype (NaN
    where it holds a NaN, Inf where it holds an Inf or its norm overflows), NaN for None
    (no gradient reached it), as a recording's statistics read them.

    One multi-tensor call where the tensors share a dtype; no host sync.
    """
    present = [t for t in tensors if t is not None]
    if not present:
        return torch.full((len(tensors),), math.nan, device=device)
    if len({t.dtype for t in present}) == 1 and hasattr(torch, "_foreach_norm"):
        values = torch.stack(torch._foreach_norm(present))
    else:
        values = torch.stack([torch.linalg.vector_norm(t).to(present[0].dtype) for t in present])
    if len(present) == len(tensors):
        return values
    out = torch.full((len(tensors),), math.nan, dtype=values.dtype, device=device)
    out[[i for i, t in enumerate(tensors) if t is not None]] = values
    return out
