"""Drawn point sets written in a setting: ``drawn:x,y x,y ...``.

A point set drawn by hand (the setup form's "drawn" canvas) is part of the run's settings,
so it is saved in experiment files, copied with Edit > Copy as command and undone like any
other setting, and nothing is written beside them. Points are separated by spaces, their
coordinates by commas; every point has the same number of coordinates (D), all finite, and
there are at least 2 (a distance matrix needs two) and at most ``MAX_DRAWN``. Numbers are
written as Python writes floats, which read back exactly.

Imports neither numpy nor torch (the settings table checks these specs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from gradviz.core.common.errors import GradvizError

#: The prefix that marks a drawn point set where a setting accepts point files.
DRAWN_PREFIX = "drawn:"
#: The most points a drawn set holds (drawn by hand: a file suits more).
MAX_DRAWN = 10_000

Points = tuple[tuple[float, ...], ...]


def is_drawn(value: object) -> bool:
    return isinstance(value, str) and value.startswith(DRAWN_PREFIX)


def parse_drawn(spec: str) -> Points:
    """The points of ``drawn:x,y x,y ...``: N tuples of D floats. GradvizError names the
    first point that cannot be read and what to write instead."""
    words = spec[len(DRAWN_PREFIX) :].split() if is_drawn(spec) else None
    if words is None:
        raise GradvizError(f"{spec!r} is not a drawn point set; write drawn:x,y x,y ...")
    if len(words) < 2:
        raise GradvizError(
            f"A drawn point set needs at least 2 points (a distance matrix needs two), "
            f"got {len(words)}; add points."
        )
    if len(words) > MAX_DRAWN:
        raise GradvizError(
            f"A drawn point set holds at most {MAX_DRAWN:,} points, got {len(words):,}; "
            "use a point file (CSV or NPY) for more."
        )
    points = tuple(_point(word, k) for k, word in enumerate(words, 1))
    width = len(points[0])
    for k, point in enumerate(points, 1):
        if len(point) != width:
            raise GradvizError(
                f"Drawn point {k} has {len(point)} coordinates but point 1 has {width}; "
                "give every point the same number."
            )
    return points


def format_drawn(points: Iterable[Sequence[float]]) -> str:
    """``drawn:x,y x,y ...`` for (N, D) points (floats written to read back exactly)."""
    return DRAWN_PREFIX + " ".join(",".join(repr(float(v)) for v in p) for p in points)


def _point(word: str, k: int) -> tuple[float, ...]:
    try:
        point = tuple(float(text) for text in word.split(","))
    except ValueError:
        raise GradvizError(
            f"Drawn point {k} is {word[:40]!r}, not numbers; write each point as x,y "
            "(commas between coordinates, spaces between points)."
        ) from None
    if not all(math.isfinite(v) for v in point):
        raise GradvizError(f"Drawn point {k} is {word[:40]!r}; coordinates must be finite.")
    return point
