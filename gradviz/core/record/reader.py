"""Reading a recording, also while it is being written (``Reader.refresh`` sees new steps).

A reader trusts only what the writer's ``steps`` count covers (see ``writer``), so it never
reads a step whose data is missing, whether the writer is still running or was killed.
Everything returned is a numpy copy.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

from gradviz.core.errors import GradvizError
from gradviz.core.record import layout as L


def is_recording(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a gradviz recording directory (cheap: reads one small file)."""
    p = Path(path)
    if not (p / "zarr.json").is_file():
        return False
    try:
        return L.MARKER in zarr.open_group(p, mode="r").attrs
    except Exception:  # not a zarr group we can read: not ours
        return False


@dataclass(frozen=True)
class TensorSeries:
    """One watched tensor over the recorded steps (S of them).

    ``counts`` (S, 5) int64 in the order finite non-zero, zero, NaN, +Inf, -Inf;
    ``histogram`` (S, BINS) int64 in the layout's fixed bins; the norms (S,) float64.
    """

    name: str
    steps: np.ndarray
    grad_norm: np.ndarray
    max_abs: np.ndarray
    param_norm: np.ndarray
    update_norm: np.ndarray
    counts: np.ndarray
    histogram: np.ndarray


class RankStream:
    """The recorded steps of one rank. Read ``meta`` for what the writer said."""

    def __init__(self, group: zarr.Group) -> None:
        self._group = group
        self.meta: dict = dict(group.attrs[L.MARKER])

    @property
    def rank(self) -> int:
        return int(self.meta["rank"])

    @property
    def steps(self) -> int:
        """How many steps are recorded (and readable) so far."""
        return int(self.meta["steps"])

    @property
    def tensors(self) -> list[str]:
        return list(self.meta["tensors"])

    @property
    def complete(self) -> bool:
        return bool(self.meta["complete"])

    @property
    def first_nonfinite(self) -> dict | None:
        return self.meta["first_nonfinite"]

    def step_numbers(self) -> np.ndarray:
        """(S,) int64: the user's step number of each recorded step."""
        return self._index()[:, 0].astype(np.int64)

    def losses(self) -> np.ndarray:
        """(S,) float64: the loss of each recorded step (NaN where none was logged)."""
        return self._index()[:, 1].copy()

    def tensor(self, name: str) -> TensorSeries:
        """The statistics of one watched tensor over the recorded steps."""
        try:
            t = self.tensors.index(name)
        except ValueError:
            raise GradvizError(
                f"No tensor {name!r} in this recording; it holds: {', '.join(self.tensors)}."
            ) from None
        rows = self._group["stats"][: self.steps, t] if self.steps else np.zeros((0, L.ROW_WIDTH))
        hist = rows[:, len(L.STAT_COLUMNS) :].astype(np.int64)
        return TensorSeries(
            name=name,
            steps=self.step_numbers(),
            grad_norm=rows[:, 0],
            max_abs=rows[:, 1],
            param_norm=rows[:, 2],
            update_norm=rows[:, 3],
            counts=L.counts_from_histogram(hist),
            histogram=hist,
        )

    def image_names(self) -> list[str]:
        return list(self.meta["images"])

    def image_steps(self, name: str) -> np.ndarray:
        """(S_i,) int64: the step numbers at which image ``name`` was recorded."""
        count = self.meta["images"][name]["count"]
        return self._group[f"images/{name}/index"][:count, 0].astype(np.int64)

    def image(self, name: str, i: int) -> tuple[int, np.ndarray]:
        """(step, the i-th recorded image of ``name``, cropped to its recorded size)."""
        count = self.meta["images"][name]["count"]
        if not 0 <= i < count:
            raise IndexError(f"image {i} of {name!r}: {count} recorded")
        step, rows, cols = self._group[f"images/{name}/index"][i]
        return int(step), self._group[f"images/{name}/data"][i, :rows, :cols]

    def _index(self) -> np.ndarray:
        if not self.steps:
            return np.zeros((0, 2))
        return self._group["index"][: self.steps]


class Reader:
    """A recording on disk, by rank; ``refresh()`` picks up what a running writer added.

    >>> rec = Reader("run1")
    >>> rec.ranks, rec.rank(0).steps, rec.rank(0).tensor("pred_coordinates").counts
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not is_recording(self.path):
            raise GradvizError(
                f"{str(self.path)!r} is not a gradviz recording (a directory written by "
                "gradviz.watch or gradviz fit --record)."
            )
        self._streams: dict[int, RankStream] = {}
        self.refresh()

    def refresh(self) -> bool:
        """Re-read the metadata of every rank; True when a step or a rank was added or a
        stream was completed since the last call."""
        before = {r: (s.steps, s.complete) for r, s in self._streams.items()}
        streams = {}
        for group in self._rank_groups():
            if L.MARKER in group.attrs:
                stream = RankStream(group)
                streams[stream.rank] = stream
        self._streams = dict(sorted(streams.items()))
        return before != {r: (s.steps, s.complete) for r, s in self._streams.items()}

    def _rank_groups(self) -> list:
        """The rank groups written so far, found from the directory itself: zarr's own
        listing of members also meets a writer's half-written metadata files (its atomic
        ``*.partial`` temporaries, left behind by a writer that was killed)."""
        groups = []
        for name in sorted(os.listdir(self.path)):
            folder = Path(self.path) / name
            if not (name.startswith(L.RANK_PREFIX) and (folder / "zarr.json").is_file()):
                continue
            try:
                groups.append(zarr.open_group(folder, mode="r"))
            except (OSError, ValueError):  # a rank whose metadata is still being written
                continue
        return groups

    @property
    def ranks(self) -> list[int]:
        return list(self._streams)

    def rank(self, rank: int = 0) -> RankStream:
        try:
            return self._streams[rank]
        except KeyError:
            raise GradvizError(
                f"No rank {rank} in {str(self.path)!r}; it holds ranks {self.ranks}."
            ) from None

    def first_nonfinite(self) -> dict | None:
        """The earliest first non-finite gradient over all ranks (with its ``rank``)."""
        found = [
            {**s.first_nonfinite, "rank": r}
            for r, s in self._streams.items()
            if s.first_nonfinite is not None
        ]
        return min(found, key=lambda f: (f["step"], f["rank"])) if found else None

    def describe(self) -> dict:
        """The summary ``gradviz inspect --json`` prints."""
        streams = list(self._streams.values())
        tensors: list[str] = []
        for s in streams:
            tensors += [t for t in s.tensors if t not in tensors]
        last = [s.meta["last_step"] for s in streams if s.meta["last_step"] is not None]
        first = self.first_nonfinite()
        return {
            "kind": "recording",
            "path": str(self.path),
            "source": streams[0].meta["source"] if streams else None,
            "steps": max((s.steps for s in streams), default=0),
            "last_step": max(last) if last else None,
            "complete": bool(streams) and all(s.complete for s in streams),
            "ranks": self.ranks,
            "tensors": tensors,
            "images": sorted({n for s in streams for n in s.image_names()}),
            "first_nonfinite": None
            if first is None
            else {
                k: first[k]
                for k in ("step", "tensor", "index", "kind", "rank", "origin")
                if k in first
            },
            "bytes": _size_on_disk(self.path),
        }


#: What ``summary()["first_nonfinite"]`` holds ("origin": watch's module-level origin).
_FIRST_KEYS = ("step", "tensor", "index", "kind", "rank", "origin")


def _size_on_disk(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            # A writer's temporary file may vanish while we walk.
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(folder, name)).st_size
    return total
