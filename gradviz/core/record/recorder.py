"""``gradviz.watch``: record gradient statistics of your own training loop.

The Recorder reads gradients and never writes them: it detaches, reduces on the tensors'
device and copies the reduced numbers to the host once per recorded step. Every logged step
gets a finiteness check (one fused sum per tensor); on the CPU its result is read at once,
so a step with a NaN or Inf gradient is always recorded in full. On an accelerator the
check accumulates on the device and is read with the next recorded step (no extra
synchronisation): the first non-finite step is still named exactly, with its tensor.

What a step hands over (its statistics, the logged scalars, a GradScaler's skip, a DDP
rank's own first non-finite step) goes through the recording's ``StepSink``, under its
lock, so that it reaches the disk also when no further step follows (see ``sink``).
With ``origin=True`` the module-level origin of the first non-finite step joins it there
(see ``origin_notes``, which also holds what ``gradviz diagnose`` hooks into). Which tensors
are watched and how their gradients are read is ``watched``'s; which steps are recorded,
``pacing``'s.
"""

from __future__ import annotations

import math
import os

import numpy as np
import torch
from torch import nn

from gradviz.core.common.errors import GradvizError
from gradviz.core.record import ddp, stats
from gradviz.core.record.amp import ScalerWatch, Skip, find_calling_scaler
from gradviz.core.record.gradients import FirstNonfinite
from gradviz.core.record.origin_notes import STEP_LISTENERS, OriginNotes, untraced
from gradviz.core.record.origin_notes import UNTRACED as UNTRACED  # diagnose hooks in here
from gradviz.core.record.pacing import Pacing
from gradviz.core.record.run_order import RunOrder
from gradviz.core.record.scalars import scalar_values
from gradviz.core.record.sink import Pending, StepSink, watch_owner
from gradviz.core.record.watched import WatchedTensors
from gradviz.core.record.writer import BackgroundWriter, RankWriter

#: Record statistics every this many steps by default (the overhead target: <= 5% of a step).
DEFAULT_EVERY = 100
DEFAULT_BUDGET_BYTES = 1 << 30
#: Optimizer steps at whose start the recorder looks for a GradScaler calling them.
_SCALER_SEARCHES = 3


class Recorder:
    """Records the gradients of ``target`` into the recording at ``path`` (see ``watch``)."""

    def __init__(
        self,
        target: nn.Module | dict[str, torch.Tensor],
        path: str | os.PathLike,
        *,
        every: int = DEFAULT_EVERY,
        optimizer: torch.optim.Optimizer | None = None,
        probe: torch.Tensor | None = None,
        budget_bytes: int = DEFAULT_BUDGET_BYTES,
        source: str = "watch",
        meta: dict | None = None,
        scaler: torch.amp.GradScaler | None = None,
        ddp_model: nn.Module | None = None,
        origin: bool = True,
    ) -> None:
        self._pace = Pacing(every, budget_bytes)
        if scaler is not None and not isinstance(scaler, torch.amp.GradScaler):
            raise GradvizError(
                f"scaler= takes a torch.amp.GradScaler, not {type(scaler).__name__}."
            )
        # A compiled module's notes would be traced into its graph: no origin there.
        plain = _uncompiled(target) is target
        origin = origin and plain
        target = _uncompiled(target)
        self._tensors = WatchedTensors(target, probe)
        self._module = self._tensors.module
        self._count = 0
        self._workspace = stats.Workspace()  # scratch buffers of a recorded step, reused
        self._last_step: int | None = None
        self.device = self._tensors.device
        self._first_bad = FirstNonfinite(self.device)
        rank, world = _distributed_rank()
        self.path = path
        names = [*self._tensors.named]  # made now: a bad path fails here, not at step 0
        writer = RankWriter(
            path, tensors=names, source=source, rank=rank, world_size=world, meta=meta
        )
        self._writer = BackgroundWriter(writer)
        self._writer.meta["every"] = every
        # The sink writes every step this recorder is given, also if it is dropped without
        # close(), at exit, after an exception or on SIGTERM (see sink).
        self._sink = StepSink(self._writer)
        watch_owner(self, self._sink)
        self._origin = (
            OriginNotes(self._module, self.device, single=world <= 1)
            if origin and self._module is not None
            else None
        )
        self._sink.origin = self._origin
        # The graph (module tree, run order, data flow) is stored from the first recorded step.
        self._run_order = RunOrder(self._module) if plain and self._module is not None else None
        self._optimizer_hook = (
            optimizer.register_step_pre_hook(lambda *_: self._on_optimizer_step())
            if optimizer is not None
            else None
        )
        if ddp_model is not None or ddp.is_ddp(target):  # a trainer's wrapper, or the target
            module = ddp_model if ddp_model is not None else target
            meta = self._writer.meta
            self._sink.local = ddp.listen(module, self, self._tensors.named, self.device, meta)
        self._amp: ScalerWatch | None = None
        self._scaler_searches = 0 if scaler is None else _SCALER_SEARCHES
        if scaler is not None:
            self._follow_scaler(scaler)
        self.closed = False

    # ---- the user's calls --------------------------------------------------------------------
    def log(
        self,
        loss: torch.Tensor | float | None = None,
        step: int | None = None,
        **scalars: torch.Tensor | float,
    ) -> None:
        """Record this step (call after ``backward()``): gradients, and ``loss`` if given.

        With ``optimizer=`` the step is recorded by the optimizer's step; ``log`` then only
        adds the loss to the step just taken. ``step`` numbers the step (default: the count
        of steps logged so far, from 0). Any other keyword (``lr=``, ``accuracy=``) is a named
        number (a float or a 0-d tensor) recorded at every logged step, as is ``loss``, NaN
        and Inf kept as they are; read them back with ``Reader(...).rank(0).scalar(name)``.
        """
        self._check_open()
        values = scalar_values(loss, scalars)
        if self._optimizer_hook is not None:
            number = self._last_step if step is None else int(step)
            with self._sink.lock:
                self._sink.ensure_open()
                self._sink.add_scalars(self._count if number is None else number, values)
                self._sink.add_loss(self._last_step, _as_loss(loss, self.device))
            return
        self._on_step(loss, step, values)

    def add_scalars(self, step: int | None = None, **scalars: torch.Tensor | float) -> None:
        """Record named numbers at ``step`` (default: the step last logged) without
        recording gradients: for a trainer that knows its loss only after the optimizer's
        step. A ``loss`` also becomes the loss of that step's gradient record."""
        self._check_open()
        number = self._last_step if step is None else int(step)
        number = self._count if number is None else number
        values = scalar_values(None, scalars)
        with self._sink.lock:
            self._sink.ensure_open()
            self._sink.add_scalars(number, values)
            if "loss" in scalars:
                self._sink.add_loss(number, _as_loss(scalars["loss"], self.device))

    def record(self, loss: torch.Tensor | float | None = None) -> None:
        """Record this step now, also where the optimizer's step records the others: for a
        step that never reached ``optimizer.step()`` (e.g. one stopped on NaN)."""
        self._check_open()
        self._on_step(loss, None, scalar_values(loss, {}))

    def tensor(self, name: str, t: torch.Tensor) -> torch.Tensor:
        """Also record ``t``'s gradient (an intermediate such as a distance matrix) with its
        per-entry health picture. Call it in the forward pass of every step; returns ``t``.
        Names must be first given before the first recorded step."""
        self._check_open()
        self._tensors.add(name, t)  # not once the stream's tensors are fixed
        return t

    def add_images(self, step: int, images: dict[str, np.ndarray]) -> bool:
        """Attach 2-D numpy ``images`` to recorded step ``step`` if it is the step just
        recorded (its row is still pending); returns whether they were attached."""
        with self._sink.lock:
            return self._sink.add_images(step, images)

    def close(self) -> None:
        """Write the last step and mark the recording complete."""
        if self.closed:
            return
        with self._sink.lock:
            self._sink.close()
        if self._origin is not None:
            self._origin.remove()
        if self._run_order is not None:
            self._run_order.remove()
        if self._amp is not None:
            self._amp.release()
        ddp.uninstall(self)
        self._tensors.remove()
        if self._optimizer_hook is not None:
            self._optimizer_hook.remove()
        self.closed = True

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def every(self) -> int:
        return self._pace.every

    @property
    def budget_bytes(self) -> int:
        return self._pace.budget_bytes

    @property
    def interval(self) -> int:
        """The current recording interval: ``every`` doubled once per budget threshold."""
        return self._pace.interval

    # ---- one step ------------------------------------------------------------------------------
    def _on_step(self, loss, step: int | None, values: dict | None = None) -> None:
        number = self._count if step is None else int(step)
        for listener in STEP_LISTENERS:
            listener(self, number)
        with self._sink.lock, untraced():
            self._sink.ensure_open()  # closed at exit or on a signal meanwhile
            self._sink.add_scalars(number, values or {})
            self._sink.write_pending()
            self._sink.amend()  # the previous step, if written before this one came
            self._pace.adjust(self._writer.bytes_written)
            if self._sink.local is not None:
                self._sink.local.take(number)
                self._sink.report_local()
            names, grads, layout = self._tensors.gradients()
            skip, scale = self._scaler_view(loss, grads)
            if skip is not None:
                self._record_skip(number, skip, loss, (names, grads))
                return
            bad_now = self._first_bad.check(grads, number, self._workspace, layout)
            if self._pace.wants(bad_now, self._count, self._writer.bytes_written):
                grads = _unscaled(grads, scale)  # still multiplied by the scaler's scale
                self._sink.hold(self._gather(number, loss, names, grads))
            # After the step is held (its origin joins it when it is written): a bad step's
            # origin may run the step again, and an interrupt there must not lose the step.
            # The loss as logged (on the CPU already read: not read again).
            self._note_origin(number, (values or {}).get("loss", loss), bad_now)
        self._next_step(number)

    def _next_step(self, number: int) -> None:
        self._tensors.step_done()
        self._last_step = number
        self._count += 1

    def _note_origin(self, number: int, loss, bad_now: bool) -> None:
        """End the step's module-level origin checks: read on the CPU at every step whose
        gradients (``bad_now``, read just now) or loss are non-finite, on an accelerator at
        the steps of the interval, which synchronise anyway."""
        if self._origin is None:
            return
        suspect = (bad_now or _nonfinite_loss(loss)) if self.device.type == "cpu" else None
        self._origin.note(
            number, self._reads_at(self._count), loss, suspect, self._reads_at(self._count + 1)
        )

    def _reads_at(self, count: int) -> bool:
        """Whether the module-level origin is read at the ``count``-th logged step."""
        return self.device.type == "cpu" or self._pace.at_interval(count)

    def _on_optimizer_step(self) -> None:
        if self._amp is None and self._scaler_searches < _SCALER_SEARCHES:
            self._scaler_searches += 1
            scaler = find_calling_scaler()
            if scaler is not None:
                self._follow_scaler(scaler)
        self._on_step(None, None)

    def on_bucket(self, bucket) -> None:
        """A bucket of this rank's local gradients, before the all-reduce (from DDP's
        communication hook, inside ``backward()``)."""
        local = self._sink.local
        if local is not None and not self.closed and local.owns(bucket):
            local.on_bucket(bucket)

    # ---- mixed precision -----------------------------------------------------------------------
    def _follow_scaler(self, scaler) -> None:
        on_update = self._on_scaler_update if self._optimizer_hook is not None else None
        self._amp = ScalerWatch(scaler, on_update)
        self._writer.meta["grad_scaler"] = True

    def _scaler_view(self, loss, grads: list) -> tuple[Skip | None, float]:
        """Where ``log`` records the steps: whether GradScaler skips (or skipped) this step,
        and what the gradients are still multiplied by (1 where no scaler is followed)."""
        if self._amp is None or self._optimizer_hook is not None:
            return None, 1.0
        skip = self._amp.skip_of_logged_step(lambda: _any_nonfinite(grads, self.device))
        if skip is not None and not _nonfinite_loss(loss):
            return skip, 1.0
        return None, self._amp.gradient_scale()

    def _on_scaler_update(self, before: float, after: float) -> None:
        """Where the optimizer's step records the steps: a drop of the scale in
        ``update`` is a step GradScaler skipped (it never reached the optimizer)."""
        if after < before and not self.closed:
            with self._sink.lock:
                if self._sink.closed:
                    return
                self._sink.write_pending()
                self._sink.amend()
                self._record_skip(self._count, Skip(before, after))

    def _record_skip(self, number: int, skip: Skip, loss=None, read: tuple | None = None) -> None:
        """A step GradScaler skipped: noted as such, with its scale, not as a non-finite
        gradient (called with the sink's lock held). At the interval it is also a recorded
        step (the statistics of its unscaled gradients, overflowed as they are), so a run
        whose scaler skips every step still has its steps; it never becomes the first
        non-finite gradient. ``read``: (names, gradients) where the caller read them. Its
        module-level sums are dropped: the overflow of its scaled gradients is no module's
        doing."""
        if self._origin is not None:
            self._origin.forget(self._reads_at(self._count + 1))
        self._writer.append_skip({"step": number, "scale": skip.scale, "new_scale": skip.new_scale})
        written = self._writer.bytes_written
        if self._pace.at_interval(self._count) and self._pace.within_budget(written):
            names, grads = read or self._tensors.gradients()[:2]
            scale = self._amp.gradient_scale() if self._amp is not None else 1.0
            grads = _unscaled(grads, scale)  # still multiplied by the scaler's scale
            self._first_bad.finite = None  # not checked: each tensor's entries are searched
            self._sink.hold(self._gather(number, loss, names, grads))
        self._next_step(number)

    # ---- a recorded step -----------------------------------------------------------------------
    def _gather(self, number: int, loss, names: list[str], grads: list) -> Pending:
        if not self._tensors.frozen:  # the stream's tensors are fixed at its first record
            self._writer.set_tensors(names)
            self._tensors.frozen = True
            if self._run_order is not None:
                self._writer.set_meta_once("graph", self._run_order.finish(loss))
                self._run_order = None
        finite = self._first_bad.finite
        rows, images, sources, before = self._tensors.taken(
            names, grads, self.device, finite, self._workspace
        )
        first_bad = self._first_bad.record.clone()
        return Pending(
            number, _as_loss(loss, self.device), rows, images, names, sources, before, first_bad
        )

    # ---- helpers -----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise GradvizError("This recorder is closed; start a new gradviz.watch to record.")


def watch(
    target: nn.Module | dict[str, torch.Tensor],
    path: str | os.PathLike,
    *,
    every: int = DEFAULT_EVERY,
    optimizer: torch.optim.Optimizer | None = None,
    probe: torch.Tensor | None = None,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    scaler: torch.amp.GradScaler | None = None,
    origin: bool = True,
) -> Recorder:
    """Record the gradients of ``target`` into a new recording directory at ``path``.

    ``target``: an ``nn.Module`` (its parameters) or a dict name -> tensor (bare tensors
    such as predicted coordinates; a leaf's ``.grad`` is read, a non-leaf's gradient is
    caught by a hook on that tensor). After ``backward()`` call ``rec.log(loss=loss)``, or
    pass ``optimizer=opt`` to record from its step. Statistics are recorded every ``every``
    steps (and every step with a non-finite gradient), within ``budget_bytes`` per rank:
    the interval doubles as the budget fills. ``probe`` (a batch of inputs) adds the
    model's per-input Jacobians at each recorded step. Under ``torch.distributed`` every
    rank writes its own stream into the same recording. ``origin`` (for a module target)
    also checks, every step, the finiteness of each module's output and of the gradient
    reaching it, so that the first non-finite step names the module whose forward or
    backward made it (``first_nonfinite["origin"]``); not for a ``torch.compile``d module.

    Mixed precision: pass ``scaler=`` (a ``torch.amp.GradScaler``; with ``optimizer=`` it is
    also found on the optimizer's step). The steps it skips (their scaled gradients
    overflowed) are recorded as skipped, not as non-finite gradients, and the statistics are
    of the unscaled gradients, whether ``rec.log`` is called after ``scaler.update()`` or
    between ``backward()`` and ``scaler.step``.

    >>> with gradviz.watch(model, "run1") as rec:
    ...     for x, y in data:
    ...         loss = F.mse_loss(model(x), y)
    ...         opt.zero_grad(); loss.backward()
    ...         rec.log(loss=loss)
    ...         opt.step()
    """
    return Recorder(
        target,
        path,
        every=every,
        optimizer=optimizer,
        probe=probe,
        budget_bytes=budget_bytes,
        scaler=scaler,
        origin=origin,
    )


def _uncompiled(target):
    """The module a ``torch.compile``d one wraps (its parameters are the same tensors, and
    their names then match the uncompiled model's, without ``_orig_mod.``)."""
    inner = getattr(target, "_orig_mod", None)
    return inner if isinstance(target, nn.Module) and isinstance(inner, nn.Module) else target


def _as_loss(loss, device: torch.device) -> torch.Tensor | None:
    if loss is None:
        return None
    if isinstance(loss, torch.Tensor):
        return loss.detach().reshape(()).to(device=device, dtype=torch.float64)
    return torch.tensor(float(loss), dtype=torch.float64, device=device)


def _unscaled(grads: list, scale: float) -> list:
    """The gradients divided by a GradScaler's ``scale`` (as they are where it is 1)."""
    if scale == 1.0:
        return grads
    return [None if g is None else g.detach() / scale for g in grads]


def _any_nonfinite(grads: list, device: torch.device) -> bool:
    """Whether any gradient holds a NaN or Inf (a host read: one synchronisation)."""
    if not any(g is not None for g in grads):
        return False
    return not all(stats.finite_flags(grads, stats.finiteness_sums(grads, device).tolist()))


def _nonfinite_loss(loss) -> bool:
    """A NaN or Inf loss is the model's failure, not an overflow the scaler can skip."""
    if loss is None:
        return False
    if isinstance(loss, torch.Tensor):  # one read of a 0-d loss: this runs every step
        loss = loss.item() if loss.numel() == 1 else loss.detach().float().sum().item()
    return not math.isfinite(float(loss))


def _distributed_rank() -> tuple[int, int]:
    """(rank, world size) under an initialised torch.distributed, else (0, 1)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1
