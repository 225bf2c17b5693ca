"""Timing for benchmarks: interleaved repeats, medians, ratios, plain-text tables.

Speed figures measured on a shared or busy machine drift over seconds. Timing the cases
interleaved (A, B, C, A, B, C, ...) exposes them all to the same drift, and the median of
the repeats (and of the per-repeat ratios) ignores the odd disturbed one.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch CPU threads (None: leave as is); restore afterwards."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class Timing:
    """Seconds per call of one case, one entry per repeat (each the mean over ``calls``)."""

    name: str
    calls: int
    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median seconds per call."""
        return statistics.median(self.seconds)

    @property
    def per_second(self) -> float:
        """Calls per second, from the median."""
        return 1.0 / self.median if self.median > 0 else math.inf


def _sync() -> None:
    # CUDA work is asynchronous: wait for it so that a repeat measures what it ran.
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _time_calls(fn: Callable[[], object], calls: int) -> float:
    _sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    _sync()
    return (time.perf_counter() - start) / calls


def time_interleaved(
    cases: dict[str, Callable[[], object]],
    repeats: int = 3,
    *,
    warmup: int = 1,
    min_seconds: float = 0.2,
    max_calls: int = 1000,
    threads: int | None = 1,
) -> dict[str, Timing]:
    """Time each case (a callable without arguments) as interleaved repeats.

    Each case is first called ``warmup`` times (at least once); the last warm-up call sets
    how many calls one repeat makes, so that a repeat lasts about ``min_seconds`` (at least
    one call, at most ``max_calls``). Then the repeats run round-robin over the cases. The
    measurement runs with ``threads`` torch threads (1 by default; None leaves it alone).
    Returns a Timing per case, in the order given.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    with torch_threads(threads):
        calls = {}
        for name, fn in cases.items():
            for _ in range(max(0, warmup - 1)):
                fn()
            once = _time_calls(fn, 1)
            calls[name] = int(min(max_calls, max(1, math.ceil(min_seconds / max(once, 1e-9)))))
        seconds: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeats):
            for name, fn in cases.items():
                seconds[name].append(_time_calls(fn, calls[name]))
    return {name: Timing(name, calls[name], tuple(seconds[name])) for name in cases}


def median_ratio(fast: Timing, slow: Timing) -> float:
    """How many times faster ``fast`` ran than ``slow``: the median of per-repeat ratios.

    Repeat k of both cases ran back to back, so each per-repeat ratio compares them under
    the same machine load.
    """
    return statistics.median(s / f for f, s in zip(fast.seconds, slow.seconds))


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Lines of a plain-text table: the first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = [value.rjust(width) for value, width in zip(row[1:], widths[1:])]
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return [line(cells[0]), rule, *(line(row) for row in cells[1:])]


def _cell(value: object) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)
