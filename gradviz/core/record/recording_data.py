"""A recording read into numpy arrays, for the views (read off the GUI thread).

``read_recording(reader, rank)`` turns one rank's stream into a ``RecordingData``: every
array the Model health page and the timeline need, so the GUI thread never touches zarr, and
the recording's ``summary.RecordingSummary`` (what ``gradviz inspect`` prints), from which
every fact of the recording and of the rank is read. T watched tensors (model order), S
recorded steps, BINS histogram bins.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradviz.core.common.errors import GradvizError
from gradviz.core.common.health import LOST, worst_of_counts
from gradviz.core.record import layout as L
from gradviz.core.record.reader import Reader
from gradviz.core.record.summary import RecordingSummary

#: The worst-health code of a cell whose statistics a damaged recording lost (no category).
MISSING_CODE = L.NO_ENTRY


@dataclass(frozen=True)
class RecordingData:
    """One rank of a recording as read at one moment (a later read may hold more steps):
    ``summary`` is the recording's at that moment; the properties below read it."""

    summary: RecordingSummary
    rank: int
    tensors: tuple[str, ...]  # (T,) in model order
    steps: np.ndarray  # (S,) int64 user step numbers
    losses: np.ndarray  # (S,) float64, NaN where none was logged
    grad_norm: np.ndarray  # (T, S) float64 L2 norm of the finite gradient entries
    counts: np.ndarray  # (T, S, 5) int64 finite, zero, NaN, +Inf, -Inf
    histograms: np.ndarray  # (T, S, BINS) int64 in the layout's fixed bins
    meta: dict = field(default_factory=dict)
    #: image name -> ((S_i,) step numbers, list of S_i 2-D arrays)
    images: dict[str, tuple[np.ndarray, list[np.ndarray]]] = field(default_factory=dict)
    #: (T, S) bool: the statistics of that tensor and step are lost (a damaged recording)
    missing: np.ndarray | None = None
    #: images of this rank whose files could not be read while reading it (damage entries
    #: as the summary's; the summary's own checks see only their index)
    unreadable_images: tuple[dict, ...] = ()
    #: (S,) bool: the step's loss was logged (``losses`` is NaN where it was not, and where
    #: a NaN was logged; the two read apart here). None: every step's was.
    loss_logged: np.ndarray | None = None

    @property
    def path(self) -> str:
        return self.summary.path

    @property
    def source(self) -> str:
        """``watch`` or ``fit``."""
        return self.summary.source or "watch"

    @property
    def ranks(self) -> tuple[int, ...]:
        return self.summary.ranks

    @property
    def complete(self) -> bool:
        """This rank's writer closed it and nothing of it is lost."""
        return self.summary.rank(self.rank).complete

    @property
    def first_nonfinite(self) -> dict | None:
        """This rank's first non-finite gradient ({"step", "tensor", "index", "kind"}, and
        ``origin`` or ``origin_unknown`` where the watch looked), None where none."""
        return self.summary.rank(self.rank).first_nonfinite

    @property
    def damaged(self) -> tuple[dict, ...]:
        """What this rank lost (the summary's entries, then images found unreadable)."""
        return self.summary.damage_of(self.rank) + self.unreadable_images

    @property
    def ranks_known(self) -> str:
        """Which ranks are known from which step on ("" when every rank's records reach
        the last step)."""
        return self.summary.ranks_known

    @property
    def first_not_known(self) -> str:
        """Why the recording names no first non-finite rank and step ("" where it names
        them or none is seen)."""
        return self.summary.first_not_known

    @property
    def n_steps(self) -> int:
        return int(self.steps.shape[0])

    def worst(self) -> np.ndarray:
        """(T, S) uint8 Health code of the worst gradient entry of each tensor and step:
        NaN, then +Inf, then -Inf, then ZERO where every entry is zero, else FINITE;
        ``MISSING_CODE`` where the statistics are lost (never FINITE)."""
        codes = worst_health(self.counts)
        codes[self.missing_cells()] = MISSING_CODE
        return codes

    def image_at(self, name: str, step: int) -> tuple[int, np.ndarray] | None:
        """The last image ``name`` recorded at or before ``step`` (step, array), or None."""
        steps, arrays = self.images.get(name, (np.zeros(0, np.int64), []))
        i = int(np.searchsorted(steps, step, side="right")) - 1
        return None if i < 0 else (int(steps[i]), arrays[i])

    def missing_cells(self) -> np.ndarray:
        """(T, S) bool: cells whose statistics are lost (never drawn as data)."""
        if self.missing is None:
            return np.zeros(self.counts.shape[:2], bool)
        return self.missing

    def damage_line(self) -> str:
        """One line saying which steps are lost, or "" for a whole recording."""
        return damage_line(self.damaged)

    def ranks_line(self) -> str:
        """One line saying whose records end early, or "" where every rank's reach the end."""
        return f"Incomplete recording: {self.ranks_known}." if self.ranks_known else ""

    def column_of_step(self, step: int) -> int:
        """The column of the recorded step ``step`` (the last one at or before it)."""
        return max(int(np.searchsorted(self.steps, step, side="right")) - 1, 0)


def damage_line(damaged) -> str:
    """``damaged`` (``RecordingSummary.damaged`` entries) in one line for people."""
    if not damaged:
        return ""
    parts = []
    for d in damaged:
        ranges = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in d["missing_steps"])
        lost = f"steps {ranges} {LOST}" if ranges else d["reason"].rstrip(".")
        parts.append(f"rank {d['rank']} {d['what']}: {lost}")
    return "Damaged recording: " + "; ".join(parts)


def damage_label(damaged) -> str:
    """A few words for a state label: "damaged: steps 16-31 lost"."""
    ranges = [r for d in damaged for r in d["missing_steps"]]
    if not ranges:
        return "damaged" if damaged else ""
    text = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in sorted(map(tuple, ranges)))
    return f"damaged: steps {text} {LOST}"


def worst_health(counts: np.ndarray) -> np.ndarray:
    """(..., 5) counts -> (...) uint8 Health code of the worst entry (``worst_of_counts``)."""
    return worst_of_counts(counts)


def read_recording(reader: Reader, rank: int | None = None) -> RecordingData:
    """Everything of ``rank`` (None: the lowest) that the views show. Slow (disk): call it
    off the GUI thread."""
    ranks = tuple(reader.ranks)
    stream = reader.rank(ranks[0] if rank is None and ranks else (rank or 0))
    steps = stream.step_numbers()
    series = [stream.tensor(name) for name in stream.tensors]
    s = steps.shape[0]
    if series:
        grad_norm = np.stack([t.grad_norm for t in series])
        counts = np.stack([t.counts for t in series])
        histograms = np.stack([t.histogram for t in series])
        missing = np.stack([t.missing for t in series])
    else:
        grad_norm = np.zeros((0, s))
        counts = np.zeros((0, s, 5), np.int64)
        histograms = np.zeros((0, s, L.BINS), np.int64)
        missing = np.zeros((0, s), bool)
    images = {}
    unreadable_images = []
    for name in stream.image_names():
        recorded, unreadable = [], []
        for i in range(len(stream.image_steps(name))):
            try:
                recorded.append(stream.image(name, i))
            except GradvizError:  # its file is lost: named below, never drawn
                unreadable.append(int(stream.image_steps(name)[i]))
        if unreadable:
            unreadable_images.append(_unreadable_images(stream.rank, name, unreadable))
        images[name] = (
            np.array([step for step, _ in recorded], dtype=np.int64),
            [np.asarray(a) for _, a in recorded],
        )
    return RecordingData(
        summary=reader.summary(check=(stream.rank,)),
        rank=stream.rank,
        tensors=tuple(stream.tensors),
        steps=steps,
        losses=stream.losses(),
        grad_norm=grad_norm,
        counts=counts,
        histograms=histograms,
        meta=dict(stream.meta),
        images=images,
        missing=missing,
        unreadable_images=tuple(unreadable_images),
        loss_logged=_loss_logged(stream, steps),
    )


def _loss_logged(stream, steps: np.ndarray) -> np.ndarray:
    """(S,) bool: whether a loss was logged at each recorded step, from the recording's
    ``loss`` scalar (the Runs page's series; an older recording's is its recorded steps'
    losses, if any was logged). Its unreadable rows count as not logged (named as damage)."""
    if "loss" not in stream.scalar_names():
        return np.zeros(len(steps), bool)
    return np.isin(steps, stream.scalar("loss").steps)


def _unreadable_images(rank: int, name: str, steps: list[int]) -> dict:
    """A damage entry for images whose data files cannot be read, as the reader's."""
    ranges, start = [], steps[0]
    for prev, step in zip(steps, steps[1:] + [None]):
        if step is None or step != prev + 1:
            ranges.append([start, prev])
            start = step
    return {
        "rank": rank,
        "what": f"images/{name}",
        "missing_steps": ranges,
        "reason": f"the {name} images of these steps cannot be read.",
    }
