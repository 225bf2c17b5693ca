"""Where each rank's records end, and what that leaves known of the first non-finite step.

Under DDP the ranks step together, but their streams on disk need not end together: a rank
killed with SIGKILL keeps only the steps its writer had finished (the last ones may still
have been in its queue), a rank killed at once after a step may keep none, and a running
writer is a little behind its peers now and then. A rank's stream tells what happened to
that rank up to its last recorded step and nothing after it (the checks of every step up
to it travel with it, see ``sink``). So a claim about step ``s`` (the first non-finite
gradient, which rank went first) holds only where every rank's records reach ``s``; past
the end of one rank's records only the others are known, and the answer says so instead
of naming the first of the ranks that happen to be known.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RankEnd:
    """Where one rank's records end: ``last_step`` (its last recorded step; None where it
    recorded none), ``steps`` recorded, whether its writer closed it (``complete``), and
    whether the rank has a readable stream at all (``present``; the world size of another
    rank's metadata names the ranks that should have one)."""

    rank: int
    last_step: int | None
    steps: int
    complete: bool
    present: bool = True

    @property
    def reach(self) -> int:
        """The last step this rank's records tell about (-1: none)."""
        return -1 if self.last_step is None else int(self.last_step)

    def ends_text(self) -> str:
        """Where its records end, in a few words ("rank 1's records end at step 80")."""
        if not self.present:
            return f"rank {self.rank} has no readable records"
        if self.last_step is None:
            return f"rank {self.rank} recorded no step"
        return f"rank {self.rank}'s records end at step {self.last_step}"

    def why_text(self) -> str:
        """Why they may end there."""
        if not self.present:
            return "the other ranks' metadata counts it in the world, but its folder is missing"
        if self.complete:
            return "its writer closed the recording there"
        return "its writer did not close the recording: it was killed, or is still writing"


def rank_ends(metas: dict[int, dict], unreadable: set[int] = frozenset()) -> list[RankEnd]:
    """The end of each rank's records, by rank: ``metas`` (rank -> its stream's metadata)
    and every rank their ``world_size`` counts (``unreadable``: ranks whose folder exists
    but cannot be read), missing ones with ``present`` False."""
    world = max((int(m.get("world_size", 1) or 1) for m in metas.values()), default=0)
    ranks = sorted(set(metas) | set(range(world)) | set(unreadable))
    ends = []
    for rank in ranks:
        meta = metas.get(rank)
        if meta is None:
            ends.append(RankEnd(rank, None, 0, False, present=False))
            continue
        last = meta.get("last_step")
        steps = int(meta.get("steps", 0))
        last = None if last is None or not steps else int(last)
        ends.append(RankEnd(rank, last, steps, bool(meta.get("complete"))))
    return ends


def ending_early(ends: list[RankEnd]) -> list[RankEnd]:
    """The ranks whose records end before the latest recorded step of any rank (none when
    no rank recorded a step, or when every rank's end there)."""
    latest = max((e.reach for e in ends), default=-1)
    if latest < 0:
        return []
    return [e for e in ends if e.reach < latest]


def known_sentence(ends: list[RankEnd]) -> str:
    """Where the short ranks' records end and which ranks are known after that: "rank 1's
    records end at step 80; from step 81 on only rank 0 is known" ("" when none is short)."""
    short = sorted(ending_early(ends), key=lambda e: (e.reach, e.rank))
    if not short:
        return ""
    parts = [e.ends_text() for e in short]
    for reach in sorted({e.reach for e in short}):
        known = [e.rank for e in ends if e.reach > reach]
        parts.append(f"from step {reach + 1} on only {_ranks_words(known)} known")
    return "; ".join(parts)


def qualified(first: dict | None, ends: list[RankEnd]) -> dict | None:
    """The recording's first non-finite gradient as far as every rank's records reach.

    ``first`` is the earliest one seen on the ranks' streams ({"step", "tensor", "index",
    "kind", "rank", "ranks", ...}; None: none seen). Returned as it is where every rank's
    records reach its step (None then says no rank had one); otherwise no step or rank is
    claimed: the fields are None, ``not_known`` says which ranks' records end where, and
    ``seen`` keeps what the ranks that are known show (None: nothing)."""
    short = ending_early(ends)
    reach = min((e.reach for e in short), default=None)
    if reach is None or (first is not None and first["step"] <= reach):
        return first
    blank = dict.fromkeys(("step", "tensor", "index", "kind", "rank", "ranks", "before_reduction"))
    return {**blank, "not_known": known_sentence(ends), "seen": first}


def _ranks_words(ranks: list[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]} is"
    return f"ranks {', '.join(map(str, ranks))} are"
