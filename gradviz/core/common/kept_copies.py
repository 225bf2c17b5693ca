"""Copies of tensors into buffers kept from one call to the next.

A recorded step copies the watched parameters (to measure the optimizer's update after it);
``watch(origin=True)`` copies the biases' gradients as each backward ends. Both happen again
and again with tensors of the same shapes, so the buffers are refilled rather than
allocated, by one multi-tensor copy.
"""

from __future__ import annotations

import torch


class KeptCopies:
    """``take(tensors)``: a copy of each tensor (None for None), in buffers reused from the
    previous call wherever a tensor kept its shape, dtype and device. A copy stays valid
    until the next ``take``."""

    def __init__(self) -> None:
        self._buffers: list[torch.Tensor | None] = []

    def take(self, tensors: list[torch.Tensor | None]) -> list[torch.Tensor | None]:
        buffers = self._buffers + [None] * (len(tensors) - len(self._buffers))
        buffers = buffers[: len(tensors)]
        for k, t in enumerate(tensors):
            if t is None:
                buffers[k] = None
            elif (b := buffers[k]) is None or (b.shape, b.dtype, b.device) != (
                t.shape,
                t.dtype,
                t.device,
            ):
                buffers[k] = torch.empty_like(t, memory_format=torch.contiguous_format)
        self._buffers = buffers
        pairs = [(b, t.detach()) for b, t in zip(buffers, tensors) if t is not None]
        if pairs:
            with torch.no_grad():
                _copy_into([b for b, _ in pairs], [t for _, t in pairs])
        return list(buffers)


def _copy_into(buffers: list[torch.Tensor], tensors: list[torch.Tensor]) -> None:
    """Each tensor into its buffer: one multi-tensor call where torch has it (torch's own
    but private; without it, one copy each)."""
    if hasattr(torch, "_foreach_copy_"):
        torch._foreach_copy_(buffers, tensors)
        return
    for buffer, t in zip(buffers, tensors):
        buffer.copy_(t)
