"""Checking what a rank's stream holds against what its metadata says.

A recording can be damaged after it was written: chunk files deleted or truncated, a whole
array folder gone, metadata that disagrees with the arrays. zarr reads a missing chunk as
the array's fill value (NaN for ``index`` and ``stats``), so without a check a missing step
reads as step ``NaN`` (``-9223372036854775808`` once cast to int64) with NaN statistics,
drawn as if it were data. Here every array is read chunk by chunk where a whole read fails,
and each problem is named: which array, which recorded steps, and why.

A written row is never NaN where the check looks: a step number is a number, and a
histogram holds counts. (Image chunks equal to their fill value are legitimately not
written by zarr, so a missing image file is not damage; an unreadable one is.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gradviz.core.record import layout as L


@dataclass(frozen=True)
class Damage:
    """One damaged part of a rank's stream: ``what`` (an array: "index", "stats",
    "images/<name>", "scalars/<name>"; or "metadata"), the recorded steps it loses as inclusive
    ``[first, last]`` ranges of step numbers, and a sentence saying why."""

    rank: int
    what: str
    missing_steps: tuple[tuple[int, int], ...]
    reason: str

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "what": self.what,
            "missing_steps": [list(r) for r in self.missing_steps],
            "reason": self.reason,
        }


if TYPE_CHECKING:  # a group is handed in: zarr is imported where one is opened
    import zarr


def read_rows(group: zarr.Group, name: str, count: int, row_shape: tuple) -> tuple:
    """The first ``count`` rows of array ``name`` (float64, NaN where unreadable), and a
    sentence for each problem found (none: whole). A missing array reads as all NaN."""
    out = np.full((count, *row_shape), math.nan)
    if not count:
        return out, []
    try:
        array = group[name]
    except KeyError:
        return out, [f"the array {name!r} is missing"]
    except (OSError, ValueError):  # its zarr.json is not valid
        return out, [f"the metadata of the array {name!r} cannot be read"]
    problems = []
    if tuple(array.shape[1:]) != tuple(row_shape):
        return out, [
            f"{name!r} has rows of shape {tuple(array.shape[1:])}, the metadata "
            f"says {tuple(row_shape)}"
        ]
    available = min(count, array.shape[0])
    if available < count:
        problems.append(f"{name!r} holds {array.shape[0]} rows, the metadata counts {count}")
    try:
        out[:available] = array[:available]
        return out, problems
    except Exception:  # a truncated or corrupt chunk: read the others one by one
        pass
    chunk = array.chunks[0]
    bad = 0
    for start in range(0, available, chunk):
        stop = min(start + chunk, available)
        try:
            out[start:stop] = array[start:stop]
        except Exception:
            bad += 1
    problems.append(f"{bad} chunk file(s) of {name!r} cannot be decoded (truncated or corrupt)")
    return out, problems


def missing_ranges(steps: np.ndarray, missing: np.ndarray, last_step: int | None) -> tuple:
    """Inclusive ``(first, last)`` step-number ranges of the rows flagged ``missing``.

    ``steps`` (S,) float64 step numbers, NaN where the index itself is lost: such a row's
    number is bounded by its readable neighbours (the range then spans every step number
    between them, the most that can be missing)."""
    ranges = []
    s = len(steps)
    i = 0
    while i < s:
        if not missing[i]:
            i += 1
            continue
        j = i
        while j + 1 < s and missing[j + 1]:
            j += 1
        first, last = steps[i], steps[j]
        if math.isnan(first):
            before = _known_before(steps, i)
            first = 0 if before is None else before + 1
        if math.isnan(last):
            after = _known_after(steps, j)
            fallback = first if last_step is None else last_step
            last = after - 1 if after is not None else fallback
        ranges.append((int(first), int(max(first, last))))
        i = j + 1
    return tuple(ranges)


def _known_before(steps: np.ndarray, i: int) -> int | None:
    known = steps[:i][~np.isnan(steps[:i])]
    return int(known[-1]) if len(known) else None


def _known_after(steps: np.ndarray, j: int) -> int | None:
    known = steps[j + 1 :][~np.isnan(steps[j + 1 :])]
    return int(known[0]) if len(known) else None


def check_stream(group: zarr.Group, meta: dict) -> tuple[np.ndarray, np.ndarray, list[Damage]]:
    """Read and check one rank's ``index`` and ``stats``.

    Returns (index (S, 2) float64, stats (S, T, ROW_WIDTH) float64, damages), NaN rows where
    data is lost; S is the metadata's step count.
    """
    rank = int(meta.get("rank", 0))
    count = int(meta.get("steps", 0))
    tensors = list(meta.get("tensors", []))
    last_step = meta.get("last_step")
    damages: list[Damage] = []
    index, problems = read_rows(group, "index", count, (2,))
    steps = index[:, 0]
    lost_index = np.isnan(steps)
    if lost_index.any():
        reason = "; ".join(problems) or "chunk files of 'index' are missing"
        damages.append(
            Damage(rank, "index", missing_ranges(steps, lost_index, last_step), reason + ".")
        )
    stats, problems = read_rows(group, "stats", count, (len(tensors), L.ROW_WIDTH))
    hist = stats[:, :, len(L.STAT_COLUMNS) :]
    lost_stats = np.isnan(hist).any(axis=(1, 2)) if tensors else np.zeros(count, bool)
    lost_stats &= ~lost_index  # said once, under the index
    if lost_stats.any():
        reason = "; ".join(problems) or "chunk files of 'stats' are missing"
        damages.append(
            Damage(rank, "stats", missing_ranges(steps, lost_stats, last_step), reason + ".")
        )
    readable = steps[~lost_index]
    last_known = count and len(readable) and not lost_index[-1] and last_step is not None
    if last_known and int(steps[-1]) != int(last_step):
        damages.append(
            Damage(
                rank,
                "metadata",
                (),
                f"the metadata's last step {last_step} is not the last recorded step "
                f"{int(steps[-1])}.",
            )
        )
    if len(readable) > 1 and (np.diff(readable) <= 0).any():
        damages.append(Damage(rank, "index", (), "the recorded step numbers do not increase."))
    return index, stats, damages


def check_images(group: zarr.Group, meta: dict) -> tuple[dict, list[Damage]]:
    """Per image name the usable rows of its index ((S_i, 3) int64 [step, rows, cols], rows
    that cannot be read dropped), and the damage found."""
    rank = int(meta.get("rank", 0))
    usable, damages = {}, []
    for name, info in dict(meta.get("images", {})).items():
        count = int(info.get("count", 0))
        rows, problems = read_rows(group, f"images/{name}/index", count, (3,))
        lost = np.isnan(rows[:, 0]) | (rows[:, 0] < 0)
        good = np.flatnonzero(~lost)
        usable[name] = (good, rows[good].astype(np.int64))
        if lost.any():
            reason = "; ".join(problems) or f"chunk files of 'images/{name}/index' are missing"
            steps = np.where(lost, math.nan, rows[:, 0])
            damages.append(
                Damage(
                    rank,
                    f"images/{name}",
                    missing_ranges(steps, lost, meta.get("last_step")),
                    reason + ".",
                )
            )
    return usable, damages


def check_scalars(group: zarr.Group, meta: dict) -> tuple[dict, list[Damage]]:
    """Per logged scalar its readable rows ((K, 2) float64 [step, value]; rows that cannot
    be read dropped), and the damage found. A value may be NaN as logged; a step never is."""
    rank = int(meta.get("rank", 0))
    usable, damages = {}, []
    for name, info in dict(meta.get("scalars", {})).items():
        count = int(info.get("count", 0))
        rows, problems = read_rows(group, f"scalars/{info.get('key')}", count, (2,))
        lost = np.isnan(rows[:, 0])
        usable[name] = rows[~lost]
        if lost.any():
            reason = "; ".join(problems) or f"chunk files of the scalar {name!r} are missing"
            steps = missing_ranges(rows[:, 0], lost, meta.get("last_step"))
            damages.append(Damage(rank, f"scalars/{name}", steps, reason + "."))
    return usable, damages
