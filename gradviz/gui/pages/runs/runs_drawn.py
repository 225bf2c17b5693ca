"""What the Runs page draws of a run, and what it says about it, as plain data (no Qt).

``points(series, key, kind, weight)`` is a run's quantity as drawn (``Drawn``); the notes
under the plot, the hover readout's nearest point, a run's ``readouts()`` entry and the
CSV export are all computed from that one ``Drawn``, so they cannot disagree with the plot.
"""

from __future__ import annotations

import csv
from typing import NamedTuple

import numpy as np

from gradviz.core.record.run_series import X_AXES, RunSeries, debiased_ema, quantity_text

STEP_ONLY = "step only: recorded without wall times"


class Drawn(NamedTuple):
    """A run's points as drawn: (K,) int64 steps, (K,) x, (K,) raw and smoothed values."""

    steps: np.ndarray
    x: np.ndarray
    raw: np.ndarray
    smoothed: np.ndarray


EMPTY = Drawn(np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0))


def points(series: RunSeries | None, key: str, kind: str, weight: float) -> Drawn:
    """``series``' quantity ``key`` on the x axis ``kind`` (step, wall, relative), smoothed
    with ``weight``; nothing where the run lacks the quantity or (over time) wall times."""
    found = series.series(key) if series is not None else None
    if found is None:
        return EMPTY
    steps, values = found
    if kind == "step":
        x = steps.astype(np.float64)
    else:
        seconds = series.wall_times(steps)
        if seconds is None:
            return EMPTY  # step only: said in the notes
        keep = ~np.isnan(seconds)
        steps, values, seconds = steps[keep], values[keep], seconds[keep]
        first = series.times[1][0] if len(series.times[1]) else 0.0
        x = seconds if kind == "wall" else seconds - first
    return Drawn(steps, x, values, debiased_ema(values, weight))


def notes(label: str, state: str, series: RunSeries | None, key: str, kind: str, log: bool,
          drawn: Drawn) -> list[str]:  # fmt: skip
    """What a user must know that the plot cannot show: a run not read yet, without the
    quantity or wall times, with wall times partly estimated (a live run added late), or
    with values a log axis cannot draw."""
    if series is None:
        return [f"{label}: {state}"]
    if not series.has(key):
        return [f"{label}: has no {quantity_text(key)}"]
    if kind != "step" and series.times is None:
        return [f"{label}: {STEP_ONLY}; shown only with x: step"]
    out = []
    estimated = series.meta.get("estimated_times", 0) if kind != "step" else 0
    if estimated:
        out.append(
            f"{label}: the times of its first {estimated:,} steps (taken before it was added) "
            "are estimated from its step rate"
        )
    raw = drawn.raw
    low = int(np.count_nonzero(np.isfinite(raw) & (raw <= 0))) if log else 0
    return out + ([f"{label}: {low:,} values ≤ 0 are not on the log axis"] if low else [])


def nearest(drawn: Drawn, x: float, slack: float) -> tuple[int, float, float] | None:
    """(step, raw value, smoothed value) of the point nearest to ``x``; None when every
    point lies more than ``slack`` before or after it (the run has no point there)."""
    xs = drawn.x
    if not len(xs) or not xs[0] - slack <= x <= xs[-1] + slack:
        return None
    i = int(np.argmin(np.abs(xs - x)))
    return int(drawn.steps[i]), float(drawn.raw[i]), float(drawn.smoothed[i])


def run_readout(label: str, state: str, visible: bool, series: RunSeries | None,
                drawn: Drawn, key: str, kind: str, weight: float) -> dict:  # fmt: skip
    """One run of ``readouts()``: name, source, the quantity, the x axis, the number of
    points, the last step and value (None for NaN), the non-finite count, the smoothing."""
    steps, _, raw, _ = drawn
    return {
        "name": label,
        "source": None if series is None else series.source,
        "path": None if series is None or series.source == "live" else series.path,
        "rank": None if series is None else series.rank,
        "state": state,
        "visible": visible,
        "scalar": quantity_text(key),
        "x_axis": kind,
        "points": int(len(raw)),
        "last_step": int(steps[-1]) if len(steps) else None,
        "last_value": None if not len(raw) or np.isnan(raw[-1]) else float(raw[-1]),
        "nonfinite": int(np.count_nonzero(~np.isfinite(raw))),
        "smoothing": weight,
    }


def write_csv(path: str, key: str, kind: str, runs: list[tuple[str, Drawn]]) -> None:
    """One row per drawn point: run, step, x, value, smoothed value (NaN and Inf written
    as nan, inf, -inf: Python's own spelling, which float() reads back)."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["run", "step", X_AXES[kind], quantity_text(key), "smoothed"])
        for label, drawn in runs:
            for step, x, raw, smooth in zip(*drawn, strict=True):
                out.writerow([label, int(step), *(repr(float(v)) for v in (x, raw, smooth))])


def number_text(v: float) -> str:
    """A value for the hover readout: nan, inf and -inf as such."""
    if np.isnan(v):
        return "nan"
    return "inf" if v == np.inf else "-inf" if v == -np.inf else f"{v:.4g}"
