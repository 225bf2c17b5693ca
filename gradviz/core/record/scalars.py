"""Named numbers logged at every step (``rec.log(loss=..., lr=...)``), on their way to the
writer.

Logging a 0-d tensor must not synchronise an accelerator, so the values wait in a
``ScalarBuffer`` (on their device, detached: one op per step) and are copied to the host
together (with the wall-clock time each step was logged at, for plots over time): every
``FLUSH_STEPS`` logged steps, with the next recorded step's host copy
(which synchronises anyway), or when the recording's sink finds no further step logged for
a while (see ``sink``). The buffer is owned by the sink and used under its lock, so that the
scalars of the last steps are written at exit, on a signal or when the recorder is dropped.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from gradviz.core.common.errors import GradvizError

#: Logged scalars wait in memory for this many logged steps or the next recorded step,
#: then go to the writer together (one host copy per device and dtype; each hand-over costs
#: about 0.5 ms of CPU time whatever its size).
FLUSH_STEPS = 256

Values = dict[str, "torch.Tensor | float"]


class ScalarBuffer:
    """Logged scalars not yet handed to ``writer`` (a ``BackgroundWriter``)."""

    def __init__(self, writer) -> None:
        self.writer = writer
        self.last_added = 0.0  # time.monotonic() of the last add
        self._buffer: list[tuple[int, float, Values]] = []

    def __bool__(self) -> bool:
        return bool(self._buffer)

    def add(self, number: int, values: Values) -> None:
        """Buffer the scalars of step ``number`` and the time it was logged at (also for a
        step logged without scalars); hand them over once ``FLUSH_STEPS`` wait."""
        self._buffer.append((number, time.time(), values))
        self.last_added = time.monotonic()
        if len(self._buffer) >= FLUSH_STEPS:
            self.flush()

    def flush(self) -> None:
        """Hand the buffered scalars to the writer: one host copy per device and dtype."""
        buffer, self._buffer = self._buffer, []
        if not buffer:
            return
        groups: dict[tuple, list[torch.Tensor]] = {}
        for _, _, values in buffer:
            for value in values.values():
                if isinstance(value, torch.Tensor):
                    groups.setdefault((value.device, value.dtype), []).append(value)
        host = {
            key: iter(torch.stack(ts).to(torch.float64).cpu().tolist())
            for key, ts in groups.items()
        }
        rows: dict[str, list[tuple[float, float]]] = {}
        for number, _, values in buffer:
            for name, value in values.items():
                if isinstance(value, torch.Tensor):
                    value = next(host[value.device, value.dtype])
                rows.setdefault(name, []).append((float(number), value))
        self.writer.append_scalars(
            {name: np.array(r, dtype=np.float64) for name, r in rows.items()},
            times=wall_times(buffer),
        )


def wall_times(buffer: list[tuple[int, float, Values]]) -> np.ndarray:
    """(K, 2) float64 [step, Unix time in s] of each logged step, once per step number (the
    first time it was logged: ``log`` then ``add_scalars`` of one step count once)."""
    rows = np.array([(number, at) for number, at, _ in buffer], dtype=np.float64)
    keep = np.ones(len(rows), bool)
    keep[1:] = rows[1:, 0] != rows[:-1, 0]
    return rows[keep]


def scalar_values(loss, scalars: dict) -> Values:
    """Named numbers of one logged step: floats, and an accelerator's tensors as detached 0-d
    tensors (left on their device, read in a batch later); ``loss`` first when given."""
    named = {"loss": loss, **scalars} if loss is not None else dict(scalars)
    values: Values = {}
    for name, value in named.items():
        if value is None:
            continue
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise GradvizError(
                    f"rec.log({name}=...) takes a number or a 0-d tensor, not a tensor of "
                    f"shape {tuple(value.shape)}."
                )
            if value.device.type == "cpu":  # a read costs no synchronisation here
                values[name] = value.item()
                continue
            value = value.detach()  # one op per step: the stack at the flush does the rest
            values[name] = value if value.ndim == 0 else value.reshape(())
        elif isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
            values[name] = float(value)
        else:
            raise GradvizError(
                f"rec.log({name}=...) takes a number or a 0-d tensor, not {type(value).__name__}."
            )
    return values
