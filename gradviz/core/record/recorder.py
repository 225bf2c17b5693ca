"""``gradviz.watch``: record gradient statistics of your own training loop.

The Recorder reads gradients and never writes them: it detaches, reduces on the tensors'
device and copies the reduced numbers to the host once per recorded step. Every logged step
gets a finiteness check (one fused sum per tensor); on the CPU its result is read at once,
so a step with a NaN or Inf gradient is always recorded in full. On an accelerator the
check accumulates on the device and is read with the next recorded step (no extra
synchronisation): the first non-finite step is still named exactly, with its tensor.
"""

from __future__ import annotations

import atexit
import math
import os
import threading
import weakref
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from gradviz.core.errors import GradvizError
from gradviz.core.record import ddp, stats
from gradviz.core.record import layout as L
from gradviz.core.record.amp import ScalerWatch, Skip, find_calling_scaler
from gradviz.core.record.writer import BackgroundWriter, RankWriter

#: Record statistics every this many steps by default (the overhead target: <= 5% of a step).
DEFAULT_EVERY = 100
DEFAULT_BUDGET_BYTES = 1 << 30
#: A recorded step copies the watched parameters to measure the update the optimizer makes;
#: above this size (a large model) it does not, and the update size is left unknown (NaN).
UPDATE_COPY_LIMIT_BYTES = 1 << 29
#: Up to this size the copies are kept from one recorded step to the next and refilled
#: (no allocation per step); above it each recorded step makes and drops its own.
KEEP_COPIES_LIMIT_BYTES = 1 << 26
#: Logged scalars wait in memory for this many logged steps or the next recorded step,
#: then go to the writer together (one host copy per device and dtype; each hand-over costs
#: about 0.5 ms of CPU time whatever its size).
SCALAR_FLUSH_STEPS = 256
#: Optimizer steps at whose start the recorder looks for a GradScaler calling them.
_SCALER_SEARCHES = 3


@dataclass
class _Pending:
    """A recorded step whose statistics are still on the device (written at the next step,
    when the update the optimizer applied after it is known)."""

    step: int
    loss: torch.Tensor | None
    rows: torch.Tensor  # (T, ROW_WIDTH) float64
    images: dict[str, torch.Tensor]  # name -> (H, W)
    before: list[torch.Tensor | None]  # parameter values at the step (for the update norm)
    first_bad: torch.Tensor  # (3,) float64: step, tensor, sum of the first non-finite step
    host_images: dict[str, np.ndarray] = field(default_factory=dict)  # added by add_images


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
    ) -> None:
        if not (isinstance(every, int) and every >= 1):
            raise GradvizError(f"every must be a whole number >= 1, got {every!r}.")
        if scaler is not None and not isinstance(scaler, torch.amp.GradScaler):
            raise GradvizError(
                f"scaler= takes a torch.amp.GradScaler, not {type(scaler).__name__}."
            )
        target = _uncompiled(target)
        self._module = target if isinstance(target, nn.Module) else None
        self._named = _named_tensors(target)
        self._captured: dict[str, torch.Tensor] = {}
        self._hooks = [
            t.register_hook(self._capture_hook(name))
            for name, t in self._named.items()
            if not t.is_leaf and t.requires_grad
        ]
        self._images: set[str] = set()
        self._frozen = False  # the tensor list is fixed at the first recorded step
        self._seen_bad = False
        self._probe = probe
        if probe is not None and self._module is None:
            raise GradvizError("probe= needs an nn.Module target (its Jacobians are recorded).")
        self.every = every
        self.budget_bytes = int(budget_bytes)
        self._level = 0
        self._count = 0
        self._pending: _Pending | None = None
        self._workspace = stats.Workspace()  # scratch buffers of a recorded step, reused
        self._copies: list[torch.Tensor | None] = []  # parameter copies, reused per step
        self._finite: list[bool] | None = None  # this step's tensors known finite (CPU)
        self._last_step: int | None = None
        self._scalar_buffer: list[tuple[int, dict[str, torch.Tensor | float]]] = []
        first = next(iter(self._named.values()), None)
        self.device = first.device if first is not None else torch.device("cpu")
        self._first_bad = torch.tensor([-1.0, -1.0, 0.0], dtype=torch.float64, device=self.device)
        rank, world = _distributed_rank()
        self._writer_args = dict(source=source, rank=rank, world_size=world, meta=meta)
        self._writer: BackgroundWriter | None = None
        self.path = path
        self._create_writer([*self._named])  # fails now, not at step 0, on a bad path
        self._optimizer_hook = (
            optimizer.register_step_pre_hook(lambda *_: self._on_optimizer_step())
            if optimizer is not None
            else None
        )
        self._local: ddp.LocalChecks | None = None
        self._local_sent = False
        if ddp_model is not None or ddp.is_ddp(target):  # a trainer's wrapper, or the target
            self._listen_to_buckets(ddp_model if ddp_model is not None else target)
        self._amp: ScalerWatch | None = None
        self._scaler_searches = 0 if scaler is None else _SCALER_SEARCHES
        if scaler is not None:
            self._follow_scaler(scaler)
        self.closed = False
        # A script that ends without close() still gets its queued steps written. zarr's
        # file writes go through a thread pool that stops at the threading module's exit
        # hooks, which run before atexit's: close from one of those, registered after it.
        register = getattr(threading, "_register_atexit", atexit.register)
        register(_close_at_exit, weakref.ref(self))

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
        values = _scalar_values(loss, scalars)
        if self._optimizer_hook is not None:
            number = self._last_step if step is None else int(step)
            self._add_scalars(self._count if number is None else number, values)
            if self._pending is not None and self._pending.step == self._last_step:
                self._pending.loss = _as_loss(loss, self.device)
            return
        self._add_scalars(self._count if step is None else int(step), values)
        self._on_step(loss, step)

    def add_scalars(self, step: int | None = None, **scalars: torch.Tensor | float) -> None:
        """Record named numbers at ``step`` (default: the step last logged) without
        recording gradients: for a trainer that knows its loss only after the optimizer's
        step. A ``loss`` also becomes the loss of that step's gradient record."""
        self._check_open()
        number = self._last_step if step is None else int(step)
        number = self._count if number is None else number
        values = _scalar_values(None, scalars)
        self._add_scalars(number, values)
        pending = self._pending
        if "loss" in scalars and pending is not None and pending.step == number:
            pending.loss = _as_loss(scalars["loss"], self.device)

    def record(self, loss: torch.Tensor | float | None = None) -> None:
        """Record this step now, also where the optimizer's step records the others: for a
        step that never reached ``optimizer.step()`` (e.g. one stopped on NaN)."""
        self._check_open()
        self._add_scalars(self._count, _scalar_values(loss, {}))
        self._on_step(loss, None)

    def tensor(self, name: str, t: torch.Tensor) -> torch.Tensor:
        """Also record ``t``'s gradient (an intermediate such as a distance matrix) with its
        per-entry health picture. Call it in the forward pass of every step; returns ``t``.
        Names must be first given before the first recorded step."""
        self._check_open()
        if name not in self._named and self._frozen:
            return t  # the stream's tensors are fixed at the first recorded step
        self._named[name] = t
        self._images.add(name)
        if t.requires_grad:
            t.register_hook(self._capture_hook(name))
        return t

    def add_images(self, step: int, images: dict[str, np.ndarray]) -> bool:
        """Attach 2-D numpy ``images`` to recorded step ``step`` if it is the step just
        recorded (its row is still pending); returns whether they were attached."""
        if self._pending is None or self._pending.step != step:
            return False
        self._pending.host_images.update(images)
        return True

    def close(self) -> None:
        """Write the last step and mark the recording complete."""
        if self.closed:
            return
        self._finish_pending()
        self._flush_scalars()
        self._writer.close()
        if self._amp is not None:
            self._amp.release()
        ddp.uninstall(self)
        for handle in self._hooks:
            handle.remove()
        if self._optimizer_hook is not None:
            self._optimizer_hook.remove()
        self.closed = True

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def interval(self) -> int:
        """The current recording interval: ``every`` doubled once per budget threshold."""
        return self.every << self._level

    # ---- one step ------------------------------------------------------------------------------
    def _on_step(self, loss, step: int | None) -> None:
        number = self._count if step is None else int(step)
        self._finish_pending()
        if self._local is not None:
            self._take_local_checks(number)
        names = list(self._named)
        grads = [self._gradient(name) for name in names]
        scale = 1.0
        if self._amp is not None and self._optimizer_hook is None:
            skip = self._amp.skip_of_logged_step(_any_nonfinite(grads, self.device))
            if skip is not None and not _nonfinite_loss(loss):
                self._record_skip(number, skip)
                return
            scale = self._amp.gradient_scale()
        bad_now = self._check_finite(grads, number)
        if self._wants(bad_now):
            if scale != 1.0:  # still multiplied by the scaler's scale: record them unscaled
                grads = [None if g is None else g.detach() / scale for g in grads]
            self._pending = self._gather(number, loss, names, grads)
        self._captured.clear()
        self._last_step = number
        self._count += 1

    def _on_optimizer_step(self) -> None:
        if self._amp is None and self._scaler_searches < _SCALER_SEARCHES:
            self._scaler_searches += 1
            scaler = find_calling_scaler()
            if scaler is not None:
                self._follow_scaler(scaler)
        self._on_step(None, None)

    # ---- DDP: each rank's own gradients --------------------------------------------------------
    def _listen_to_buckets(self, module: nn.Module) -> None:
        names = {id(p): (i, name) for i, (name, p) in enumerate(self._named.items())}
        self._local = ddp.LocalChecks(names, self.device)
        how = ddp.install(module, self)
        self._writer.meta["comm_hook"] = how
        self._writer.meta["local_first_nonfinite"] = None
        if how in ("user", "refused"):
            import warnings

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

    def on_bucket(self, bucket) -> None:
        """A bucket of this rank's local gradients, before the all-reduce (from the hook)."""
        if self._local is not None and not self.closed and self._local.owns(bucket):
            self._local.on_bucket(bucket)

    def _take_local_checks(self, number: int) -> None:
        self._local.take(number)
        if self._local.first is not None and not self._local_sent:
            self._local_sent = True
            self._writer.set_meta_once("local_first_nonfinite", self._local.first)

    # ---- mixed precision -----------------------------------------------------------------------
    def _follow_scaler(self, scaler) -> None:
        on_update = self._on_scaler_update if self._optimizer_hook is not None else None
        self._amp = ScalerWatch(scaler, on_update)
        self._writer.meta["grad_scaler"] = True

    def _on_scaler_update(self, before: float, after: float) -> None:
        """Where the optimizer's step records the steps: a drop of the scale in
        ``update`` is a step GradScaler skipped (it never reached the optimizer)."""
        if after < before and not self.closed:
            self._finish_pending()
            self._record_skip(self._count, Skip(before, after))

    def _record_skip(self, number: int, skip: Skip) -> None:
        """A step GradScaler skipped: noted as such, not as a non-finite gradient."""
        self._writer.append_skip({"step": number, "scale": skip.scale, "new_scale": skip.new_scale})
        self._captured.clear()
        self._last_step = number
        self._count += 1

    def _wants(self, bad_now: bool) -> bool:
        """Record this step? Every interval-th step and every non-finite one within the
        budget; the first non-finite step even beyond it."""
        first_bad = bad_now and not self._seen_bad
        self._seen_bad = self._seen_bad or bad_now
        if self._writer.bytes_written >= self.budget_bytes:
            return first_bad
        return bad_now or self._count % self.interval == 0

    def _check_finite(self, grads: list, number: int) -> bool:
        """Keep the record of the first non-finite step up to date; on the CPU (where a read
        costs nothing) return whether this step's gradients are non-finite, elsewhere
        False (the record then stays on the device until the next recorded step)."""
        self._finite = None
        if not grads:
            return False
        sums = stats.finiteness_sums(grads, self.device)
        if self.device.type == "cpu":
            self._finite = [math.isfinite(value) for value in sums.tolist()]
            bad = not all(self._finite)
            if bad and self._first_bad[0] < 0:
                t = int((~torch.isfinite(sums)).to(torch.uint8).argmax())
                self._first_bad = torch.tensor([float(number), float(t), float(sums[t])])
            return bad
        bad = ~torch.isfinite(sums)
        first = bad.to(torch.uint8).argmax()
        current = torch.stack(
            [
                # A fill on the device, not a host-to-device copy (which may synchronise).
                torch.full((), float(number), dtype=torch.float64, device=self.device),
                first.to(torch.float64),
                sums[first],
            ]
        )
        newly = bad.any() & (self._first_bad[0] < 0)
        self._first_bad = torch.where(newly, current, self._first_bad)
        return False

    def _gather(self, number: int, loss, names: list[str], grads: list) -> _Pending:
        if not self._frozen:
            self._writer.set_tensors(names)
            self._frozen = True
        params = [self._parameter(name) for name in names]
        rows = stats.gradient_rows(grads, params, self.device, self._finite, self._workspace)
        images = {
            name: stats.health_image(g)
            for name, g in zip(names, grads)
            if name in self._images and g is not None
        }
        if self._probe is not None:
            from gradviz.core.ops import per_input_jacobians

            jac = per_input_jacobians(self._module, self._probe).detach()
            images["probe_jacobians"] = jac.reshape(len(jac), -1)[:512, :512].float()
        before = self._copy_parameters(params)
        first_bad = self._first_bad.clone()
        return _Pending(number, _as_loss(loss, self.device), rows, images, before, first_bad)

    def _finish_pending(self) -> None:
        """Complete the pending step with its update norms; one copy to the host; write it."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        names = list(self._named)[: len(pending.before)]
        rows = pending.rows
        moved, steps = [], []
        for t, (name, before) in enumerate(zip(names, pending.before)):
            now = self._parameter(name)
            if before is not None and now is not None and now.shape == before.shape:
                steps.append(before.sub_(now.detach()))  # our own copy: now the update
                moved.append(t)
        if len(moved) == len(rows):
            rows[:, 3] = stats.norms(steps)
        elif moved:
            rows[torch.tensor(moved, device=rows.device), 3] = stats.norms(steps)
        loss = pending.loss
        if loss is None:  # a fill on the device, not a copy from the host
            loss = torch.full((), math.nan, dtype=rows.dtype, device=rows.device)
        parts = [rows.reshape(-1), loss.reshape(1).to(rows), pending.first_bad.to(rows)]
        if self._local is not None:  # the device's record of the first local non-finite step
            parts.append(self._local.device_first_step().to(rows))
        parts += [image.reshape(-1).to(rows) for image in pending.images.values()]
        self._flush_scalars()  # the copy below synchronises anyway
        host = torch.cat(parts).cpu().numpy()  # the one synchronisation of a recorded step
        n_rows = rows.numel()
        host_rows = host[:n_rows].reshape(rows.shape)
        loss_value, first_bad = float(host[n_rows]), host[n_rows + 1 : n_rows + 4]
        images, offset = {}, n_rows + 4
        if self._local is not None:
            self._note_device_local_first(float(host[offset]))
            offset += 1
        for name, image in pending.images.items():
            flat = host[offset : offset + image.numel()]
            offset += image.numel()
            images[name] = flat.reshape(image.shape).astype(
                np.uint8 if image.dtype == torch.uint8 else np.float32
            )
        images.update(pending.host_images)
        first = self._first_nonfinite(pending.step, names, host_rows, first_bad)
        self._writer.append(pending.step, loss_value, host_rows, images, first)
        self._adjust_interval()

    def _note_device_local_first(self, step: float) -> None:
        """On an accelerator only the step of the first local non-finite bucket is known."""
        if step >= 0 and not self._local_sent:
            self._local_sent = True
            first = {"step": int(step), "tensor": None, "index": None, "kind": None}
            self._writer.set_meta_once("local_first_nonfinite", first)

    def _copy_parameters(self, params: list) -> list[torch.Tensor | None]:
        """The parameters' values now, copied (for a small model into buffers kept from the
        previous recorded step, free again once its update norm is taken); None where a
        copy would be too big."""
        size = sum(p.nbytes for p in params if p is not None)
        if size > UPDATE_COPY_LIMIT_BYTES:
            return [None] * len(params)  # too big to copy: the update size stays unknown
        if size > KEEP_COPIES_LIMIT_BYTES:
            return [None if p is None else p.detach().clone() for p in params]
        copies = self._copies + [None] * (len(params) - len(self._copies))
        for t, p in enumerate(params):
            if p is None:
                copies[t] = None
                continue
            p = p.detach()
            copy = copies[t]
            if copy is None or (copy.shape, copy.dtype, copy.device) != (
                p.shape,
                p.dtype,
                p.device,
            ):
                copy = torch.empty_like(p, memory_format=torch.contiguous_format)
            copies[t] = copy.copy_(p)
        self._copies = copies
        return list(copies)

    def _first_nonfinite(self, step: int, names, rows: np.ndarray, first_bad) -> dict | None:
        """The run's first non-finite gradient as far as this recorded step tells."""
        if first_bad[0] < 0:
            return None
        tensor = names[int(first_bad[1])]
        if int(first_bad[0]) == step:  # recorded in full: the exact entry and its kind
            hist = rows[:, len(L.STAT_COLUMNS) :]
            for t, name in enumerate(names):
                _, _, nan, pos_inf, neg_inf = L.counts_from_histogram(hist[t])
                kind = L.bad_kind(nan, pos_inf, neg_inf)
                if kind is not None:
                    index = int(rows[t, L.STAT_COLUMNS.index("first_bad_index")])
                    return {"step": step, "tensor": name, "index": index, "kind": kind}
        total = first_bad[2]
        kind = "nan" if math.isnan(total) else ("+inf" if total > 0 else "-inf")
        return {"step": int(first_bad[0]), "tensor": tensor, "index": None, "kind": kind}

    def _adjust_interval(self) -> None:
        """Double the interval each time the recording passes 1/2, 3/4, 7/8 ... of its budget."""
        while self._writer.bytes_written >= self.budget_bytes * (1 - 0.5 ** (self._level + 1)):
            self._level += 1
            if self._level > 60:
                break

    # ---- logged scalars ----------------------------------------------------------------------
    def _add_scalars(self, number: int, values: dict[str, torch.Tensor | float]) -> None:
        if not values:
            return
        self._scalar_buffer.append((number, values))
        if len(self._scalar_buffer) >= SCALAR_FLUSH_STEPS:
            self._flush_scalars()

    def _flush_scalars(self) -> None:
        """Hand the buffered scalars to the writer: one host copy per device and dtype."""
        buffer, self._scalar_buffer = self._scalar_buffer, []
        if not buffer:
            return
        groups: dict[tuple, list[torch.Tensor]] = {}
        for _, values in buffer:
            for value in values.values():
                if isinstance(value, torch.Tensor):
                    groups.setdefault((value.device, value.dtype), []).append(value)
        host = {
            key: iter(torch.stack(ts).to(torch.float64).cpu().tolist())
            for key, ts in groups.items()
        }
        rows: dict[str, list[tuple[float, float]]] = {}
        for number, values in buffer:
            for name, value in values.items():
                if isinstance(value, torch.Tensor):
                    value = next(host[value.device, value.dtype])
                rows.setdefault(name, []).append((float(number), value))
        self._writer.append_scalars(
            {name: np.array(r, dtype=np.float64) for name, r in rows.items()}
        )

    # ---- helpers -----------------------------------------------------------------------------
    def _create_writer(self, names: list[str]) -> None:
        self._writer = BackgroundWriter(RankWriter(self.path, tensors=names, **self._writer_args))
        self._writer.meta["every"] = self.every

    def _gradient(self, name: str) -> torch.Tensor | None:
        if name in self._captured:
            return _local(self._captured[name])
        t = self._named[name]
        return _local(t.grad) if t.is_leaf else None

    def _parameter(self, name: str) -> torch.Tensor | None:
        """The tensor's value where it is a leaf the optimizer updates, else None."""
        t = self._named.get(name)
        return _local(t) if t is not None and t.is_leaf and name not in self._images else None

    def _capture_hook(self, name: str):
        def hook(grad: torch.Tensor) -> None:
            self._captured[name] = grad  # read only; returning None leaves it unchanged

        return hook

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
) -> Recorder:
    """Record the gradients of ``target`` into a new recording directory at ``path``.

    ``target``: an ``nn.Module`` (its parameters) or a dict name -> tensor (bare tensors
    such as predicted coordinates; a leaf's ``.grad`` is read, a non-leaf's gradient is
    caught by a hook on that tensor). After ``backward()`` call ``rec.log(loss=loss)``, or
    pass ``optimizer=opt`` to record from its step. Statistics are recorded every ``every``
    steps (and every step with a non-finite gradient), within ``budget_bytes`` per rank:
    the interval doubles as the budget fills. ``probe`` (a batch of inputs) adds the
    model's per-input Jacobians at each recorded step. Under ``torch.distributed`` every
    rank writes its own stream into the same recording.

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
    )


def _uncompiled(target):
    """The module a ``torch.compile``d one wraps (its parameters are the same tensors, and
    their names then match the uncompiled model's, without ``_orig_mod.``)."""
    inner = getattr(target, "_orig_mod", None)
    return inner if isinstance(target, nn.Module) and isinstance(inner, nn.Module) else target


def _named_tensors(target) -> dict[str, torch.Tensor]:
    if isinstance(target, nn.Module):
        return {n: p for n, p in target.named_parameters() if p.requires_grad}
    if isinstance(target, dict) and all(isinstance(t, torch.Tensor) for t in target.values()):
        return {str(n): t for n, t in target.items()}
    raise GradvizError(
        "gradviz.watch needs an nn.Module or a dict of name -> tensor, got "
        f"{type(target).__name__}."
    )


def _as_loss(loss, device: torch.device) -> torch.Tensor | None:
    if loss is None:
        return None
    if isinstance(loss, torch.Tensor):
        return loss.detach().reshape(()).to(device=device, dtype=torch.float64)
    return torch.tensor(float(loss), dtype=torch.float64, device=device)


def _any_nonfinite(grads: list, device: torch.device) -> bool:
    """Whether any gradient holds a NaN or Inf (a host read: one synchronisation)."""
    if not any(g is not None for g in grads):
        return False
    return not bool(torch.isfinite(stats.finiteness_sums(grads, device)).all())


def _nonfinite_loss(loss) -> bool:
    """A NaN or Inf loss is the model's failure, not an overflow the scaler can skip."""
    if loss is None:
        return False
    value = float(loss.detach().float().sum()) if isinstance(loss, torch.Tensor) else float(loss)
    return not math.isfinite(value)


def _scalar_values(loss, scalars: dict) -> dict[str, torch.Tensor | float]:
    """Named numbers of one logged step: detached 0-d tensors (left on their device, read
    in a batch later) or floats; ``loss`` first when given."""
    named = {"loss": loss, **scalars} if loss is not None else dict(scalars)
    values: dict[str, torch.Tensor | float] = {}
    for name, value in named.items():
        if value is None:
            continue
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise GradvizError(
                    f"rec.log({name}=...) takes a number or a 0-d tensor, not a tensor of "
                    f"shape {tuple(value.shape)}."
                )
            value = value.detach()  # one op per step: the stack at the flush does the rest
            values[name] = value if value.ndim == 0 else value.reshape(())
        elif isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
            values[name] = float(value)
        else:
            raise GradvizError(
                f"rec.log({name}=...) takes a number or a 0-d tensor, not {type(value).__name__}."
            )
    return values


def _close_at_exit(recorder: weakref.ref) -> None:
    alive = recorder()
    if alive is not None and not alive.closed:
        alive.close()


def _local(t: torch.Tensor | None) -> torch.Tensor | None:
    """This rank's shard of a sharded tensor (FSDP's DTensor parameters), else ``t``."""
    to_local = getattr(t, "to_local", None)
    return to_local() if to_local is not None else t


def _distributed_rank() -> tuple[int, int]:
    """(rank, world size) under an initialised torch.distributed, else (0, 1)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1
