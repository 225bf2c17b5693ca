"""DDP: each rank's own gradients, looked at before the all-reduce hides which rank went bad.

Under ``DistributedDataParallel`` the gradients are averaged across ranks inside
``backward()``: once one rank's local gradient is NaN, every rank's is, at the same step.
A communication hook sees each bucket of local gradients before it is reduced, so the
recorder registers one (``allreduce_hook`` of torch's default hooks, after a finiteness
check of the bucket: one sum over its flat buffer, no communication). DDP takes one
hook per model: a user with their own passes it through ``wrap_comm_hook``; an unwrapped
hook of their own leaves the recorder reading the rank after the reduction.

A bucket's check is read at once on the CPU (gloo; a NaN bucket is then searched for its
first non-finite parameter, its flat index and kind); on an accelerator it stays on the
device, and only the step is known (read with the next recorded step, no extra
synchronisation).
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Callable

import torch

#: Recorders in this process that listen to buckets (normally one).
_LISTENERS: weakref.WeakSet = weakref.WeakSet()

Hook = Callable[[object, "torch.distributed.GradBucket"], "torch.futures.Future[torch.Tensor]"]


def wrap_comm_hook(hook: Hook) -> Hook:
    """``hook`` (a DDP communication hook, ``hook(state, bucket) -> Future``) with gradviz's
    look at the bucket's local gradients first, so ``gradviz.watch`` can name the rank whose
    own gradients went non-finite. Register the result in its place:

    >>> model.register_comm_hook(state, gradviz.wrap_comm_hook(powerSGD_hook))
    """

    def gradviz_checked_hook(state, bucket):
        note_bucket(bucket)
        return hook(state, bucket)

    gradviz_checked_hook.__gradviz__ = True
    gradviz_checked_hook.__wrapped__ = hook
    gradviz_checked_hook.__qualname__ = f"gradviz_checked({getattr(hook, '__qualname__', hook)})"
    return gradviz_checked_hook


def default_checked_hook() -> Hook:
    """torch's default all-reduce (averaging), after the finiteness check."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    return wrap_comm_hook(default_hooks.allreduce_hook)


def note_bucket(bucket) -> None:
    """Tell every listening recorder about a bucket of local gradients."""
    for listener in list(_LISTENERS):
        listener.on_bucket(bucket)


def is_ddp(module) -> bool:
    return isinstance(module, torch.nn.parallel.DistributedDataParallel)


def install(module, listener) -> str:
    """Listen to ``module``'s buckets; returns how: "gradviz" (our hook registered), "wrapped"
    (the user's hook, wrapped by ``wrap_comm_hook``), "user" (their own hook, unwrapped: the
    rank is read after the reduction) or "refused" (DDP would not take a hook now)."""
    _LISTENERS.add(listener)
    hooks = getattr(module, "_comm_hooks", [])
    if hooks:
        return "wrapped" if any(getattr(h, "__gradviz__", False) for h, _ in hooks) else "user"
    try:
        module.register_comm_hook(None, default_checked_hook())
    except RuntimeError:  # a builtin C++ hook already there, or training already begun
        return "refused"
    return "gradviz"


def uninstall(listener) -> None:
    _LISTENERS.discard(listener)


class LocalChecks:
    """The local finiteness of one rank's buckets, per step, for a recorder.

    ``on_bucket`` is called from inside ``backward()``; ``take(step)`` at the recorder's
    step folds this step's buckets into the rank's first locally non-finite step.
    """

    def __init__(self, names_by_param: dict[int, tuple[int, str]], device: torch.device) -> None:
        self._names = names_by_param  # id(parameter) -> (watched index, name)
        self._device = device
        self._flags: list[torch.Tensor] = []  # device: this step's buckets all finite?
        self._bad_here: list[dict] = []  # CPU: this step's non-finite parameters
        self._owned: dict[tuple[int, int, int], bool] = {}
        self.seen = False  # any bucket seen at all
        self.first: dict | None = None  # CPU: {"step", "tensor", "index", "kind"}
        self._reported = False
        self._first_step = torch.full((), -1.0, dtype=torch.float64, device=device)

    def owns(self, bucket) -> bool:
        """Whether the bucket holds this recorder's parameters. ``bucket.parameters()``
        builds a list of every tensor in it (0.3 ms for a bucket of a 670k-parameter MLP),
        so the answer is kept per bucket buffer (DDP keeps its buffers from step to step;
        a rebuilt bucket has a new one)."""
        buffer = bucket.buffer()
        key = (buffer.data_ptr(), buffer.numel(), bucket.index())
        known = self._owned.get(key)
        if known is None:
            params = bucket.parameters()
            known = self._owned[key] = bool(params) and id(params[0]) in self._names
        return known

    def on_bucket(self, bucket) -> None:
        self.seen = True
        buffer = bucket.buffer()
        if buffer.device.type != "cpu":
            self._flags.append(torch.isfinite(buffer).all())  # one reduction, stays there
            return
        # One sum over the bucket (10x cheaper than isfinite(...).all() on the CPU): NaN or
        # Inf when an entry is; a finite sum that overflows is checked in full below.
        if bool(torch.isfinite(buffer.sum())):
            return
        for param, grad in zip(bucket.parameters(), bucket.gradients()):
            found = self._names.get(id(param))
            if found is None:
                continue
            bad = ~torch.isfinite(grad.reshape(-1))
            if bool(bad.any()):
                index = int(bad.to(torch.uint8).argmax())
                value = float(grad.reshape(-1)[index])
                kind = "nan" if math.isnan(value) else ("+inf" if value > 0 else "-inf")
                self._bad_here.append(
                    {"order": found[0], "tensor": found[1], "index": index, "kind": kind}
                )

    def take(self, step: int) -> None:
        """Fold this step's bucket checks in (call once per recorder step)."""
        flags, self._flags = self._flags, []
        bad_here, self._bad_here = self._bad_here, []
        if bad_here and self.first is None:
            first = min(bad_here, key=lambda b: b["order"])
            self.first = {"step": step, **{k: first[k] for k in ("tensor", "index", "kind")}}
        if flags:
            bad = ~torch.stack(flags).all()
            now = torch.full((), float(step), dtype=torch.float64, device=self._device)
            newly = bad & (self._first_step < 0)
            self._first_step = torch.where(newly, now, self._first_step)

    def device_first_step(self) -> torch.Tensor:
        """(1,) float64 on the device: the first locally non-finite step there, or -1."""
        return self._first_step.reshape(1)

    def report(self, device_step: float | None = None) -> dict | None:
        """The first locally non-finite step, once (None before it and after that): the
        CPU's check with its entry, or an accelerator's ``device_step`` (read from
        ``device_first_step`` with a recorded step; -1 while none) with the step alone."""
        if self._reported:
            return None
        first = self.first
        if first is None and device_step is not None and device_step >= 0:
            first = {"step": int(device_step), "tensor": None, "index": None, "kind": None}
        self._reported = first is not None
        return first


def listen(module, listener, named: dict, device: torch.device, meta: dict) -> LocalChecks:
    """Have ``listener`` (a Recorder watching ``named``, name -> parameter) hear ``module``'s
    buckets; the returned checks keep what they say. ``meta`` (the rank's metadata) notes
    how the hook was installed; a user's own unwrapped hook is said in a warning."""
    names = {id(p): (i, name) for i, (name, p) in enumerate(named.items())}
    checks = LocalChecks(names, device)
    how = install(module, listener)
    meta["comm_hook"] = how
    meta["local_first_nonfinite"] = None
    if how in ("user", "refused"):
        why = (
            "this DDP model has its own communication hook"
            if how == "user"
            else "DDP refused gradviz's communication hook (one is there already, or "
            "training began before watch)"
        )
        warnings.warn(
            f"gradviz: {why}, so each rank's gradients are read after the all-reduce "
            "and every rank shares the first non-finite step; register "
            "gradviz.wrap_comm_hook(your_hook) before training to see which rank went "
            "bad first.",
            stacklevel=3,
        )
    return checks
