"""An optimizer's step outside the tracer, replayed under it only where it went wrong.

Most operations of a small model's traced training step are the optimizer's (Adam on the
CPU runs a dozen per parameter, one at a time), and each costs a call into Python under a
dispatch mode. Where nothing non-finite has been seen yet, the tracer copies what a step
changes (parameters, their gradients and the optimizer's state), lets the step run
untraced, and tests the parameters after it. Only where the step made one non-finite does
it put the copies back and run the step again under the tracer, which then sees the
operation that did it; the values the first run left are put back afterwards, so the
trace changes nothing (a replay that computed differently could not leak into training).
The copies are taken into buffers kept from step to step (one multi-tensor copy, no
allocation: allocating them afresh at every step was half of what tracing a 6-layer MLP's
step cost), and the parameters are tested by one multi-tensor pass.
"""

from __future__ import annotations

import weakref

import torch

from gradviz.core.common.diagnostics import finite_in_place, finiteness_sum
from gradviz.core.common.kept_copies import KeptCopies

#: optimizer -> the buffers its checkpoints are copied into, step after step.
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: Parameters, gradients and state up to this many bytes are copied before a step (more is
#: traced as it runs: a copy of a large model's state each step would cost its memory again).
COPY_LIMIT_BYTES = 64 << 20


class StepCheckpoint:
    """The values ``optimizer.step()`` changes, as they were before it."""

    def __init__(self, optimizer: torch.optim.Optimizer, params: list[torch.Tensor]) -> None:
        self.optimizer = optimizer
        self.params = params
        # Values, gradients and the state's tensors laid out in one list, copied at once
        # into the optimizer's kept buffers (valid until its next checkpoint).
        states = [(p, optimizer.state[p]) for p in params if p in optimizer.state]
        keys = [(p, k) for p, st in states for k, v in st.items() if isinstance(v, torch.Tensor)]
        tensors = [*params, *(p.grad for p in params), *(optimizer.state[p][k] for p, k in keys)]
        kept = _KEPT.get(optimizer)
        if kept is None:
            kept = _KEPT[optimizer] = KeptCopies()
        copies = kept.take(tensors)
        n = len(params)
        self._values, self._grads = copies[:n], copies[n : 2 * n]
        self._state = {p: dict(st) for p, st in states}  # (numbers as they are)
        for (p, k), copy in zip(keys, copies[2 * n :]):
            self._state[p][k] = copy

    @classmethod
    def take(cls, optimizer: torch.optim.Optimizer) -> StepCheckpoint | None:
        """A checkpoint, or None where the step cannot be replayed as it was called (no
        unhooked step to call) or the copies would exceed COPY_LIMIT_BYTES."""
        if getattr(type(optimizer).step, "__wrapped__", None) is None:
            return None
        params = [p for group in optimizer.param_groups for p in group["params"]]
        size = 0
        for p in params:
            size += 2 * p.nbytes  # the value and its gradient
            state = optimizer.state.get(p, {})
            size += sum(v.nbytes for v in state.values() if isinstance(v, torch.Tensor))
        if size > COPY_LIMIT_BYTES:
            return None
        return cls(optimizer, params)

    def went_nonfinite(self) -> bool:
        """Whether a parameter holds a NaN or Inf now (one read for all of them)."""
        if not self.params:
            return False
        with torch.no_grad():
            finite = finite_in_place([p.detach() for p in self.params])
            if finite is not None:
                return not finite
            sums = torch.stack([finiteness_sum(p.detach()) for p in self.params])
            return not bool(torch.isfinite(sums).all())

    def replay(self, trace_step) -> None:
        """Run the step again from the copies under ``trace_step`` (a context in which the
        tracer sees operations), then leave every value as the first run left it."""
        optimizer = self.optimizer
        after_values, after_grads = _copies(self.params)
        after_state = {p: optimizer.state[p] for p in self.params if p in optimizer.state}
        self._put(self._values, self._grads)
        for p in self.params:  # fresh copies: the replay must not write over the saved ones
            if p in self._state:
                optimizer.state[p] = _copied(self._state[p])
            else:
                optimizer.state.pop(p, None)
        try:
            with trace_step():
                type(optimizer).step.__wrapped__(optimizer)
        finally:
            self._put(after_values, after_grads)
            for p in self.params:
                if p in after_state:
                    optimizer.state[p] = after_state[p]
                else:
                    optimizer.state.pop(p, None)

    def _put(self, values: list, grads: list) -> None:
        with torch.no_grad():
            for p, value, grad in zip(self.params, values, grads, strict=True):
                p.copy_(value)
                if grad is None:
                    p.grad = None
                elif p.grad is not None and p.grad.shape == grad.shape:
                    p.grad.copy_(grad)
                else:
                    p.grad = grad.clone()


def _copies(params: list[torch.Tensor]) -> tuple[list, list]:
    """Copies of the parameters' values and of their gradients (None where there is none)."""
    with torch.no_grad():
        values = [p.detach().clone() for p in params]
        grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
    return values, grads


def _copied(state: dict) -> dict:
    return {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in state.items()}
