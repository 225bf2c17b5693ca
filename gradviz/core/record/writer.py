"""Writing one rank's stream of a recording: zarr v3 arrays, appended step by step.

A recording is a directory (any name) holding a zarr v3 group; each rank writes its own
child group ``rank<r>``, so ranks never touch each other's files. Per rank:

- ``index`` (S, 2) float64: [step number, loss] per recorded step;
- ``stats`` (S, T, ROW_WIDTH) float64: per watched tensor the layout's statistics and
  histogram (see ``layout``);
- ``images/<name>/data`` (S_i, H, W) and ``images/<name>/index`` (S_i, 3) int64 [step, rows,
  cols]: per-entry pictures (health codes of a watched matrix, a fit's distance matrices),
  downsampled, padded where a later matrix is smaller than the first.

Arrays have one chunk per step, so a written chunk is never written again; they grow by
doubling their capacity (a metadata write). The group's attribute ``gradviz`` holds the
metadata, and its ``steps`` count is written after the data of those steps: a reader trusts
only the first ``steps`` rows, so it never sees a step whose data is missing. zarr's local
store writes each file atomically (a temporary file, then a rename), so a writer killed at
any moment leaves a recording that opens up to its last complete step.
"""

from __future__ import annotations

import math
import os
import queue
import threading
import time
from pathlib import Path

import numpy as np
import zarr

from gradviz.core.decimate import block_max, block_mean
from gradviz.core.errors import GradvizError
from gradviz.core.record import layout as L

_INITIAL_CAPACITY = 64


class RankWriter:
    """Appends recorded steps of one rank; ``close()`` marks the stream complete.

    ``tensors`` names the rows of ``stats`` (fixed once the first step is written);
    ``meta`` adds free-form JSON metadata (e.g. the fit's settings).
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        source: str,
        tensors: list[str],
        rank: int = 0,
        world_size: int = 1,
        meta: dict | None = None,
    ) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise GradvizError(
                f"Cannot record into {str(self.path)!r}: it is a file; give a new name or "
                "a recording directory."
            )
        try:
            root = _open_root(self.path)
            if f"{L.RANK_PREFIX}{rank}" in root:
                raise GradvizError(
                    f"{str(self.path)!r} already holds a recording of rank {rank}; "
                    "give a new path (recordings are never overwritten)."
                )
            self.group = root.create_group(f"{L.RANK_PREFIX}{rank}")
            # After creating our group (which may rewrite the root's metadata): the marker.
            root.attrs[L.MARKER] = {"kind": "recording", "format": L.FORMAT_VERSION}
        except OSError as exc:
            raise GradvizError(f"Cannot write a recording at {str(self.path)!r} ({exc}).") from None
        self.tensors = list(tensors)
        self.meta = {
            "format": L.FORMAT_VERSION,
            "source": source,
            "rank": rank,
            "world_size": world_size,
            "tensors": self.tensors,
            "stat_columns": list(L.STAT_COLUMNS),
            "bins": L.BINS,
            "steps": 0,
            "last_step": None,
            "complete": False,
            "first_nonfinite": None,
            "images": {},
            **(meta or {}),
        }
        self.steps = 0
        self.bytes_written = 0
        self._index = self._stats = None
        self._images: dict[str, tuple[zarr.Array, zarr.Array]] = {}
        self._publish()

    # ---- appending -----------------------------------------------------------------------------
    def append(
        self,
        step: int,
        loss: float,
        rows: np.ndarray,
        images: dict[str, np.ndarray] | None = None,
        first_nonfinite: dict | None = None,
    ) -> None:
        """Write one recorded step: ``rows`` (T, ROW_WIDTH) float64, optional ``images``
        (name -> 2-D array) and, once, the run's first non-finite gradient."""
        if self._stats is None:
            self._create_step_arrays()
        i = self.steps
        self._grow(self._index, i)
        self._grow(self._stats, i)
        self._index[i] = np.array([step, loss], dtype=np.float64)
        self._stats[i] = np.asarray(rows, dtype=np.float64)
        self.bytes_written += 16 + rows.size * 8
        for name, image in (images or {}).items():
            self._append_image(name, step, np.asarray(image))
        self.steps = i + 1
        self.meta["steps"] = self.steps
        self.meta["last_step"] = int(step)
        if first_nonfinite is not None and self.meta["first_nonfinite"] is None:
            self.meta["first_nonfinite"] = first_nonfinite
        self._publish()  # last: the data of every counted step is already on disk

    def set_tensors(self, names: list[str]) -> None:
        """Name the rows of ``stats``; only before the first step is written."""
        if self._stats is not None:
            raise GradvizError("The watched tensors are fixed once steps are recorded.")
        self.tensors = list(names)
        self.meta["tensors"] = self.tensors

    def close(self) -> None:
        """Mark the stream complete (a reader then knows no step is missing at the end)."""
        self.meta["complete"] = True
        self._publish()

    # ---- internals -----------------------------------------------------------------------------
    def _publish(self) -> None:
        self.group.attrs[L.MARKER] = self.meta

    def _create_step_arrays(self) -> None:
        width = (len(self.tensors), L.ROW_WIDTH)
        self._index = self._array(self.group, "index", (2,), np.float64, math.nan)
        self._stats = self._array(self.group, "stats", width, np.float64, math.nan)

    @staticmethod
    def _array(group, name: str, row_shape: tuple, dtype, fill) -> zarr.Array:
        return group.create_array(
            name,
            shape=(_INITIAL_CAPACITY, *row_shape),
            chunks=(1, *row_shape),
            dtype=dtype,
            fill_value=fill,
        )

    @staticmethod
    def _grow(array: zarr.Array, row: int) -> None:
        """Double the capacity when ``row`` does not fit (rewrites metadata only)."""
        capacity = array.shape[0]
        if row >= capacity:
            array.resize((max(row + 1, 2 * capacity), *array.shape[1:]))

    def _append_image(self, name: str, step: int, image: np.ndarray) -> None:
        info = self.meta["images"].get(name)
        if info is None:
            fill = L.NO_ENTRY if image.dtype == np.uint8 else math.nan
            sub = self.group.require_group("images").create_group(name)
            data = self._array(sub, "data", image.shape, image.dtype, fill)
            index = self._array(sub, "index", (3,), np.int64, -1)
            self._images[name] = (data, index)
            info = {"count": 0, "dtype": str(image.dtype), "shape": list(image.shape)}
            self.meta["images"][name] = info
        data, index = self._images[name]
        canvas = np.full(data.shape[1:], data.fill_value, dtype=data.dtype)
        image = fit_into(image, canvas.shape)
        rows, cols = image.shape
        canvas[:rows, :cols] = image
        i = info["count"]
        self._grow(data, i)
        self._grow(index, i)
        data[i] = canvas
        index[i] = np.array([step, rows, cols], dtype=np.int64)
        self.bytes_written += canvas.nbytes + 24
        info["count"] = i + 1


def _open_root(path: Path, attempts: int = 20) -> zarr.Group:
    """The recording's root group, created if missing. Ranks starting together race to
    create it (zarr creates it exclusively, so the loser fails): open it again then."""
    for attempt in range(attempts):
        try:
            return zarr.open_group(path, mode="a")
        except OSError as exc:
            if not isinstance(exc, FileExistsError) or attempt == attempts - 1:
                raise
            time.sleep(0.05)
        except Exception:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05)
    raise AssertionError("unreachable")


def fit_into(image: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """``image`` (R, C) block-reduced until it fits ``shape``, with the lab's rules
    (``core.decimate``): the largest value of a block for uint8 Health codes (the most
    alarming category), the mean for floats (NaN and Inf stay visible)."""
    ky, kx = (math.ceil(n / m) for n, m in zip(image.shape, shape))
    if ky == 1 and kx == 1:
        return image
    if image.dtype == np.uint8:
        return block_max(image, ky, kx)
    return block_mean(image, ky, kx).astype(image.dtype)


class BackgroundWriter:
    """A RankWriter fed through a queue by a daemon thread, so that the file writes of a
    recorded step overlap the training loop instead of stalling it.

    ``bytes_written`` counts what was handed over (the budget's view); ``close()`` waits
    for every queued step, then marks the stream complete. An error in the thread is raised
    by the next ``append`` or by ``close``.
    """

    #: Steps that may wait in the queue before ``append`` blocks (back-pressure).
    QUEUE_STEPS = 32

    def __init__(self, writer: RankWriter) -> None:
        self.writer = writer
        self.meta = writer.meta
        self.bytes_written = 0
        self._queue: queue.Queue = queue.Queue(self.QUEUE_STEPS)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="gradviz-recording", daemon=True)
        self._thread.start()

    def set_tensors(self, names: list[str]) -> None:
        self.writer.set_tensors(names)  # before the first append: the thread is idle

    def append(self, step, loss, rows, images=None, first_nonfinite=None) -> None:
        self._raise_error()
        self.bytes_written += 16 + rows.size * 8
        self.bytes_written += sum(image.nbytes + 24 for image in (images or {}).values())
        self._queue.put((step, loss, rows, images, first_nonfinite))

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._raise_error()
        self.writer.close()

    def _drain(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self.writer.append(*item)
                except BaseException as exc:  # handed to the training thread
                    self._error = exc

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, OSError):
                raise GradvizError(f"Cannot write the recording ({error}).") from None
            raise error
