"""The module-level origin ``gradviz.watch`` checks at every step, cheaply (or, where the
loop allows it, only on a bad step run again: see ``replay``, which notes that run here).

The watched model's computing submodules (not containers, dropout, pooling and the like)
note their output as their call returns (a wrapped call, or a forward hook: see
``note_each_call``), the root's call its inputs too, and the gradient reaching
each output is noted too. For a layer whose bias enters its output by one addition (Linear,
convolutions, the normalisations, attention's output projection) nothing is added to the
backward's nodes: the bias's gradient is the sum of the gradient reaching the output over
all but the feature dimension, so one is non-finite exactly where the other is (NaN and Inf
survive a sum; float16 is left out, where a sum of finite values overflows soon). As the
backward ends (asked for by a bias's gradient hook, registered once) the biases' gradients
are copied, laid end to end by one operation, for a read on suspicion.
Otherwise, for a small output on the CPU autograd keeps the gradient
(``retain_grad``, a C++ hook that copies it), else a pre-hook on the output's autograd
node notes it as it is made. The gradients are read in the order the backward made them
(decreasing sequence number of their nodes, the order autograd's engine runs them in).
At the end of a step (``rec.log``) the first of them that is not finite names the module:
its forward made the value, or (for a gradient) the backward of the module that consumed
its output. The exact operation is the full tracer's job (``gradviz diagnose``).

What a step costs is the forward notes' Python calls (and, for an output that is not a
biased layer's, its gradient's copy or pre-hook), nothing more, where the step can be judged
afterwards (``lazy``, on the CPU). There a call only notes a small output, with autograd's
sequence counter (its place in the backward's order), and the forward's notes are looked at
in one loop as the model's forward ends: between the model's operations the interpreter's
caches are cold, and each attribute read in a note costs several times what it does in a
loop. Small tensors (up to ``KEEP_NUMEL`` entries, where a sum costs more than the values
it reads) and the model's inputs (its caller holds them through the step anyway) are kept
until the step ends and tested only if the recorder found the step's gradients or loss
non-finite; a large output is summed at once (keeping it would hold memory the allocator
otherwise reuses: measured 10% of a CNN step).
Where reading a verdict would stall the device (an accelerator) each tensor is summed on
the device at once (``lazy=False``) and the sums are read at the recorded steps only;
between them the notes are disarmed (``armed``). Kept tensors never outlive their step,
and a step that runs the model again (two forwards before one backward, gradient
accumulation, a forward with gradients on that is never backpropagated) keeps the earlier
forwards' sums only.
"""

from __future__ import annotations

import math

import torch

from gradviz.core.common.diagnostics import finiteness_sum
from gradviz.core.origin.bias_reads import bias_entries, output_bias, split_biases
from gradviz.core.origin.boundaries import origin_of, parameter_gradient
from gradviz.core.origin.module_notes import KEEP_NUMEL, ModuleNotes

__all__ = ["KEEP_NUMEL", "ModuleOrigin", "output_bias"]


class ModuleOrigin(ModuleNotes):
    """Per-step finiteness of module outputs and output gradients of ``model``.

    ``step_end()`` (after ``backward()``) returns the step's module-level origin as
    ``{"phase", "module", "op", "cause"}`` (``op`` None: a module, not an operation, is
    known) or None, and forgets the step; with ``read=False`` or ``suspect=False`` (the
    step's gradients and loss are known finite) it only forgets. ``remove()`` takes its
    hooks off the model.

    The notes it names the origin from are its base classes' (``module_notes.ModuleNotes``:
    the modules' outputs and gradients; ``bias_reads.BiasReads``: output gradients read from
    biases); here the step ends: its entries are put in the backward's order and read.
    """

    def remove(self) -> None:
        self._arm_trigger(None)
        for handle in self._handles + self._leaf_handles:
            handle.remove()
        self._handles, self._leaf_handles = [], []
        self.armed = False
        self._end_entries(read=False)  # hooks on a graph still alive add nowhere now

    def _end_entries(self, read: bool = True) -> list:
        """This step's entries, in the backward's order where ``read`` (else none: a clean
        step is not looked at); the next step starts afresh (and hooks of this step's graph
        that still fire add nowhere)."""
        entries, retained, by_bias = self._entries, self._retained, self._by_bias
        bias_copy, flat = self._bias_copy, self._bias_flat
        self._entries, self._summed, self._last_output, self._retained = [], 0, None, []
        self._calls = []
        self._tokens.clear()
        self._last_summed = None
        self._by_bias, self._biased, self._bias_copy = [], set(), None
        self._bias_flat, self._notes = None, None
        if by_bias and not self._copied and self._handles:
            self._arm_trigger(by_bias[0][1])  # the trigger's bias got no gradient: one that did
        self._copied = False
        for handle in self._leaf_handles:
            handle.remove()
        self._leaf_handles = []
        if not read:
            return []
        by_bias = bias_entries(by_bias, bias_copy if flat is None else split_biases(*flat))
        return _in_backward_order(entries + _retained_entries(retained) + by_bias)

    def step_end(
        self, read: bool = True, suspect: bool | None = None, grads: list | None = None
    ) -> dict | None:
        """The step's origin, if ``read`` (``boundaries.origin_of``'s verdict: an origin,
        or ``{"unknown": why}``); ``suspect`` False (the step is known clean) skips the
        sums, None (unknown) takes them all. ``grads``: the parameters' gradients as the
        backward made them, ``(name, gradient)`` (a replay's: no user's code between), for
        a NaN made inside a module's backward that reaches its parameters only."""
        calls = self._calls
        entries = self._end_entries(read and suspect is not False)
        try:
            if not entries:
                return None
            device = entries[0][2].device
            wide = torch.float32 if device.type == "mps" else torch.float64
            sums = [(finiteness_sum(t.detach()) if kept else t) for _, _, t, kept, *_ in entries]
            sums = [t.to(device, wide) for t in sums]
            values = torch.stack(sums).tolist()  # one read
            for k, value in enumerate(values):
                if not math.isfinite(value):
                    _, _, t, kept, _, _ = entries[k]
                    if kept:  # the tensor is at hand: exactly (a sum of finite values may overflow)
                        if bool(torch.isfinite(t).all()):
                            continue
                        value = math.nan if bool(torch.isnan(t).any()) else math.inf
                    return origin_of(entries, k, value, calls)
            return parameter_gradient(grads, entries, calls) if grads else None
        finally:
            entries.clear()  # the kept tensors go now, not when the last hook does
            calls.clear()


def _retained_entries(retained: list[tuple[str, torch.Tensor, int | None]]) -> list:
    """The gradients autograd kept on outputs, as backward entries. Their ``.grad`` stays
    on the outputs (a hook of the user's may have asked for it too, as Grad-CAM does) and
    goes with them: nothing here keeps an output past its step."""
    taken = []
    for name, t, out in retained:
        grad = t.grad
        if grad is not None and grad.numel():
            taken.append(("backward", name, grad, True, t.grad_fn._sequence_nr(), out))
    return taken


def _in_backward_order(entries: list) -> list:
    """The forward's entries as they came, then the gradients in the order the backward
    made them: by decreasing sequence number of their autograd nodes, which is the order
    autograd's engine runs the nodes of a graph in (a node runs after every node created
    after it that uses its output). A leaf's gradient (no node) comes last."""
    ahead = [e for e in entries if e[0] != "backward"]
    grads = [e for e in entries if e[0] == "backward"]
    grads.sort(key=lambda e: 1 if e[4] is None else -e[4])
    return ahead + grads
