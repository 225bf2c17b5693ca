"""``trace_nonfinite``: watch every floating result of every aten operation of a block
(forward, backward and optimizer step) and name where the first non-finite value started.

A ``TorchDispatchMode`` sees each operation below autograd, so the backward's operations
are seen too while ``.backward()`` runs inside the block. It never changes a value and
never raises: a result is tested with one sum (a NaN or Inf anywhere makes it non-finite)
and searched entry by entry only on suspicion. Non-finite values are followed by their
storage, so a NaN made later is traced back to the Inf that started it.

Which value is the origin: the first chain of non-finite values, in the order they
started, whose values still live when the origin is asked for (one that every tensor
dropped or made finite again was masked away and started nothing). A chain starts

- at an operation that made NaN or Inf from finite values (or a NaN from infinities
  written on purpose), or at an input it came in with (phase "input");
- not again in the backward of a forward operation whose output was already non-finite:
  ``log(0) = -Inf`` in the forward whose backward then divides by that 0 is one chain,
  started in the forward, even where NaN is first seen in the backward;
- never at infinities written on purpose (``masked_fill(mask, -inf)``, ``torch.full(...,
  inf)``, a -Inf-only mask made before the trace that meets a masking operation): a clean
  transformer with masked attention reports None, a softmax over a fully masked row
  reports the softmax.

Where an Inf became NaN later, the first operation that did so is told as how it spread.
"""

from __future__ import annotations

import contextlib
import math
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _disable_current_modes,
    _get_current_dispatch_mode,
    _pop_mode,
    _pop_mode_temporarily,
    _push_mode,
)
from torch.utils._pytree import tree_flatten

from gradviz.core.origin import inspect_values as V
from gradviz.core.origin.causes import saved_at
from gradviz.core.origin.chains import Chain, ChainMap, input_chain, origin_of
from gradviz.core.origin.optimizer_replay import StepCheckpoint
from gradviz.core.origin.plans import (
    PASS_THROUGH,
    UNPLANNED,
    plan_of,
    results_of,
    whole_storage,
)
from gradviz.core.origin.provenance import ModuleTracker, NodeMap, user_source
from gradviz.core.origin.result import Event, Origin

#: Events kept after the origin (how it spread).
MAX_EVENTS = 8
#: Non-finite entries listed per event.
MAX_INDICES = 4
#: Chains remembered per trace (interval).
MAX_CHAINS = 256
#: Operations that mask with a -Inf tensor given to them (an attention mask): such a
#: tensor from outside the trace is taken as written on purpose (see ``_input_chain``).
MASKING = frozenset(
    {
        "add",
        "add_",
        "sub",
        "where",
        "masked_fill",
        "masked_fill_",
        "_softmax",
        "_log_softmax",
        "_masked_softmax",
        "baddbmm",
        "minimum",
        "maximum",
        "clamp",
        "clamp_max",
        "scaled_dot_product_attention",
        "_scaled_dot_product_attention_math",
        "_scaled_dot_product_flash_attention_for_cpu",
    }
)

#: id(operation) -> ``plan_of(operation)``, for the process: operations live as long, and a
#: trace per training step (``with trace_nonfinite()`` around each) would plan them again.
_PLANS: dict[int, object] = {}

_current_node = torch._C._current_autograd_node


class NonfiniteTracer(TorchDispatchMode):
    """The dispatch mode behind ``trace_nonfinite``; ``origin`` and ``events`` after it."""

    def __init__(self, max_events: int = MAX_EVENTS, skip_gradviz: bool = True) -> None:
        super().__init__()
        self.max_events = max_events
        self.skip_gradviz = skip_gradviz
        self.modules = ModuleTracker()
        self.nodes = NodeMap()
        self._plans = _PLANS  # (an attribute: read at every operation)
        self._chains = ChainMap()  # storage, or a forward operation's node -> its chain
        self._made: list[Chain] = []  # chains started by computed values or inputs, in order
        self._nans: list[tuple[Chain, Chain]] = []  # (an op that made NaN, its chain's start)
        self._forward_seen = False  # a forward operation ran since the last reset
        #: the chain the last ``origin`` chose (None: none)
        self._chosen: Chain | None = None
        self._optimizer = 0
        self._parameters: set[int] = set()  # ids of the tensors optimizers update
        self._thread = threading.get_ident()
        self._optimizer_hooks: list = []
        self._done = False
        #: (the StepCheckpoint, the context that took the mode off the stack) while an
        #: optimizer's step runs untraced
        self._untraced_step: tuple | None = None

    def reset(self) -> None:
        """Forget what was seen (the mode stays armed): the next interval starts afresh."""
        self._chains.clear()
        self._made, self._nans = [], []
        self._done = self._forward_seen = False
        self._chosen = None
        self.nodes.clear()

    # ---- arming ---------------------------------------------------------------------------------
    def __enter__(self):
        self._thread = threading.get_ident()
        self.modules.install()
        self._optimizer_hooks = [
            register_optimizer_step_pre_hook(self._on_optimizer_pre),
            register_optimizer_step_post_hook(self._on_optimizer_post),
        ]
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            self._resume()  # an optimizer's step that raised left the mode off the stack
            return super().__exit__(*exc)
        finally:
            self.modules.remove()
            for handle in self._optimizer_hooks:
                handle.remove()
            self._optimizer_hooks = []
            self._optimizer = 0

    # ---- optimizer steps: untraced while nothing is wrong, replayed where one went wrong ----
    def _on_optimizer_pre(self, optimizer, args, kwargs) -> None:
        if threading.get_ident() != self._thread:  # the hooks are global: this thread only
            return
        self._optimizer += 1
        self._parameters.update(id(p) for g in optimizer.param_groups for p in g["params"])
        if self._optimizer == 1 and self._can_step_untraced(optimizer, args, kwargs):
            try:
                with _disable_current_modes():  # copying is not the user's work
                    checkpoint = StepCheckpoint.take(optimizer)
            except Exception:  # noqa: BLE001 never raise into the user's step: trace it as it runs
                checkpoint = None
            if checkpoint is not None:
                self._untraced_step = (checkpoint, _pop_mode_temporarily())
                self._untraced_step[1].__enter__()

    def _can_step_untraced(self, optimizer, args, kwargs) -> bool:
        """Only a step of finite values (no chain to carry through it), called without a
        closure (a replay must not run the forward again), with this mode innermost."""
        return (
            not self._chains
            and not self._done
            and len(args) == 1
            and not kwargs
            and _get_current_dispatch_mode() is self
        )

    def _on_optimizer_post(self, optimizer, *_args) -> None:
        if threading.get_ident() != self._thread:
            return
        try:
            checkpoint = self._untraced_step[0] if self._untraced_step else None
            # Still off the stack: the test, the copies and the puts back are not traced,
            # only the replayed step itself.
            mine = checkpoint is not None and checkpoint.optimizer is optimizer
            if mine and checkpoint.went_nonfinite():
                checkpoint.replay(self._traced)
        except Exception:  # noqa: S110 never raise into the user's step
            pass
        finally:
            self._resume()
            self._optimizer = max(0, self._optimizer - 1)

    @contextlib.contextmanager
    def _traced(self):
        """The mode on the stack again for the length of the block (a replayed step)."""
        _push_mode(self)
        try:
            yield
        finally:
            _pop_mode()

    def _resume(self) -> None:
        """Put the mode back on the stack after an untraced optimizer step."""
        if self._untraced_step is not None:
            _, popped = self._untraced_step
            self._untraced_step = None
            popped.__exit__(None, None, None)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in a dynamo-disabling wrapper by default,
        # which costs microseconds per operation (a third of the tracer's cost on a
        # transformer step); the tracer runs eagerly, so it does without.
        return False

    # ---- every operation ------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        node = _current_node()
        forward = node is None and not self._optimizer
        if forward:
            number = self.nodes.changed()
            if number is not None:  # a forward op that made an autograd node: remember where
                self.nodes.remember(number, self.modules.place(self.skip_gradviz))
        out = func(*args, **kwargs)
        if forward and not self._forward_seen and type(out) is torch.Tensor:
            self._forward_seen = True  # (not a profiler's record, which opt.step() opens with)
        if self._done:
            return out
        plan = self._plans.get(id(func), UNPLANNED)  # ids: operations live for the process
        if plan is UNPLANNED:
            plan = self._plans[id(func)] = plan_of(func)
        if plan is None:  # a view: it carries whatever its base carries (x.grad is a detach)
            if self._chains and type(out) is torch.Tensor:
                chain = self._chains.of(out)
                if chain is not None:
                    chain.carry(out)
            return out
        if plan is PASS_THROUGH:  # cannot make a non-finite value from finite ones
            if self._chains and type(out) is torch.Tensor:
                self._carry_through(args, out)
            return out
        if self._optimizer and not self._chains and not self._writes_parameter(args, plan[1]):
            return out  # the optimizer's state: its overflow shows in the parameter it updates
        try:
            results = (
                (out,) if type(out) is torch.Tensor and not plan[1] else results_of(out, args, plan)
            )
            for t in results:
                if t.is_floating_point() and t.numel() and not V.looks_finite(t):
                    bad = V.nonfinite_mask(t)
                    if bad is not None:
                        self._on_nonfinite(func, args, kwargs, t, bad, node, plan[1])
                elif plan[1] and self._chains and whole_storage(t):
                    self._chains.drop(t)  # all finite again: carries nothing
        except Exception:  # noqa: S110 never raise into the user's step: this op stays unchecked
            pass
        return out

    def _carry_through(self, args, out: torch.Tensor) -> None:
        """``out`` of a copying operation carries the chain of its first input that has one."""
        for a in args:
            if isinstance(a, torch.Tensor):
                chain = self._chains.of(a)
                if chain is not None:
                    self._chains.set(out, chain)
                    chain.carry(out)
                    return

    def _writes_parameter(self, args, written: tuple[int, ...]) -> bool:
        for i in written:
            target = args[i] if i < len(args) else None
            if isinstance(target, (list, tuple)):
                target = target[0] if target else None
            if id(target) in self._parameters:
                return True
        return False

    # ---- a non-finite result --------------------------------------------------------------------
    def _on_nonfinite(self, func, args, kwargs, out, bad, node, written) -> None:
        phase, module, in_model, source, function = self._where(node)
        flat_inputs = [a for a in tree_flatten((args, kwargs))[0]]
        # Every operand's values at the entries (an integer count divided by is one), the
        # floating ones' non-finite kinds.
        operands = [a for a in flat_inputs if _numeric(a) and a is not out]
        tensors = [a for a in operands if a.is_floating_point()]
        scalars = tuple(float(a) for a in flat_inputs if isinstance(a, float))
        kinds = tuple(V.kinds_of(t) if not V.looks_finite(t) else "" for t in tensors)
        in_bad = [t for t, k in zip(tensors, kinds) if k]
        made_nan = V.has_nan(out)
        new_nan = made_nan and not any("nan" in k for k in kinds)
        if new_nan and in_bad:  # NaN (beside Inf) made from Inf: the NaN entries tell how
            bad = torch.isnan(out)
        kind, count, flat = V.describe(out, bad, MAX_INDICES)
        prior = self._chains.of(out) if written else None
        event = Event(
            phase=phase,
            op=str(func),
            node=None if node is None else node.name(),
            module=module,
            source=source,
            function=function,
            kind=kind,
            count=count,
            numel=out.numel(),
            indices=tuple(V.unravel(flat, out.shape)),
            inputs=tuple(V.values_at(t, out.shape, flat) for t in operands),
            dtype=str(out.dtype).removeprefix("torch."),
            input_kinds=kinds,
            saved=() if node is None or in_bad else saved_at(node, V.unravel(flat, out.shape)),
            in_model=in_model,
        )
        tensor = self.modules.tensor_name(out) or "" if phase == "optimizer" else ""
        here = Chain(event, scalars, node, tensor)
        if phase == "optimizer":
            here.named = weakref.ref(out)
        chains = [self._chains.of(t) for t in in_bad] + [prior]
        start = next((c for c in chains if c is not None), None)
        if start is None and node is not None:
            # The backward of a forward operation whose output was already non-finite
            # (log's at 0, which made -Inf): the same values' doing, not a new start.
            start = self._chains.of_node(node)
        fresh = start is None
        if start is None and in_bad and phase != "optimizer":
            # (an optimizer's state is not followed)
            start = self._input_chain(in_bad[0], event, out if written else None)
        if start is None:  # made here, from finite values (or written on purpose)
            constant = any(not math.isfinite(s) for s in scalars) or not tensors
            here.constant = constant and phase not in ("optimizer", "backward")
            start = here
        elif start.constant and new_nan:
            # Infinities written on purpose start nothing by themselves: the operation that
            # made NaN of them (a softmax over a fully masked row) does.
            start, fresh = here, True
        self._chains.set(out, start)
        start.carry(out)
        if phase == "forward" and _makes_node(flat_inputs):
            self._chains.made_by_running_node(start)
        if fresh and not start.constant and len(self._made) < MAX_CHAINS:
            start.serial = len(self._made)
            start.early = phase == "optimizer" and not self._forward_seen
            self._made.append(start)
        if new_nan and len(self._nans) < MAX_CHAINS:
            self._nans.append((here, start))
        if start.event is not event and len(start.events) < self.max_events:
            start.events.append(event)
        first = self._made[0] if self._made else None
        if first is not None and first.spread and len(first.events) >= self.max_events:
            self._done = True  # the story is told and cannot be undone: the rest runs untouched

    def _input_chain(self, t: torch.Tensor, consumer: Event, into=None) -> Chain:
        """A non-finite tensor no traced operation made: it came in from outside (copied
        ``into`` a tensor, which then names it: a parameter a checkpoint is loaded into).
        One that holds only -Inf, is no parameter and meets an operation that masks with
        it (an attention mask made before the trace) was written on purpose: a constant."""
        chain = input_chain(t, consumer, MAX_INDICES)
        chain.tensor = self.modules.tensor_name(t) or ""
        chain.named = weakref.ref(into if into is not None else t)
        chain.constant = (
            _base(consumer.op) in MASKING
            and not self.modules.is_parameter(t)
            and V.kinds_of(t) == "-inf"
        )
        return chain

    def _where(self, node) -> tuple[str, str, bool, str, str]:
        """(phase, module, in_model, source, function) of the operation running now."""
        if node is not None:
            return ("backward", *self.nodes.lookup(node))
        if self._optimizer:
            return ("optimizer", "", False, *user_source(self.skip_gradviz))
        return ("forward", *self.modules.place(self.skip_gradviz))

    # ---- the answer -----------------------------------------------------------------------------
    @property
    def origin(self) -> Origin | None:
        """Where the first non-finite value that lasted started, or None (see the module
        docstring)."""
        with _disable_current_modes():  # our own checks must not be traced
            return self._origin()

    def _origin(self) -> Origin | None:
        chosen = self._chosen = next((c for c in self._made if c.alive()), None)
        if chosen is None:
            return None
        named = chosen.named() if chosen.named is not None else None  # (its model now known)
        tensor = "" if named is None else self.modules.tensor_name(named) or ""
        return origin_of(chosen, self._nans, chosen.tensor or tensor)

    @property
    def origin_follows_a_logged_step(self) -> bool:
        """Whether the origin last returned was made by an optimizer's step that ran before
        any forward operation since the last ``reset``: the step of the interval before
        (a loop that logs, then steps)."""
        return self._chosen is not None and self._chosen.early


def _makes_node(flat_inputs) -> bool:
    """Whether the forward operation running now makes an autograd node (autograd has
    numbered it before the operation reached this mode)."""
    return torch.is_grad_enabled() and any(
        isinstance(a, torch.Tensor) and a.requires_grad for a in flat_inputs
    )


def _numeric(a) -> bool:
    """A real tensor with entries (floating, integer or bool)."""
    return isinstance(a, torch.Tensor) and a.numel() > 0 and not a.is_complex()


def _base(op: str) -> str:
    """``aten.add.Tensor`` -> ``add``."""
    parts = op.split(".")
    return parts[1] if len(parts) >= 2 else op


class trace_nonfinite:  # noqa: N801 (used as a function: ``with gradviz.trace_nonfinite()``)
    """``with gradviz.trace_nonfinite() as t:`` around any code; then ``t.origin`` (None
    or an Origin) and ``t.events`` (the first few operations after it that made or received
    non-finite values). Never changes a value, never raises; costs a sum per result.
    """

    def __init__(self, max_events: int = MAX_EVENTS, *, skip_gradviz: bool = True) -> None:
        self._mode = NonfiniteTracer(max_events, skip_gradviz)

    def __enter__(self) -> trace_nonfinite:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)

    @property
    def origin(self) -> Origin | None:
        return self._mode.origin

    @property
    def events(self) -> tuple[Event, ...]:
        origin = self.origin
        return origin.events if origin is not None else ()


def find_origin(step: Callable[..., Any], *args, **kwargs) -> Origin | None:
    """Run ``step(*args, **kwargs)`` once under ``trace_nonfinite`` and return the origin
    (for replaying a saved batch and checkpoint). An exception from ``step`` propagates."""
    with trace_nonfinite() as t:
        result = step(*args, **kwargs)
    origin = t.origin  # while ``result`` still holds what the step returned
    del result
    return origin
