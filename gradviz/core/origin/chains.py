"""Chains of non-finite values: where they started and which tensors carry them now."""

from __future__ import annotations

import weakref

import torch

from gradviz.core.origin import inspect_values as V
from gradviz.core.origin.result import Event

#: Tensors followed per chain of non-finite values (beyond: it has spread, it lasts).
MAX_CARRIERS = 64


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
