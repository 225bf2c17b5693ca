"""Chains of non-finite values: where they started and which tensors carry them now."""

from __future__ import annotations

import weakref

import torch

from gradviz.core.origin import inspect_values as V
from gradviz.core.origin.causes import cause_of, spread_sentence
from gradviz.core.origin.result import Event, Origin

#: Tensors followed per chain of non-finite values (beyond: it has spread, it lasts).
MAX_CARRIERS = 64
#: Forward operations whose node's backward is followed per trace (interval).
MAX_NODE_CHAINS = 4096

_next_node_number = torch._C._autograd._get_sequence_nr


class Chain:
    """Where non-finite values started (an event), the tensors that carry them now (weak
    references, a bounded number) and the first few events of their spread. A chain whose
    carriers are all gone, or all finite again, was masked away and started nothing."""

    __slots__ = (
        "event",
        "scalars",
        "node",
        "tensor",
        "constant",
        "carriers",
        "spread",
        "events",
        "serial",
        "early",
        "named",
    )

    def __init__(self, event: Event, scalars=(), node=None, tensor="", constant=False):
        self.event, self.scalars, self.node = event, scalars, node
        self.tensor, self.constant = tensor, constant
        self.carriers: list[weakref.ref] = []
        self.spread = False  # carried by more tensors than are followed: certainly alive
        self.events: list[Event] = []
        #: Its place among the trace's chains (which started first), set by the tracer.
        self.serial = 0
        #: Made by an optimizer's step before any forward operation of the interval: the
        #: step that ran after the last logged one (its ``step()`` belongs to that step).
        self.early = False
        #: The tensor it came in with or was written into (a weak reference, named at the
        #: end: a parameter's name is known once its model has been called), or None.
        self.named: weakref.ref | None = None

    def carry(self, t: torch.Tensor) -> None:
        if self.spread:
            return
        if len(self.carriers) >= MAX_CARRIERS:
            self.spread, self.carriers = True, []
            return
        self.carriers.append(weakref.ref(t))

    def alive(self) -> bool:
        """Some tensor still holds its non-finite values (call with the mode off)."""
        if self.spread:
            return True
        for ref in self.carriers:
            t = ref()
            if t is not None and not V.looks_finite(t) and V.nonfinite_mask(t) is not None:
                return True
        return False


class ChainMap:
    """Which chain the values a storage holds belong to, and which chain the backward of a
    forward operation continues.

    Storages are told apart by their address and, since an address is reused once a
    storage is freed, by the storage itself (torch keeps one Python object per live
    storage: a weak reference to it dies with it). A forward operation that made values of
    a chain is known by its autograd node (autograd numbers a node before the operation
    reaches a dispatch mode: it is the next free number less one, see ``NodeMap``).
    """

    __slots__ = ("_by_storage", "_by_node")

    def __init__(self) -> None:
        self._by_storage: dict[int, tuple[Chain, weakref.ref | None]] = {}
        self._by_node: dict[int, Chain] = {}

    def __bool__(self) -> bool:
        return bool(self._by_storage)

    def of(self, t: torch.Tensor) -> Chain | None:
        """The chain whose values ``t``'s storage holds, or None."""
        storage = _storage(t)
        key = -id(t) if storage is None else storage.data_ptr()
        entry = self._by_storage.get(key)
        if entry is None:
            return None
        chain, ref = entry
        if ref is not None and ref() is not storage:  # a freed storage's address, reused
            del self._by_storage[key]
            return None
        return chain

    def set(self, t: torch.Tensor, chain: Chain) -> None:
        storage = _storage(t)
        if storage is None:
            self._by_storage[-id(t)] = (chain, None)
        else:
            self._by_storage[storage.data_ptr()] = (chain, weakref.ref(storage))

    def drop(self, t: torch.Tensor) -> None:
        """``t``'s storage is all finite again: it carries nothing."""
        storage = _storage(t)
        self._by_storage.pop(-id(t) if storage is None else storage.data_ptr(), None)

    def made_by_running_node(self, chain: Chain) -> None:
        """The forward operation running now (which makes an autograd node) made values of
        ``chain``: the backward of its node continues it."""
        if len(self._by_node) < MAX_NODE_CHAINS:
            self._by_node.setdefault(_next_node_number(), chain)

    def of_node(self, node) -> Chain | None:
        """The chain a backward node's forward operation made values of, or None."""
        return self._by_node.get(node._sequence_nr() + 1)

    def clear(self) -> None:
        self._by_storage.clear()
        self._by_node.clear()


def _storage(t: torch.Tensor):
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):  # a tensor without storage (meta, sparse)
        return None


def origin_of(chosen: Chain, nans: list[tuple[Chain, Chain]], tensor: str) -> Origin:
    """The origin a chain started (the first, in the order they started, whose values still
    live: a value made first and lasting started the trouble, even where NaN shows only
    later, as a forward's log(0) = -Inf whose backward then made NaN), and how it spread
    where an Inf of it became NaN later (``nans``: (an operation that made NaN, its chain's
    start), in order). ``tensor``: the name of the tensor it came in with, or ""."""
    made_nan = any(h is chosen for h, _ in nans)
    then = None if made_nan else next((h for h, s in nans if s is chosen and h is not chosen), None)
    code, sentence = cause_of(chosen.event, chosen.scalars, chosen.node, tensor)
    spread = ""
    if then is not None:
        spread, then_text = cause_of(then.event, then.scalars, then.node, then.tensor)
        sentence += " " + spread_sentence(then_text, then.event)
    fields = {k: getattr(chosen.event, k) for k in Event.__dataclass_fields__}
    return Origin(
        **fields,
        cause=sentence,
        cause_code=code,
        spread_code=spread,
        tensor=tensor,
        events=tuple(e for e in chosen.events if e is not chosen.event),
    )


def input_chain(t: torch.Tensor, consumer: Event, limit: int) -> Chain:
    """A chain for a non-finite tensor no traced operation made (it came in from outside),
    met by the operation of ``consumer`` (its first ``limit`` non-finite entries listed)."""
    kind, count, flat = V.describe(t, V.nonfinite_mask(t), limit)
    event = Event(
        phase="input",
        op=consumer.op,
        node=consumer.node,
        module=consumer.module,
        source=consumer.source,
        function=consumer.function,
        kind=kind,
        count=count,
        numel=t.numel(),
        indices=tuple(V.unravel(flat, t.shape)),
        inputs=(),
        dtype=str(t.dtype).removeprefix("torch."),
    )
    return Chain(event)
