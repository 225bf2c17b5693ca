"""The gradient reaching a biased layer's output, read from its bias's gradient.

For a layer whose bias enters its output by one addition (Linear, convolutions, the
normalisations, attention's output projection) the bias's gradient is the sum of the gradient
reaching the output over all but the feature dimension, so one is non-finite exactly where the
other is (NaN and Inf survive a sum; float16 is left out, where a sum of finite values
overflows soon): nothing is added to the backward's nodes for such an output. As the backward
ends (asked for by a bias's gradient hook, registered once) the biases' gradients are copied,
laid end to end by one operation, for a read on suspicion.

``BiasReads`` is this part of ``modules.ModuleOrigin`` (a base class of its notes).
"""

from __future__ import annotations

import torch
from torch import nn

from gradviz.core.common.kept_copies import KeptCopies

#: Layers (these exact classes: a subclass may use its bias otherwise) whose output is
#: ``something + bias`` along the feature dimension.
_BIAS_ADDED = (
    nn.Linear,
    nn.modules.linear.NonDynamicallyQuantizableLinear,
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
    nn.LayerNorm,
    nn.GroupNorm,
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
)
#: Dtypes in which a sum of finite gradients stays finite in practice (float32's range).
_WIDE = (torch.float32, torch.float64, torch.bfloat16)


def output_bias(module: nn.Module) -> nn.Parameter | None:
    """The parameter whose gradient is the sum of the gradient reaching ``module``'s (first)
    output over all but its feature dimension, or None."""
    kind = type(module)
    if kind is nn.MultiheadAttention:
        bias = module.out_proj.bias  # its output is out_proj's, computed inline
    elif kind in _BIAS_ADDED:
        bias = module.bias
    else:
        return None
    return bias if isinstance(bias, nn.Parameter) and bias.dtype in _WIDE else None


class BiasReads:
    """The biases' side of ``ModuleOrigin``'s notes: which bias stands for a call's output
    gradient, and the copy of their gradients as the backward ends (a base class of
    ``module_notes.ModuleNotes``, which notes the outputs read this way)."""

    def _init_bias_reads(self, model: nn.Module, read_biases: bool) -> None:
        """The biases to read output gradients from, and the per-step state of their reads."""
        # Not where gradients are averaged over processes before they are read (a bias's
        # gradient would then hold the other ranks' too; an output's stays this rank's).
        self._biases = {}
        if read_biases:
            self._biases = {id(m): b for m in model.modules() if (b := output_bias(m)) is not None}
        # (module, bias, order of the output's node, id of the output): the gradient reaching
        # the output is read from the bias's (``output_bias``), for a module's first call.
        self._by_bias: list[tuple[str, nn.Parameter, int]] = []
        self._biased: set[int] = set()
        # The biases' gradients as the backward left them (gradient clipping, or a user's
        # code, may change ``.grad`` in place before ``rec.log``): copied as it ends, laid
        # end to end (``_bias_flat``: the copy and the biases), or where they cannot be, one
        # by one ({id(bias): copy}).
        self._bias_flat: tuple[torch.Tensor, list[nn.Parameter]] | None = None
        self._bias_copy: dict[int, torch.Tensor] | None = None
        self._bias_copies = KeptCopies()  # buffers kept from step to step: no allocation
        # The copy is asked for by one bias's gradient hook, registered once (a hook on
        # each step's graph costs tens of microseconds a step); where that bias got no
        # gradient in a step that used others (``_copied`` still False), one of theirs.
        self._trigger = None
        self._copied = False
        self._arm_trigger(next((b for b in self._biases.values() if b.requires_grad), None))

    def _bias_for(self, key: int) -> nn.Parameter | None:
        """The bias to read this call's output gradient from, or None: only a module's first
        call of the step (a later one's output node comes later in the backward, so its own
        gradient, kept exactly, is read before the bias's sum), and only while the bias is
        trained and still of a wide dtype (a model cast to float16 after ``watch``)."""
        bias = self._biases.get(key)
        if bias is None or key in self._biased or not bias.requires_grad:
            return None
        return bias if bias.dtype in _WIDE else None

    def _arm_trigger(self, bias: nn.Parameter | None) -> None:
        """Let ``bias``'s gradient (once accumulated) ask for the biases' copy (None: none)."""
        if self._trigger is not None:
            self._trigger.remove()
        self._trigger = None
        if bias is not None:
            self._trigger = bias.register_post_accumulate_grad_hook(self._queue_bias_copy)

    def _queue_bias_copy(self, _bias) -> None:
        # One Python call a backward instead of one a bias: the copy is made as it ends.
        torch.autograd.Variable._execution_engine.queue_callback(self._copy_bias_grads)

    def _copy_bias_grads(self) -> None:
        """The biases' gradients as the backward leaves them, copied for a read on
        suspicion: laid end to end by one operation (between a model's operations each
        costs some ten microseconds, whatever its size), else one by one."""
        self._copied = True
        pairs = [(b, g) for _, b, _, _ in self._by_bias if (g := b.grad) is not None]
        if not pairs:  # a graph kept from an ended step, run again: no step to add to
            return
        grads = [g for _, g in pairs]
        try:
            flat = torch.cat(grads)
        except RuntimeError:  # not laid end to end (devices, a bias of more than one dimension)
            flat = None
        if flat is not None:
            # A gradient made with ``create_graph=True`` (all of this backward's are, then):
            # the copy must not keep its graph.
            self._bias_flat = (flat.detach() if flat.requires_grad else flat, [b for b, _ in pairs])
            return
        copies = self._bias_copies.take(grads)
        self._bias_copy = {id(b): copy for (b, _), copy in zip(pairs, copies)}


def split_biases(flat: torch.Tensor, biases: list[nn.Parameter]) -> dict[int, torch.Tensor]:
    """{id(bias): its part of ``flat``, in its shape}: the biases' gradients laid end to end."""
    parts, start = {}, 0
    for bias in biases:
        parts[id(bias)] = flat[start : start + bias.numel()].view(bias.shape)
        start += bias.numel()
    return parts


def bias_entries(by_bias: list, copy: dict[int, torch.Tensor] | None) -> list:
    """The gradients reaching outputs, as their biases' gradients (see ``output_bias``) as
    the backward left them (``copy``); where no backward asked for the copy, as they are
    now. Finite entries stay in the list: they place the others' producers."""
    taken = []
    for name, bias, order, out in by_bias:
        grad = bias.grad if copy is None else copy.get(id(bias))
        if grad is not None and grad.numel():
            taken.append(("backward", name, grad, True, order, out))
    return taken
