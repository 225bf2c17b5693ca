"""Timing for benchmarks: interleaved repeats, medians, ratios, tables (printed and as data).

Speed figures measured on a shared or busy machine drift over seconds. Timing the cases
interleaved (A, B, C, A, B, C, ...) exposes them all to the same drift, and the median of
the repeats (and of the per-repeat ratios) ignores the odd disturbed one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

#: A second bare model built the same way as the baseline and timed like every case: how
#: far its ratio is from 1.00x is what two identical cases differ by in that run.
CONTROL = "bare, control"
CONTROL_NOTE = f"  ({CONTROL!r}: a second bare model; its distance from 1.00 is this run's noise)"


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
    """Seconds per call of one case, one entry per repeat (each the mean, median or minimum
    of that repeat's ``calls`` back-to-back calls)."""

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


@dataclass(frozen=True)
class Case:
    """A callable to time with settings of its own; a field left None takes the value given
    to ``time_interleaved``.

    ``calls`` fixes the back-to-back calls per repeat (no calibration call: for cases whose
    size was planned to fit a budget); ``warmup`` is the number of untimed calls first;
    ``statistic`` is how a repeat sums up its calls (see STATISTICS).
    """

    call: Callable[[], object]
    calls: int | None = None
    warmup: int | None = None
    statistic: str | None = None


#: How a repeat sums up its back-to-back calls: "mean" times them together (least timer
#: overhead); "median" and "min" time each call, so that one scheduler hiccup on a shared
#: machine does not decide a millisecond figure ("min": the fastest the machine runs it).
STATISTICS: tuple[str, ...] = ("mean", "median", "min")


def sync_device() -> None:
    """Wait for queued CUDA work (asynchronous), so that a timing measures what it ran."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def time_calls(fn: Callable[[], object], calls: int = 1) -> float:
    """Mean seconds per call of ``calls`` back-to-back calls of ``fn`` (CUDA work included)."""
    sync_device()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync_device()
    return (time.perf_counter() - start) / calls


def _time_repeat(fn: Callable[[], object], calls: int, statistic: str) -> float:
    if statistic == "mean":
        return time_calls(fn, calls)
    each = [time_calls(fn) for _ in range(calls)]
    return statistics.median(each) if statistic == "median" else min(each)


def time_interleaved(
    cases: dict[str, Callable[[], object] | Case],
    repeats: int = 3,
    *,
    warmup: int = 1,
    min_seconds: float = 0.2,
    max_calls: int = 1000,
    threads: int | None = 1,
    statistic: str = "mean",
) -> dict[str, Timing]:
    """Time each case (a callable without arguments, or a Case) as interleaved repeats.

    Each case is first called ``warmup`` times (at least once); the last warm-up call sets
    how many calls one repeat makes, so that a repeat lasts about ``min_seconds`` (at least
    one call, at most ``max_calls``). A Case with fixed ``calls`` skips that calibration and
    makes exactly ``warmup`` untimed calls. Then the repeats run round-robin over the cases;
    a repeat records the ``statistic`` ("mean", "median" or "min") of its calls' seconds.
    The measurement runs with ``threads`` torch threads (1 by default; None leaves it
    alone). Returns a Timing per case, in the order given.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    plans = {name: _as_case(case, warmup, statistic) for name, case in cases.items()}
    with torch_threads(threads):
        calls = {
            name: _calls_per_repeat(case, min_seconds, max_calls) for name, case in plans.items()
        }
        seconds: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeats):
            for name, case in plans.items():
                seconds[name].append(_time_repeat(case.call, calls[name], case.statistic))
    return {name: Timing(name, calls[name], tuple(seconds[name])) for name in cases}


def _as_case(case: Callable[[], object] | Case, warmup: int, statistic: str) -> Case:
    """A Case with every setting filled in from the run's defaults."""
    if not isinstance(case, Case):
        case = Case(case)
    filled = Case(
        case.call,
        case.calls,
        warmup if case.warmup is None else case.warmup,
        statistic if case.statistic is None else case.statistic,
    )
    if filled.statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {STATISTICS}, got {filled.statistic!r}")
    return filled


def _calls_per_repeat(case: Case, min_seconds: float, max_calls: int) -> int:
    """Run the case's warm-up; the calls one repeat makes (calibrated unless fixed)."""
    if case.calls is not None:
        for _ in range(case.warmup):
            case.call()
        return case.calls
    for _ in range(max(0, case.warmup - 1)):
        case.call()
    once = time_calls(case.call)
    return int(min(max_calls, max(1, math.ceil(min_seconds / max(once, 1e-9)))))


def median_ratio(fast: Timing, slow: Timing) -> float:
    """How many times faster ``fast`` ran than ``slow``: the median of per-repeat ratios.

    Repeat k of both cases ran back to back, so each per-repeat ratio compares them under
    the same machine load.
    """
    return statistics.median(s / f for f, s in zip(fast.seconds, slow.seconds))


#: What a table cell may hold: the types JSON writes as they are (NaN and Inf become null
#: in a results file; None prints as "-").
CELL_TYPES = (str, int, float, bool, type(None))


def show_table(
    emit: Callable[[str], None],
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    notes: Sequence[str] = (),
) -> dict:
    """Print a table through ``emit`` (its title, the aligned lines indented by two spaces,
    then its notes) and return the same table as data for a results file:
    ``{"title", "columns", "rows", "notes"}``, rows as lists of cells of CELL_TYPES.

    A suite's printed table and its data come from this one call, so they cannot differ.
    """
    rows = [list(row) for row in rows]
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"a row of {title!r} has {len(row)} cells for {len(columns)} columns")
        for value in row:
            if not isinstance(value, CELL_TYPES):
                raise TypeError(f"a cell of {title!r} is a {type(value).__name__}: {value!r}")
    emit(title)
    for line in format_table(columns, rows):
        emit("  " + line)
    for note in notes:
        emit("  " + note)
    return {"title": title, "columns": list(columns), "rows": rows, "notes": list(notes)}


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
    if value is None:
        return "-"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


_REPO = Path(__file__).resolve().parents[2]

_CALL = """
import importlib, json, sys
function = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])
print(json.dumps(function(*json.loads(sys.argv[3]))))
"""


def fresh_interpreter(script: str, *args: str, timeout_s: float = 1800.0) -> object | None:
    """The last line ``script`` prints, run in a fresh interpreter with ``args``, as JSON;
    None when it ran past ``timeout_s`` (and was stopped)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, *args],
            env=env, capture_output=True, text=True, timeout=timeout_s, check=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def call_in_fresh_interpreter(function: Callable[..., object], *args: object) -> object:
    """``function(*args)`` (a module-level function; JSON in, JSON out) in a fresh
    interpreter: nothing this process has run (an OpenMP team, a window) is there."""
    return fresh_interpreter(_CALL, function.__module__, function.__qualname__, json.dumps(args))
