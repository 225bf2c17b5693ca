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
import weakref

import torch
from torch import nn

from gradviz.core.common.diagnostics import finiteness_sum
from gradviz.core.common.kept_copies import KeptCopies
from gradviz.core.common.module_calls import note_each_call
from gradviz.core.origin.boundaries import (
    CONTAINERS,
    CallNote,
    Tokens,
    origin_of,
    parameter_gradient,
)

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


class ModuleOrigin:
    """Per-step finiteness of module outputs and output gradients of ``model``.

    ``step_end()`` (after ``backward()``) returns the step's module-level origin as
    ``{"phase", "module", "op", "cause"}`` (``op`` None: a module, not an operation, is
    known) or None, and forgets the step; with ``read=False`` or ``suspect=False`` (the
    step's gradients and loss are known finite) it only forgets.
    """

    def __init__(self, model: nn.Module, *, lazy: bool = True, read_biases: bool = True) -> None:
        self._names = {id(m): name for name, m in model.named_modules()}
        # Not where gradients are averaged over processes before they are read (a bias's
        # gradient would then hold the other ranks' too; an output's stays this rank's).
        self._biases = {}
        if read_biases:
            self._biases = {id(m): b for m in model.modules() if (b := output_bias(m)) is not None}
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
        # read only on suspicion, in the backward's order (see ``_retained_entries``).
        self._retained: list[tuple[str, torch.Tensor, int | None]] = []
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

    def remove(self) -> None:
        self._arm_trigger(None)
        for handle in self._handles + self._leaf_handles:
            handle.remove()
        self._handles, self._leaf_handles = [], []
        self.armed = False
        self._end_entries(read=False)  # hooks on a graph still alive add nowhere now

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

    def _bias_for(self, key: int) -> nn.Parameter | None:
        """The bias to read this call's output gradient from, or None: only a module's first
        call of the step (a later one's output node comes later in the backward, so its own
        gradient, kept exactly, is read before the bias's sum), and only while the bias is
        trained and still of a wide dtype (a model cast to float16 after ``watch``)."""
        bias = self._biases.get(key)
        if bias is None or key in self._biased or not bias.requires_grad:
            return None
        return bias if bias.dtype in _WIDE else None

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
        by_bias = _bias_entries(by_bias, bias_copy if flat is None else _split(*flat))
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


def _split(flat: torch.Tensor, biases: list[nn.Parameter]) -> dict[int, torch.Tensor]:
    """{id(bias): its part of ``flat``, in its shape}: the biases' gradients laid end to end."""
    parts, start = {}, 0
    for bias in biases:
        parts[id(bias)] = flat[start : start + bias.numel()].view(bias.shape)
        start += bias.numel()
    return parts


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


def _bias_entries(by_bias: list, copy: dict[int, torch.Tensor] | None) -> list:
    """The gradients reaching outputs, as their biases' gradients (see ``output_bias``) as
    the backward left them (``copy``); where no backward asked for the copy, as they are
    now. Finite entries stay in the list: they place the others' producers."""
    taken = []
    for name, bias, order, out in by_bias:
        grad = bias.grad if copy is None else copy.get(id(bias))
        if grad is not None and grad.numel():
            taken.append(("backward", name, grad, True, order, out))
    return taken


#: Autograd's sequence counter on this thread (the number its next node will get), or None
#: on a torch without it (the node's own number is read then).
_SEQUENCE_NR = getattr(torch._C._autograd, "_get_sequence_nr", lambda: None)


def _in_backward_order(entries: list) -> list:
    """The forward's entries as they came, then the gradients in the order the backward
    made them: by decreasing sequence number of their autograd nodes, which is the order
    autograd's engine runs the nodes of a graph in (a node runs after every node created
    after it that uses its output). A leaf's gradient (no node) comes last."""
    ahead = [e for e in entries if e[0] != "backward"]
    grads = [e for e in entries if e[0] == "backward"]
    grads.sort(key=lambda e: 1 if e[4] is None else -e[4])
    return ahead + grads


def _small(output) -> bool:
    """Whether a module's output (not a tensor) is a tuple of tensors of up to
    ``KEEP_NUMEL`` entries and Nones (attention's output and its weights, if asked for)."""
    return type(output) is tuple and all(
        t is None or (type(t) is torch.Tensor and t.numel() <= KEEP_NUMEL) for t in output
    )


def _floating(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 0
