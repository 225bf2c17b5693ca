"""Reading a recording, also while it is being written (``Reader.refresh`` sees new steps).

A reader trusts only what the writer's ``steps`` count covers (see ``writer``), so it never
reads a step whose data is missing, whether the writer is still running or was killed.
What was lost afterwards (chunk files deleted or truncated, an array folder gone,
metadata disagreeing with the arrays) is named by ``damaged()`` and never read as data:
a step whose index row is lost is left out, one whose statistics are lost is flagged in
``TensorSeries.missing``. Everything returned is a numpy copy.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gradviz.core.common.errors import GradvizError
from gradviz.core.record import layout as L
from gradviz.core.record.damage import (
    Damage,
    check_images,
    check_scalars,
    check_stream,
    read_rows,
)
from gradviz.core.record.rank_ends import RankEnd, qualified, rank_ends
from gradviz.core.record.summary import RecordingSummary, summarise

if TYPE_CHECKING:
    import zarr


def is_recording(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a gradviz recording directory (cheap: reads one small file)."""
    p = Path(path)
    if not (p / "zarr.json").is_file():
        return False
    import zarr  # here, not at import: the app asks before any recording is opened

    try:
        return L.MARKER in zarr.open_group(p, mode="r").attrs
    except Exception:  # not a zarr group we can read: not ours
        return False


@dataclass(frozen=True)
class TensorSeries:
    """One watched tensor over the recorded steps (S of them).

    ``counts`` (S, 5) int64 in the order finite non-zero, zero, NaN, +Inf, -Inf;
    ``histogram`` (S, BINS) int64 in the layout's fixed bins; the norms (S,) float64;
    ``missing`` (S,) bool: the step's statistics are lost (damage; counts 0, norms NaN).
    """

    name: str
    steps: np.ndarray
    grad_norm: np.ndarray
    max_abs: np.ndarray
    param_norm: np.ndarray
    update_norm: np.ndarray
    counts: np.ndarray
    histogram: np.ndarray
    missing: np.ndarray


#: Metadata keys a rank's stream cannot be read without.
_REQUIRED = ("rank", "steps", "tensors", "complete", "last_step", "first_nonfinite", "images")


@dataclass(frozen=True)
class ScalarSeries:
    """One logged scalar: ``steps`` (K,) int64 and ``values`` (K,) float64, NaN and Inf
    kept as logged."""

    name: str
    steps: np.ndarray
    values: np.ndarray


class RankStream:
    """The recorded steps of one rank. Read ``meta`` for what the writer said."""

    def __init__(self, group: zarr.Group) -> None:
        self._group = group
        self.meta: dict = dict(group.attrs[L.MARKER])
        missing = [key for key in _REQUIRED if key not in self.meta]
        if missing:
            raise GradvizError(f"its metadata lacks {', '.join(missing)}")
        self._checked: tuple | None = None  # (index, stats, usable index rows, valid, damage)
        self._images: tuple | None = None
        self._scalars: tuple | None = None

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
        """(S,) int64: the user's step number of each recorded step (a step whose index
        row is lost is left out: see ``damaged``)."""
        index, valid = self._index()
        return index[valid, 0].astype(np.int64)

    def losses(self) -> np.ndarray:
        """(S,) float64: the loss of each recorded step (NaN where none was logged)."""
        index, valid = self._index()
        return index[valid, 1].copy()

    def damaged(self) -> list[Damage]:
        """What this stream lost after it was written (empty when whole)."""
        found = list(self._check()[3]) + list(self._check_images()[1])
        return found + list(self._check_scalars()[1])

    def tensor(self, name: str) -> TensorSeries:
        """The statistics of one watched tensor over the recorded steps."""
        try:
            t = self.tensors.index(name)
        except ValueError:
            raise GradvizError(
                f"No tensor {name!r} in this recording; it holds: {', '.join(self.tensors)}."
            ) from None
        _, stats, valid, _ = self._check()
        rows = stats[valid, t]
        hist_floats = rows[:, len(L.STAT_COLUMNS) :]
        missing = np.isnan(hist_floats).any(axis=1)
        hist = np.where(missing[:, None], 0.0, hist_floats).astype(np.int64)
        return TensorSeries(
            name=name,
            steps=self.step_numbers(),
            grad_norm=rows[:, 0].copy(),
            max_abs=rows[:, 1].copy(),
            param_norm=rows[:, 2].copy(),
            update_norm=rows[:, 3].copy(),
            counts=L.counts_from_histogram(hist),
            histogram=hist,
            missing=missing,
        )

    @property
    def skipped(self) -> list[dict]:
        """Steps GradScaler skipped, each {"step", "scale", "new_scale"} (not failures: the
        scaled gradients overflowed and the scaler lowered its scale)."""
        return [dict(entry) for entry in self.meta.get("skipped", [])]

    def scalar_names(self) -> list[str]:
        """The names logged with ``rec.log`` (a recording made before scalars were
        recorded at every step has only its recorded steps' ``loss``)."""
        if "scalars" in self.meta:
            return list(self.meta["scalars"])
        return ["loss"] if self.steps and not np.isnan(self.losses()).all() else []

    def scalar(self, name: str) -> ScalarSeries:
        """A logged scalar at every step it was logged."""
        info = self.meta.get("scalars", {}).get(name)
        if info is None:
            if name == "loss" and "scalars" not in self.meta:  # an older recording
                return ScalarSeries(name, self.step_numbers(), self.losses())
            names = ", ".join(self.scalar_names()) or "none"
            raise GradvizError(f"No scalar {name!r} in this recording; it holds: {names}.")
        rows = self._check_scalars()[0][name]  # rows that cannot be read left out
        return ScalarSeries(name, rows[:, 0].astype(np.int64), rows[:, 1].copy())

    def wall_times(self) -> ScalarSeries | None:
        """When each step was logged: ``values`` (K,) Unix time in seconds at ``steps`` (K,);
        None for a recording made before wall times were recorded (rows that cannot be read
        are left out, as a scalar's)."""
        info = self.meta.get("wall_time")
        if info is None:
            return None
        rows, _ = read_rows(self._group, "wall_time", int(info.get("count", 0)), (2,))
        rows = rows[~np.isnan(rows[:, 0])]
        return ScalarSeries("wall_time", rows[:, 0].astype(np.int64), rows[:, 1].copy())

    def image_names(self) -> list[str]:
        return list(self.meta["images"])

    def image_steps(self, name: str) -> np.ndarray:
        """(S_i,) int64: the step numbers at which image ``name`` was recorded (those
        whose index row is readable)."""
        return self._check_images()[0][name][1][:, 0].copy()

    def image(self, name: str, i: int) -> tuple[int, np.ndarray]:
        """(step, the i-th readable image of ``name``, cropped to its recorded size).
        GradvizError where the image's own file cannot be read."""
        rows_at, index = self._check_images()[0][name]
        if not 0 <= i < len(index):
            raise IndexError(f"image {i} of {name!r}: {len(index)} readable")
        step, rows, cols = (int(v) for v in index[i])
        try:
            return step, self._group[f"images/{name}/data"][int(rows_at[i]), :rows, :cols]
        except Exception:  # a truncated or deleted chunk, a missing array
            raise GradvizError(
                f"The {name} image of step {step} (rank {self.rank}) cannot be read."
            ) from None

    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        index, _, valid, _ = self._check()
        return index, valid

    def _check(self) -> tuple:
        """(index (S, 2), stats (S, T, ROW_WIDTH), valid (S,) bool, damage), read once."""
        if self._checked is None:
            index, stats, damage = check_stream(self._group, self.meta)
            self._checked = (index, stats, ~np.isnan(index[:, 0]), tuple(damage))
        return self._checked

    def _check_scalars(self) -> tuple:
        """(name -> readable rows (K, 2) [step, value], damage), read once."""
        if self._scalars is None:
            usable, damage = check_scalars(self._group, self.meta)
            self._scalars = (usable, tuple(damage))
        return self._scalars

    def _check_images(self) -> tuple:
        if self._images is None:
            usable, damage = check_images(self._group, self.meta)
            self._images = (usable, tuple(damage))
        return self._images


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
        self._unreadable: list[Damage] = []  # rank folders whose metadata cannot be read
        self.refresh()

    def refresh(self) -> bool:
        """Re-read the metadata of every rank; True when a step, a logged scalar or a rank
        was added or a stream was completed since the last call."""
        before = {r: _growth(s) for r, s in self._streams.items()}
        streams, unreadable = {}, []
        self._unreadable = unreadable  # _rank_groups adds to it
        for name, group in self._rank_groups():
            try:
                if L.MARKER not in group.attrs:
                    continue  # a rank whose writer is still starting
                stream = RankStream(group)
            except Exception as exc:  # any unreadable metadata is damage
                rank = _rank_of(name)
                why = str(exc) if isinstance(exc, GradvizError) else "it cannot be read"
                unreadable.append(Damage(rank, "metadata", (), f"{name}'s metadata: {why}."))
                continue
            streams[stream.rank] = stream
        self._streams = dict(sorted(streams.items()))
        return before != {r: _growth(s) for r, s in self._streams.items()}

    def _rank_groups(self) -> list:
        """The rank groups written so far, found from the directory itself: zarr's own
        listing of members also meets a writer's half-written metadata files (its atomic
        ``*.partial`` temporaries, left behind by a writer that was killed)."""
        import zarr  # see is_recording

        groups = []
        for name in sorted(os.listdir(self.path)):
            folder = Path(self.path) / name
            if not (name.startswith(L.RANK_PREFIX) and (folder / "zarr.json").is_file()):
                continue
            try:
                groups.append((name, zarr.open_group(folder, mode="r")))
            except (OSError, ValueError):  # zarr writes metadata atomically: this is damage
                self._unreadable.append(
                    Damage(_rank_of(name), "metadata", (), f"{name}/zarr.json cannot be read.")
                )
        return groups

    @property
    def ranks(self) -> list[int]:
        return list(self._streams)

    def rank(self, rank: int = 0) -> RankStream:
        try:
            return self._streams[rank]
        except KeyError:
            if not self._streams:  # a writer's first moments, or rank folders removed
                raise GradvizError(
                    f"{str(self.path)!r} holds no rank's steps: its writer has only just "
                    "started, or its rank folders are gone. Open it again once training has "
                    "logged a step."
                ) from None
            raise GradvizError(
                f"No rank {rank} in {str(self.path)!r}; it holds ranks {self.ranks}."
            ) from None

    def damaged(self, ranks: Iterable[int] | None = None) -> list[Damage]:
        """Everything found lost in the recording, by rank (empty when it is whole);
        ``ranks``: only these ranks' streams are checked (reading all their statistics),
        None: every rank's. Metadata that cannot be read is always named."""
        found = list(self._unreadable)
        wanted = None if ranks is None else set(ranks)
        for rank, stream in self._streams.items():
            if wanted is None or rank in wanted:
                found += stream.damaged()
        return sorted(found, key=lambda d: d.rank)

    def rank_ends(self) -> list[RankEnd]:
        """Where each rank's records end, every rank of the world (see ``rank_ends``)."""
        metas = {r: s.meta for r, s in self._streams.items()}
        return rank_ends(metas, {d.rank for d in self._unreadable if d.rank >= 0})

    def first_nonfinite(self) -> dict | None:
        """The earliest first non-finite gradient over all ranks, with its ``rank`` and
        ``ranks`` (every rank non-finite at that step), where every rank's records reach
        that step; None where they reach their ends and none is non-finite.

        Where a rank's records end before that step (a rank killed, or still being
        written), no step or rank is claimed: ``step``, ``rank`` and the rest are None,
        ``not_known`` says whose records end where ("rank 1's records end at step 80; from
        step 81 on only rank 0 is known") and ``seen`` holds what the other ranks show.

        Under DDP with gradviz's communication hook each rank also recorded when its own
        gradients, before the all-reduce, first went non-finite: then ``rank`` is the first
        rank whose local gradients did (lowest step, then lowest rank) and ``ranks`` those
        whose local gradients were non-finite at that step, where the reduced gradients
        of every rank are. Without it (or for a recording from before), the reduced ones."""
        return qualified(self._first_seen(), self.rank_ends())

    def _first_seen(self) -> dict | None:
        """The earliest first non-finite gradient of the ranks' streams as they are."""
        local = {
            r: s.meta["local_first_nonfinite"]
            for r, s in self._streams.items()
            if s.meta.get("local_first_nonfinite") is not None
        }
        if local:
            step = min(f["step"] for f in local.values())
            ranks = sorted(r for r, f in local.items() if f["step"] == step)
            own = local[ranks[0]]
            reduced = self._streams[ranks[0]].first_nonfinite or {}
            first = {
                "step": step,
                "tensor": own.get("tensor") or reduced.get("tensor"),
                "index": own.get("index") if own.get("tensor") else None,
                "kind": own.get("kind") or reduced.get("kind"),
            }
            return {**first, "rank": ranks[0], "ranks": ranks, "before_reduction": True}
        found = [
            {**s.first_nonfinite, "rank": r}
            for r, s in self._streams.items()
            if s.first_nonfinite is not None
        ]
        if not found:
            return None
        first = min(found, key=lambda f: (f["step"], f["rank"]))
        ranks = sorted(f["rank"] for f in found if f["step"] == first["step"])
        return {**first, "ranks": ranks, "before_reduction": False}

    def summary(self, check: Iterable[int] | None = None) -> RecordingSummary:
        """The recording as it stands, summarised once (``summary.RecordingSummary``): what
        ``gradviz inspect`` prints and the pages read. ``check``: the ranks whose streams
        are checked for lost data (None: every rank; see ``summarise``)."""
        return summarise(self, check)

    def describe(self) -> dict:
        """The summary ``gradviz inspect --json`` prints (``RecordingSummary.to_dict``): the
        recording as a whole, then ``per_rank`` (each rank's own counts, never mixed),
        ``damaged`` (what is lost, empty when whole), ``ranks_ending_early`` (the ranks
        whose records end before another rank's last step, each with a reason; empty when
        every rank's reach it) and ``ranks_known`` (which ranks are known from which step
        on, "" when all are); ``complete`` is false where either list is not empty."""
        return self.summary().to_dict()


def _growth(stream: RankStream) -> tuple:
    """What grows while a writer runs: the steps, each scalar's count, completion."""
    scalars = tuple((n, i.get("count")) for n, i in stream.meta.get("scalars", {}).items())
    return stream.steps, stream.complete, scalars


def _rank_of(folder_name: str) -> int:
    """The rank a ``rank<r>`` folder is named for (-1 where the name holds no number)."""
    digits = folder_name[len(L.RANK_PREFIX) :]
    return int(digits) if digits.isdigit() else -1
