"""The notes ``gradviz.watch``'s module-level origin takes during a step's forward and
backward (see ``modules`` for what they are and what they cost).

``ModuleNotes`` registers a note on each call of the watched model's computing submodules
and of the model itself, keeps or sums their outputs and the gradients reaching them, and
hands the step's entries to ``modules.ModuleOrigin``, which names the origin from them.
Its hooks are the hot path: each is one bound method, with nothing between it and its work.
"""

from __future__ import annotations

import weakref

import torch
from torch import nn

from gradviz.core.common.diagnostics import finiteness_sum
from gradviz.core.common.module_calls import note_each_call
from gradviz.core.origin.bias_reads import BiasReads
from gradviz.core.origin.boundaries import CONTAINERS, CallNote, Tokens

#: Modules that only select, move or zero values (no NaN or Inf of their own making) and
#: containers: not noted, because a note costs every call of a module microseconds.
_PASSIVE = (
    nn.Sequential,
    nn.ModuleList,
    nn.ModuleDict,
    nn.Identity,
    nn.Flatten,
    nn.Unflatten,
    nn.ReLU,
    nn.modules.dropout._DropoutNd,
    nn.modules.pooling._MaxPoolNd,
    nn.modules.pooling._AdaptiveMaxPoolNd,
)


#: Marks a passive module's call among a lazy forward's notes.
_PASSED = object()

#: Tensors up to this many entries are kept through the step (lazy mode), larger ones summed.
KEEP_NUMEL = 1 << 15


class ModuleNotes(BiasReads):
    """The forward's and the backward's notes of ``model``'s modules for one step at a time
    (``_entries``, ``_calls``, and what the biases and ``retain_grad`` keep)."""

    def __init__(self, model: nn.Module, *, lazy: bool = True, read_biases: bool = True) -> None:
        self._names = {id(m): name for name, m in model.named_modules()}
        self._lazy = lazy
        #: Read at every forward: False between the recorded steps of an accelerator.
        self.armed = True
        # (phase, module, tensor or its sum, kept, order, info) in execution order; from
        # ``_summed`` on, entries may hold a kept tensor (``kept`` True) rather than its sum;
        # ``order`` is a gradient's node's sequence number (None for the forward); ``info``
        # the call (a ``CallNote``) for the forward, the id of the output whose gradient it
        # is for the backward.
        self._entries: list[tuple] = []
        #: Every noted call of the step, in the order they returned (a container returning
        #: its child's output has its call here, though not its output among the entries).
        self._calls: list[CallNote] = []
        self._tokens = Tokens()  # the noted outputs' numbers (see ``boundaries.Tokens``)
        self._summed = 0
        # The output noted last: held where it is kept anyway (``_last_output``), else by a
        # weak reference (``_last_summed``): holding a large output past the operation that
        # consumed it (a convolution's, before its ReLU) kept megabytes the allocator then
        # freed and faulted in again, measured 2-3% of a CNN's step.
        self._last_output: torch.Tensor | None = None
        self._last_summed: weakref.ref | None = None
        # (module, output) whose gradient autograd keeps for this step (``retain_grad``):
        # read only on suspicion, in the backward's order (see ``modules._retained_entries``).
        self._retained: list[tuple[str, torch.Tensor, int | None]] = []
        self._init_bias_reads(model, read_biases)
        self._leaf_handles: list = []  # hooks on leaf outputs (they outlive the step)
        noted = [m for m in model.modules() if m is not model and not isinstance(m, _PASSIVE)]
        self._handles = note_each_call(model, self._on_root_output, self._on_root_input)
        for m in noted:
            self._handles += note_each_call(m, self._on_output)
        # A passive module's output stands for its input where a later module takes it (the
        # module boundaries then see who took a value across a ReLU or a Flatten).
        for m in model.modules():
            if isinstance(m, _PASSIVE) and not isinstance(m, CONTAINERS) and m is not model:
                self._handles += note_each_call(m, self._on_passive)
        # A lazy forward's outputs (module, output, autograd's sequence counter, the call's
        # arguments), noted as the modules return and looked at as the forward ends
        # (``_take_notes``); None outside the model's forward.
        self._notes: list[tuple] | None = None
        # Beyond a forward and a backward's worth of entries (submodules called one by
        # one, outside the root, again and again) the older ones are summed: counted from
        # the modules noted, not from how they are noted (a wrapper or two hooks).
        self._limit = 4 * (len(noted) + 2) + 16

    def _on_root_input(self, _module, args) -> None:
        self._notes = None  # a forward that raised before its end: its notes are dropped
        if not (self.armed and torch.is_grad_enabled()):
            return  # an evaluation under no_grad: no gradient will come of it
        if len(self._entries) > self._summed:
            self._sum_kept()  # a forward before this one in the same step: keep its sums
        for a in args:
            if _floating(a):
                self._add("input", "", a)
        if self._lazy:
            self._notes = []

    def _on_output(self, module, args, output) -> None:
        # Runs for every computing module at every step, between operations that leave the
        # interpreter's caches cold: a lazy forward's small output is only noted here (a
        # few attribute reads), and looked at in one loop as the forward ends. A large one
        # is looked at now (and summed: it is not held through the forward).
        notes = self._notes
        if notes is not None and (
            output.numel() <= KEEP_NUMEL if type(output) is torch.Tensor else _small(output)
        ):
            notes.append((module, output, _SEQUENCE_NR(), args))
            return
        if notes:
            self._take_notes()  # the outputs before this one, in their order
        self._note_now(module, args, output)

    def _on_passive(self, module, args, output) -> None:
        if type(output) is not torch.Tensor or not args or type(args[0]) is not torch.Tensor:
            return
        notes = self._notes
        if notes is not None:
            notes.append((module, output, _PASSED, args))
        elif self.armed and torch.is_grad_enabled():
            self._tokens.alias(output, args[0])

    def _on_root_output(self, module, args, output) -> None:
        self._on_output(module, args, output)
        if self._notes:
            self._take_notes()
        self._notes = None

    def _take_notes(self) -> None:
        """Look at the outputs noted so far in this forward, in the order they came (before
        the backward: what it must keep is asked for now)."""
        notes, self._notes = self._notes, []
        biased, names = self._biased, self._names
        entries, by_bias, last = self._entries, self._by_bias, self._last_output
        calls = self._calls
        for module, output, after, args in notes:
            if after is _PASSED:
                self._tokens.alias(output, args[0])
                continue
            # The counter was read after the module's operations: its last node is one less.
            order = None if after is None else after - 1
            call = CallNote(module, names[id(module)], args, output, KEEP_NUMEL, self._tokens)
            calls.append(call)
            for t in (output,) if type(output) is torch.Tensor else output:
                if t is None or t is last:
                    continue
                key = id(module)
                # The common case, inline (``_note_output``'s, without its calls): a biased
                # layer's output, kept, its gradient read from the bias.
                bias = self._bias_for(key) if order is not None and t.requires_grad else None
                if bias is not None and t.is_floating_point():
                    biased.add(key)
                    name = names[key]
                    by_bias.append((name, bias, order, self._tokens.of(t)))
                    entries.append(("forward", name, t, True, None, call))
                    last = t
                    continue
                self._last_output = last
                self._note_output(module, t, call, order)
                last = self._last_output
        self._last_output = last
        if notes:
            self._last_summed = None  # a small output came after it
        if len(entries) - self._summed > self._limit:
            self._sum_kept()

    def _note_now(self, module, args, output) -> None:
        """Note ``output`` (a tensor, or the tensors of a tuple or list) at once."""
        if not (self.armed and torch.is_grad_enabled()):
            return
        name = self._names.get(id(module), type(module).__name__)
        call = CallNote(module, name, args, output, KEEP_NUMEL if self._lazy else 0, self._tokens)
        self._calls.append(call)
        if isinstance(output, torch.Tensor):
            if not self._is_last(output):
                self._note_output(module, output, call)
        elif isinstance(output, (tuple, list)):
            for t in output:
                if isinstance(t, torch.Tensor) and not self._is_last(t):
                    self._note_output(module, t, call)

    def _is_last(self, t: torch.Tensor) -> bool:
        """Whether ``t`` is the output noted last (a container returning its child's)."""
        summed = self._last_summed
        return t is self._last_output or (summed is not None and summed() is t)

    def _note_output(
        self, module, t: torch.Tensor, call: CallNote, order: int | None = None
    ) -> None:
        """Note ``t`` from ``module``'s forward and watch the gradient that will reach it.
        A container returning its last child's output: that tensor is noted once, under the
        innermost module that made it (``_last_output``). ``order``: the place in the
        backward's order of the node that made ``t``, read as the module returned (an
        in-place operation applied to ``t`` later gives ``t`` a later node), else ``t``'s
        node's."""
        if not t.is_floating_point():
            return
        numel = t.numel()
        if not numel:
            return
        key = id(module)
        name = self._names.get(key, type(module).__name__)
        if self._lazy and numel <= KEEP_NUMEL:  # kept for the step: held anyway
            self._last_output, self._last_summed = t, None
        else:
            self._last_output, self._last_summed = None, weakref.ref(t)
        if not t.requires_grad:
            self._add("forward", name, t, info=call)
            return
        node = t.grad_fn
        if node is not None and (bias := self._bias_for(key)) is not None:
            self._biased.add(key)
            self._note_by_bias(name, t, bias, node, order, call)
            return
        if node is not None and self._lazy and numel <= KEEP_NUMEL and not t.retains_grad:
            # Autograd keeps this gradient (``.grad`` of the output, by its C++ hook: no
            # Python call in the backward, about half of what a pre-hook costs per module).
            # The output itself is kept as it is, not detached: ``_retained`` holds it (and
            # its node) until the step ends anyway.
            t.retain_grad()
            self._retained.append((name, t, self._tokens.of(t)))
            self._keep("forward", name, t, info=call)
            return
        self._add("forward", name, t, info=call)
        self._watch_gradient(name, t, node)

    def _note_by_bias(
        self, name: str, t: torch.Tensor, bias: nn.Parameter, node, order: int | None, call
    ) -> None:
        """Note ``t`` and read the gradient that will reach it from ``bias``'s (copied
        when the backward ends)."""
        order = node._sequence_nr() if order is None else order
        self._by_bias.append((name, bias, order, self._tokens.of(t)))
        if self._lazy and t.numel() <= KEEP_NUMEL:
            # Not detached (a microsecond a module): the backward frees its graph's tensors,
            # and a forward never backpropagated is summed at the next.
            self._keep("forward", name, t, info=call)
        else:
            self._add("forward", name, t, info=call)

    def _watch_gradient(self, name: str, t: torch.Tensor, node) -> None:
        """Note the gradient reaching ``t`` (a large output, or one whose gradient is kept
        already) when its autograd node runs: a pre-hook on the node (no Python handle
        object per tensor, and it dies with the graph)."""
        entries, out = self._entries, self._tokens.of(t)
        if node is None:  # a leaf returned as it is (a parameter): a tensor hook, removed later
            hook = t.register_hook(lambda g: self._on_gradient(entries, name, g, None, out))
            self._leaf_handles.append(hook)
            return
        nr, order = t.output_nr, node._sequence_nr()
        node.register_prehook(lambda grads: self._on_gradient(entries, name, grads[nr], order, out))

    def _on_gradient(
        self, entries: list, name: str, grad, order: int | None = None, out: int | None = None
    ) -> None:
        # ``entries is self._entries``: a graph kept from an earlier step (retain_graph) and
        # run again must not add to this one.
        if entries is self._entries and _floating(grad):
            self._add("backward", name, grad, order, out)

    def _add(
        self, phase: str, name: str, t: torch.Tensor, order: int | None = None, info=None
    ) -> None:
        # Detached: a kept output must not keep the autograd graph (and its activations)
        # alive; a sum of a detached tensor records no graph. ``order``: a gradient's node's
        # sequence number (the backward runs nodes in decreasing order of it). Lazily, the
        # model's inputs are kept whatever their size: the caller holds its batch anyway.
        t = t.detach() if t.requires_grad else t
        if not (self._lazy and (phase == "input" or t.numel() <= KEEP_NUMEL)):
            self._entries.append((phase, name, finiteness_sum(t), False, order, info))
            return
        self._keep(phase, name, t, order, info)

    def _keep(
        self, phase: str, name: str, t: torch.Tensor, order: int | None = None, info=None
    ) -> None:
        """Keep ``t`` itself until the step ends (tested only on suspicion)."""
        self._entries.append((phase, name, t, True, order, info))
        if len(self._entries) - self._summed > self._limit:
            self._sum_kept()

    def _sum_kept(self) -> None:
        """Replace the kept tensors by their sums (device-side, no read)."""
        entries = self._entries
        for k in range(self._summed, len(entries)):
            phase, name, t, kept, order, info = entries[k]
            if kept:
                entries[k] = (phase, name, finiteness_sum(t.detach()), False, order, info)
        self._summed = len(entries)
        self._last_output = self._last_summed = None


#: Autograd's sequence counter on this thread (the number its next node will get), or None
#: on a torch without it (the node's own number is read then).
_SEQUENCE_NR = getattr(torch._C._autograd, "_get_sequence_nr", lambda: None)


def _small(output) -> bool:
    """Whether a module's output (not a tensor) is a tuple of tensors of up to
    ``KEEP_NUMEL`` entries and Nones (attention's output and its weights, if asked for)."""
    return type(output) is tuple and all(
        t is None or (type(t) is torch.Tensor and t.numel() <= KEEP_NUMEL) for t in output
    )


def _floating(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 0
