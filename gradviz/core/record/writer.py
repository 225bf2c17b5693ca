"""Writing one rank's stream of a recording: zarr v3 arrays, appended step by step.

A recording is a directory (any name) holding a zarr v3 group; each rank writes its own
child group ``rank<r>``, so ranks never touch each other's files. Per rank:

- ``index`` (S, 2) float64: [step number, loss] per recorded step;
- ``stats`` (S, T, ROW_WIDTH) float64: per watched tensor the layout's statistics and
  histogram (see ``layout``);
- ``images/<name>/data`` (S_i, H, W) and ``images/<name>/index`` (S_i, 3) int64 [step, rows,
  cols]: per-entry pictures (health codes of a watched matrix, a fit's distance matrices),
  downsampled, padded where a later matrix is smaller than the first;
- ``scalars/s<k>`` (S_k, 2) float64 [step, value]: named numbers logged at every step
  (``rec.log(loss=..., lr=...)``), NaN and Inf kept; the metadata's ``scalars`` maps each
  name to its array (any name: "train/loss" too) and its count;
- ``wall_time`` (S_w, 2) float64 [step, Unix time in s]: when each step was logged (the
  metadata's ``wall_time`` holds its count; a recording made before it has neither, and is
  then shown by step only).

``index`` and ``stats`` hold ``STEP_CHUNK`` steps a chunk (a chunk is written again, whole,
from the writer's copy, while it fills: the rows already in it never change, except the
last row's update norms, NaN until the next step measures them when the step was written
before it came, see ``sink``), images one
step a chunk. Arrays grow by doubling their capacity (a metadata write). Steps are written
in batches (the steps handed over since the last write, see ``BackgroundWriter``), one write
per array and chunk and one metadata write per batch. The group's attribute ``gradviz``
holds the metadata, and its ``steps`` count is written after the data of those steps: a
reader trusts only the first ``steps`` rows, so it never sees a step whose data is missing.
zarr's local store writes each file atomically (a temporary file, then a rename), so a
writer killed at any moment leaves a recording that opens up to its last complete step.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

from gradviz.core.common.decimate import block_max, block_mean
from gradviz.core.common.errors import GradvizError
from gradviz.core.record import layout as L

_INITIAL_CAPACITY = 64
#: Steps per chunk of ``index`` and ``stats``: a batch of steps is one file write per array.
STEP_CHUNK = 16
#: Rows per chunk of a logged scalar's array (logged every step, so longer chunks).
SCALAR_CHUNK = 256


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
            "ended": None,
            "first_nonfinite": None,
            "images": {},
            "scalars": {},
            "skipped": [],
            **(meta or {}),
        }
        self.steps = 0
        self._index = self._stats = None
        self._tail: tuple[np.ndarray, np.ndarray] | None = None  # the last chunk's rows
        self._images: dict[str, tuple[zarr.Array, zarr.Array]] = {}
        self._scalars: dict[str, _TailedArray] = {}
        self._times: _TailedArray | None = None
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
        self.append_many([(step, loss, rows, images, first_nonfinite)])

    def append_many(self, items: list[tuple]) -> None:
        """Write recorded steps, each ``(step, loss, rows, images, first_nonfinite)`` as
        ``append`` takes them, with one write per array and one metadata update."""
        if not items:
            return
        if self._stats is None:
            self._create_step_arrays()
        i, n = self.steps, len(items)
        self._grow(self._index, i + n - 1)  # capacities stay multiples of STEP_CHUNK
        self._grow(self._stats, i + n - 1)
        for k, (step, loss, rows, *_) in enumerate(items):
            at = (i + k) % STEP_CHUNK
            if at == 0:  # a new chunk: the arrays' fill value where no step is yet
                self._tail = (
                    np.full((STEP_CHUNK, 2), math.nan),
                    np.full((STEP_CHUNK, *self._stats.shape[1:]), math.nan),
                )
            self._tail[0][at] = step, loss
            self._tail[1][at] = rows
            if at == STEP_CHUNK - 1 or k == n - 1:  # the chunk is full, or the batch ends
                self._write_tail(i + k - at)
        for step, _, _rows, images, first_nonfinite in items:
            for name, image in (images or {}).items():
                self._append_image(name, step, np.asarray(image))
            if first_nonfinite is not None and self.meta["first_nonfinite"] is None:
                self.meta["first_nonfinite"] = first_nonfinite
        self.steps = i + n
        self.meta["steps"] = self.steps
        self.meta["last_step"] = int(items[-1][0])
        self._publish()  # last: the data of every counted step is already on disk

    def append_scalars(
        self, values: dict[str, np.ndarray], publish: bool = True, times: np.ndarray | None = None
    ) -> None:
        """Write logged scalars: name -> (k, 2) float64 rows [step, value], in step order,
        and ``times`` (k', 2) [step, Unix time] of the logged steps."""
        if times is not None and len(times):
            if self._times is None:
                array = self._array(
                    self.group, "wall_time", (2,), np.float64, math.nan, SCALAR_CHUNK
                )
                self._times = _TailedArray(array)
            self._times.extend(np.asarray(times, dtype=np.float64).reshape(-1, 2))
            self.meta["wall_time"] = {"count": self._times.count}
        for name, rows in values.items():
            array = self._scalars.get(name)
            if array is None:
                key = f"s{len(self._scalars)}"
                group = self.group.require_group("scalars")
                array = _TailedArray(
                    self._array(group, key, (2,), np.float64, math.nan, SCALAR_CHUNK)
                )
                self._scalars[name] = array
                self.meta["scalars"][name] = {"key": key, "count": 0}
            array.extend(np.asarray(rows, dtype=np.float64).reshape(-1, 2))
            self.meta["scalars"][name]["count"] = array.count
        if publish and (values or times is not None):
            self._publish()

    def add_skip(self, entry: dict, publish: bool = True) -> None:
        """Note a step GradScaler skipped: {"step", "scale", "new_scale"}."""
        self.meta.setdefault("skipped", []).append(entry)
        if publish:
            self._publish()

    def publish(self) -> None:
        """Write the metadata (after the data it counts)."""
        self._publish()

    def _write_tail(self, start: int) -> None:
        """Write the chunk of ``index`` and ``stats`` that begins at row ``start`` whole
        (zarr then writes it without reading it back)."""
        index, stats = self._tail
        self._index[start : start + STEP_CHUNK] = index
        self._stats[start : start + STEP_CHUNK] = stats

    def set_tensors(self, names: list[str]) -> None:
        """Name the rows of ``stats``; only before the first step is written."""
        if self._stats is not None:
            raise GradvizError("The watched tensors are fixed once steps are recorded.")
        self.tensors = list(names)
        self.meta["tensors"] = self.tensors

    def amend(self, step: int, loss=None, norms=None, images=None) -> None:
        """Complete the last written step, ``step``, written before all of it was known:
        its ``loss``, its update norms (T,) (its chunks are written again, whole, from the
        writer's copy) and its ``images``. None leaves a part as it is."""
        if self._tail is None or not self.steps:
            return
        last = self.steps - 1
        at = last % STEP_CHUNK
        if int(self._tail[0][at, 0]) != step:
            return
        if loss is not None:
            self._tail[0][at, 1] = loss
        if norms is not None:
            self._tail[1][at, :, L.STAT_COLUMNS.index("update_norm")] = norms
        if loss is not None or norms is not None:
            self._write_tail(last - at)
        for name, image in (images or {}).items():
            self._append_image(name, step, np.asarray(image))
        if images:
            self._publish()

    def close(self, ended: str = "close") -> None:
        """Mark the stream complete (a reader then knows no step is missing at the end);
        ``ended`` says how: "close", "exit", "exception", "SIGTERM" or "collected" (the
        recorder was dropped without close())."""
        self.meta["complete"] = True
        self.meta["ended"] = ended
        self._publish()

    # ---- internals -----------------------------------------------------------------------------
    def _publish(self) -> None:
        self.group.attrs[L.MARKER] = self.meta

    def _create_step_arrays(self) -> None:
        width = (len(self.tensors), L.ROW_WIDTH)
        self._index = self._array(self.group, "index", (2,), np.float64, math.nan, STEP_CHUNK)
        self._stats = self._array(self.group, "stats", width, np.float64, math.nan, STEP_CHUNK)

    @staticmethod
    def _array(group, name: str, row_shape: tuple, dtype, fill, steps: int = 1) -> zarr.Array:
        return group.create_array(
            name,
            shape=(_INITIAL_CAPACITY, *row_shape),
            chunks=(steps, *row_shape),
            dtype=dtype,
            fill_value=fill,
        )

    @staticmethod
    def _grow(array: zarr.Array, row: int) -> None:
        """Double the capacity when ``row`` does not fit (rewrites metadata only); it stays
        a multiple of the chunk length."""
        capacity, chunk = array.shape[0], array.chunks[0]
        if row >= capacity:
            needed = -(-(row + 1) // chunk) * chunk
            array.resize((max(needed, 2 * capacity), *array.shape[1:]))

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
        info["count"] = i + 1


class _TailedArray:
    """An append-only (capacity, *row) zarr array whose last, filling chunk is kept in memory
    and written whole (zarr then writes it without reading it back)."""

    def __init__(self, array: zarr.Array) -> None:
        self.array = array
        self.count = 0
        self._tail = np.full(array.chunks, math.nan)

    def extend(self, rows: np.ndarray) -> None:
        chunk = self.array.chunks[0]
        RankWriter._grow(self.array, self.count + len(rows) - 1)
        for row in rows:
            at = self.count % chunk
            if at == 0:
                self._tail = np.full(self.array.chunks, math.nan)
            self._tail[at] = row
            self.count += 1
            if at == chunk - 1:
                self._write(self.count - chunk)
        if self.count % chunk:
            self._write(self.count - self.count % chunk)

    def _write(self, start: int) -> None:
        self.array[start : start + self.array.chunks[0]] = self._tail


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


@dataclass(frozen=True)
class _Amend:
    """What became known of step ``step`` after it was handed over: its loss, its update
    norms (T,), pictures attached to it."""

    step: int
    loss: float | None = None
    norms: np.ndarray | None = None
    images: dict | None = None


class BackgroundWriter:
    """A RankWriter fed through a queue by a daemon thread, so that the file writes of a
    recorded step overlap the training loop instead of stalling it.

    The thread writes at most once per ``FLUSH_S``: a step handed over sooner after the
    last write waits for the steps that follow it until then, and they are written
    together (each zarr write costs about half a millisecond of CPU time whatever its
    size). A step that comes after a quiet spell is written at once.

    ``bytes_written`` counts what was handed over (the budget's view); ``close()`` waits
    for every queued step, then marks the stream complete. An error in the thread is raised
    by the next ``append`` or by ``close``.
    """

    #: Steps that may wait in the queue before ``append`` blocks (back-pressure).
    QUEUE_STEPS = 32
    #: Least time between two writes (s); a reader sees a step at most about this late.
    FLUSH_S = 0.25
    #: Most steps written together (held in memory meanwhile, like the queue's).
    BATCH_STEPS = QUEUE_STEPS

    def __init__(self, writer: RankWriter) -> None:
        self.writer = writer
        self.meta = writer.meta
        self.bytes_written = 0
        self._queue: queue.Queue = queue.Queue(self.QUEUE_STEPS)
        self._held: list | None = None  # items handed over inside ``together``
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="gradviz-recording", daemon=True)
        self._thread.start()

    def set_tensors(self, names: list[str]) -> None:
        self.writer.set_tensors(names)  # before the first append: the thread is idle

    def append(self, step, loss, rows, images=None, first_nonfinite=None) -> None:
        self._raise_error()
        self.bytes_written += 16 + rows.size * 8
        self.bytes_written += sum(image.nbytes + 24 for image in (images or {}).values())
        self._put((step, loss, rows, images, first_nonfinite))

    def append_scalars(self, values: dict[str, np.ndarray], times: np.ndarray | None = None):
        """Hand over logged scalars (name -> (k, 2) rows [step, value]) and the logged
        steps' wall times ((k', 2) [step, Unix time]) to be written."""
        self._raise_error()
        self.bytes_written += sum(rows.size * 8 for rows in values.values())
        self.bytes_written += 0 if times is None else times.size * 8
        self._put(_Scalars(values, times))

    def set_meta_once(self, key: str, value) -> None:
        """Hand over a metadata entry that is written once (later ones are ignored)."""
        self._raise_error()
        self._put(_SetMeta(key, value))

    def append_skip(self, entry: dict) -> None:
        """Hand over a step GradScaler skipped (see ``RankWriter.add_skip``)."""
        self._raise_error()
        self.bytes_written += 64
        self._put(_Skipped(entry))

    def amend(self, step: int, loss=None, norms=None, images=None) -> None:
        """Queued after the step it completes (see ``RankWriter.amend``)."""
        self._raise_error()
        self._put(_Amend(step, loss, norms, images))

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """What is handed over inside the block reaches the thread at once, as the block
        ends: written in one batch (a recorded step and the scalars logged up to it: one
        metadata write, not one each as they happen to arrive)."""
        if self._held is not None:  # inside another block already: its end hands it over
            yield
            return
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            if held:
                self._queue.put(held)

    def _put(self, item) -> None:
        if self._held is not None:
            self._held.append(item)
        else:
            self._queue.put(item)

    def close(self, ended: str = "close") -> None:
        self._queue.put(None)
        self._thread.join()
        self._raise_error()
        self.writer.close(ended)

    def _drain(self) -> None:
        last_write = -math.inf
        while True:
            batch = _items(self._queue.get())
            due = last_write + self.FLUSH_S
            while batch[-1] is not None and len(batch) < self.BATCH_STEPS:
                try:
                    batch += _items(self._queue.get(timeout=max(0.0, due - time.monotonic())))
                except queue.Empty:
                    break
            done = batch[-1] is None
            items = batch[:-1] if done else batch
            if items and self._error is None:
                try:
                    self._write(items)
                except BaseException as exc:  # handed to the training thread
                    self._error = exc
            last_write = time.monotonic()
            if done:
                return

    def _write(self, items: list) -> None:
        """Steps in batches, amendments in their place between them; scalars, skipped steps
        and metadata entries before the last metadata write, which then counts them."""
        steps: list[tuple] = []
        scalars: dict[str, list[np.ndarray]] = {}
        times: list[np.ndarray] = []
        noted = False  # anything the metadata must be written again for
        for item in items:
            if isinstance(item, tuple):
                steps.append(item)
            elif isinstance(item, _Amend):
                self.writer.append_many(steps)
                steps = []
                self.writer.amend(item.step, item.loss, item.norms, item.images)
            else:
                noted = True
                self._note(item, scalars, times)
        if scalars or times:
            merged = {name: np.concatenate(parts) for name, parts in scalars.items()}
            all_times = np.concatenate(times) if times else None
            self.writer.append_scalars(merged, publish=False, times=all_times)
        if steps:
            self.writer.append_many(steps)
        elif noted:
            self.writer.publish()

    def _note(self, item, scalars: dict[str, list[np.ndarray]], times: list) -> None:
        """A queue item that is not a step: scalars are gathered (one write per array)."""
        if isinstance(item, _Scalars):
            for name, rows in item.values.items():
                scalars.setdefault(name, []).append(rows)
            if item.times is not None:
                times.append(item.times)
        elif isinstance(item, _Skipped):
            self.writer.add_skip(item.entry, publish=False)
        elif isinstance(item, _SetMeta) and self.writer.meta.get(item.key) is None:
            self.writer.meta[item.key] = item.value

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, OSError):
                raise GradvizError(f"Cannot write the recording ({error}).") from None
            raise error


def _items(got) -> list:
    """The items of one hand-over (a list from ``together``, else one item)."""
    return got if isinstance(got, list) else [got]


class _Scalars:
    """A queue item of logged scalars (steps are plain tuples)."""

    __slots__ = ("values", "times")

    def __init__(self, values: dict[str, np.ndarray], times: np.ndarray | None = None) -> None:
        self.values, self.times = values, times


class _Skipped:
    """A queue item: a step GradScaler skipped."""

    __slots__ = ("entry",)

    def __init__(self, entry: dict) -> None:
        self.entry = entry


class _SetMeta:
    """A queue item: a metadata entry written once."""

    __slots__ = ("key", "value")

    def __init__(self, key: str, value) -> None:
        self.key, self.value = key, value
