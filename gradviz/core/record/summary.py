"""One summary of a recording as read at one moment: what ``gradviz inspect RUN`` prints and
what Model health and Runs say of the recording and of each rank.

``summarise(reader)`` reads it (from disk: off the GUI thread); ``gradviz inspect --json``
prints ``to_dict()`` of a full one. A page's checks only the rank it shows for lost data
(checking a rank reads all its statistics) and does not measure the size on disk (a walk
over every file), so those are "not known" (None) there, never guessed. The pages' data
(``recording_data.RecordingData``, ``run_series.RunSeries``) keep the summary they were read
with and take every recording-wide fact and each rank's own (path, source, ranks, complete,
damage, first non-finite gradient, which ranks are known) from it, so the app and the CLI
cannot say different things.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gradviz.core.record.rank_ends import RankEnd, ending_early, known_sentence

if TYPE_CHECKING:
    from gradviz.core.record.reader import RankStream, Reader


@dataclass(frozen=True)
class RankSummary:
    """One rank's own numbers, never mixed with another's: ``steps`` recorded,
    ``last_step`` (None: none), ``complete`` (its writer closed it and nothing of it is
    lost; None where its writer closed it but its data was not checked),
    ``first_nonfinite`` ({"step", "tensor", "index", "kind"}, with ``origin`` or
    ``origin_unknown`` where the watch looked; None: none seen on this rank)."""

    rank: int
    steps: int
    last_step: int | None
    complete: bool | None
    first_nonfinite: dict | None

    def to_dict(self) -> dict:
        """One entry of ``per_rank`` in ``gradviz inspect --json``."""
        return {
            "rank": self.rank,
            "steps": self.steps,
            "last_step": self.last_step,
            "complete": self.complete,
            "first_nonfinite": self.first_nonfinite,
        }


@dataclass(frozen=True)
class RecordingSummary:
    """A recording as a whole, then by rank. ``steps``: the most steps any rank recorded;
    ``last_step``: the latest step of any rank; ``complete``: every rank's writer closed it,
    nothing is lost and no rank's records end early (None where that rests on a rank whose
    data was not checked: ``checked`` names the ranks that were). ``first_nonfinite``: the
    earliest over the ranks, claimed only where every rank's records reach it
    (``rank_ends.qualified``: else ``not_known`` says why, ``seen`` what the known ranks
    show). ``damaged``: what is lost (``Damage.to_dict()`` entries, by rank; empty when
    whole). ``ranks_ending_early``: the ranks whose records end before another rank's last
    step, each with a reason; ``ranks_known``: which ranks are known from which step on (""
    when all are). ``bytes``: the recording's size on disk (None: not measured)."""

    path: str
    source: str | None
    steps: int
    last_step: int | None
    complete: bool
    ranks: tuple[int, ...]
    tensors: tuple[str, ...]
    images: tuple[str, ...]
    scalars: tuple[str, ...]
    skipped_steps: tuple[int, ...]
    first_nonfinite: dict | None
    bytes: int | None
    per_rank: tuple[RankSummary, ...]
    damaged: tuple[dict, ...]
    ranks_ending_early: tuple[dict, ...]
    ranks_known: str
    checked: tuple[int, ...] = ()

    def rank(self, rank: int) -> RankSummary:
        """The summary of rank ``rank`` (KeyError where it has no readable stream)."""
        for entry in self.per_rank:
            if entry.rank == rank:
                return entry
        raise KeyError(rank)

    def damage_of(self, rank: int) -> tuple[dict, ...]:
        """What rank ``rank`` lost (empty when its stream is whole, or was not checked)."""
        return tuple(d for d in self.damaged if d["rank"] == rank)

    @property
    def first_not_known(self) -> str:
        """Why no first non-finite rank and step is named ("" where they are, or none is
        seen): a rank's records end before the first one seen."""
        return (self.first_nonfinite or {}).get("not_known", "")

    def to_dict(self) -> dict:
        """What ``gradviz inspect --json`` prints, in its order (lists for the tuples)."""
        return {
            "kind": "recording",
            "path": self.path,
            "source": self.source,
            "steps": self.steps,
            "last_step": self.last_step,
            "complete": self.complete,
            "ranks": list(self.ranks),
            "tensors": list(self.tensors),
            "images": list(self.images),
            "scalars": list(self.scalars),
            "skipped_steps": list(self.skipped_steps),
            "first_nonfinite": self.first_nonfinite,
            "bytes": self.bytes,
            "per_rank": [entry.to_dict() for entry in self.per_rank],
            "damaged": [dict(d) for d in self.damaged],
            "ranks_ending_early": [dict(e) for e in self.ranks_ending_early],
            "ranks_known": self.ranks_known,
        }


def summarise(reader: Reader, check: Iterable[int] | None = None) -> RecordingSummary:
    """The summary of ``reader``'s recording as it stands (reads from disk). ``check``: the
    ranks a page shows, the only ones whose streams are checked for lost data, and the size
    on disk is not measured; None: everything, as ``gradviz inspect`` says it. Each part is
    built by a function of its own, so a field joins in one place."""
    streams = [reader.rank(r) for r in reader.ranks]
    checked = tuple(reader.ranks) if check is None else tuple(sorted(set(check)))
    damaged = tuple(d.to_dict() for d in reader.damaged(checked))
    ends = reader.rank_ends()
    short = tuple(_end_fields(e) for e in ending_early(ends))
    last = [s.meta["last_step"] for s in streams if s.meta["last_step"] is not None]
    return RecordingSummary(
        path=str(reader.path),
        source=streams[0].meta.get("source") if streams else None,
        steps=max((s.steps for s in streams), default=0),
        last_step=max(last) if last else None,
        complete=_complete(streams, checked, damaged, short),
        ranks=tuple(reader.ranks),
        tensors=tuple(_union(s.tensors for s in streams)),
        images=tuple(sorted({n for s in streams for n in s.image_names()})),
        scalars=tuple(_union(s.scalar_names() for s in streams)),
        skipped_steps=tuple(sorted({e["step"] for s in streams for e in s.skipped})),
        first_nonfinite=first_fields(reader.first_nonfinite(), with_rank=True),
        bytes=_size_on_disk(Path(reader.path)) if check is None else None,
        per_rank=tuple(_rank_summary(s, s.rank in checked) for s in streams),
        damaged=damaged,
        ranks_ending_early=short,
        ranks_known=known_sentence(ends),
        checked=checked,
    )


def _complete(streams: list[RankStream], checked: tuple[int, ...], damaged, short) -> bool | None:
    """Every rank's writer closed its stream, nothing is lost and no rank ends early; None
    where only the data of a rank that was not checked could still say otherwise."""
    if not streams or not all(s.complete for s in streams) or damaged or short:
        return False
    return True if all(s.rank in checked for s in streams) else None


def _rank_summary(stream: RankStream, checked: bool) -> RankSummary:
    # A stream its writer did not close is not complete, whatever its data holds.
    complete = (not stream.damaged() if checked else None) if stream.complete else False
    return RankSummary(
        rank=stream.rank,
        steps=stream.steps,
        last_step=stream.meta["last_step"],
        complete=complete,
        first_nonfinite=first_fields(stream.first_nonfinite, with_rank=False),
    )


def _end_fields(end: RankEnd) -> dict:
    """A rank whose records end before the others' (``ranks_ending_early``)."""
    return {
        "rank": end.rank,
        "steps": end.steps,
        "last_step": end.last_step,
        "complete": end.complete,
        "reason": f"{end.ends_text()}: {end.why_text()}.",
    }


def first_fields(first: dict | None, with_rank: bool) -> dict | None:
    """The fields of a first non-finite gradient; ``with_rank`` (the recording's): which rank
    went first, every rank non-finite at that step, and whether that was seen before DDP's
    all-reduce (each rank's own gradients) or after it."""
    keys: tuple[str, ...] = ("step", "tensor", "index", "kind")
    if with_rank:
        keys += ("rank", "ranks", "before_reduction")
    if first is None:
        return None
    fields: dict[str, Any] = {k: first.get(k) for k in keys}
    if "origin" in first:  # watch(origin=True): where the first non-finite value started
        fields["origin"] = first["origin"]
    if "origin_unknown" in first:  # why the watch could not say where it started
        fields["origin_unknown"] = first["origin_unknown"]
    if "not_known" in first:  # a rank's records end before it: no step or rank is claimed
        fields["not_known"] = first["not_known"]
        fields["seen"] = first_fields(first["seen"], with_rank=True)
    return fields


def _union(names_per_stream) -> list[str]:
    """Names in order of first appearance over the streams."""
    union: list[str] = []
    for names in names_per_stream:
        union += [n for n in names if n not in union]
    return union


def _size_on_disk(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            # A writer's temporary file may vanish while we walk.
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(folder, name)).st_size
    return total
