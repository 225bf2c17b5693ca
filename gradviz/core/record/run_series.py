"""What the Runs page draws of one run, as plain arrays: its logged scalars, its gradient
norms (all tensors, or one), when each step was logged; and the smoothing of a curve.

``read_runs(reader, rank)`` reads a recording (off the GUI thread, as ``read_recording``);
``live_series(...)`` builds the same from the lab's live run. A quantity is named by a key:
``"scalar:<name>"``, ``"grad_norm:"`` (all tensors) or ``"grad_norm:<tensor>"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradviz.core.common.health import gradient_norm
from gradviz.core.record.reader import Reader
from gradviz.core.record.summary import RecordingSummary

GRAD_NORM_ALL = "grad_norm:"
#: The x-axis kinds: key -> the axis label.
X_AXES = {
    "step": "step",
    "wall": "wall time",
    "relative": "time since the run's first step (s)",
}


def scalar_key(name: str) -> str:
    return f"scalar:{name}"


def quantity_text(key: str) -> str:
    """The words of a quantity key, as the picker and the axis say them."""
    kind, _, name = key.partition(":")
    if kind == "scalar":
        return name
    return "gradient norm (all tensors)" if not name else f"gradient norm of {name}"


@dataclass(frozen=True)
class RunSeries:
    """One run as read at one moment (a later read of a growing run may hold more).

    ``scalars``: name -> ((K,) int64 steps, (K,) float64 values, NaN and Inf as logged);
    ``grad_steps`` (S,) the recorded steps; ``grad_norms`` (T, S) float64 per watched tensor,
    NaN where a gradient entry was NaN, +Inf where one was infinite (the norm of such a
    gradient is not finite, whatever the finite entries say), left out where lost;
    ``times`` ((W,) steps, (W,) Unix seconds) when each step was logged, or None (a
    recording from before wall times were recorded: step only). ``summary``: the
    recording's as read with it (the properties below read it), None for the lab's live
    run, which is named ``label``."""

    label: str
    rank: int
    scalars: dict[str, tuple[np.ndarray, np.ndarray]]
    tensors: tuple[str, ...] = ()
    grad_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    grad_norms: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    grad_missing: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), bool))
    times: tuple[np.ndarray, np.ndarray] | None = None
    meta: dict = field(default_factory=dict)
    summary: RecordingSummary | None = None

    @property
    def path(self) -> str:
        return self.label if self.summary is None else self.summary.path

    @property
    def source(self) -> str:
        """``watch``, ``fit`` or ``live``."""
        return "live" if self.summary is None else self.summary.source or "watch"

    @property
    def ranks(self) -> tuple[int, ...]:
        return (self.rank,) if self.summary is None else self.summary.ranks

    @property
    def complete(self) -> bool:
        """This rank's writer closed it and nothing of it is lost (never, for a live run)."""
        return self.summary is not None and self.summary.rank(self.rank).complete

    @property
    def damaged(self) -> tuple[dict, ...]:
        """What this rank lost (empty when whole, and for a live run)."""
        return () if self.summary is None else self.summary.damage_of(self.rank)

    @property
    def n_steps(self) -> int:
        """A size that grows with every logged step or scalar (the follower's growth test)."""
        return int(self.grad_steps.shape[0]) + sum(len(s) for s, _ in self.scalars.values())

    def keys(self) -> list[str]:
        """The quantities this run has: its scalars, then the gradient norms."""
        keys = [scalar_key(name) for name in self.scalars]
        if self.tensors:
            keys += [GRAD_NORM_ALL] + [f"grad_norm:{t}" for t in self.tensors]
        return keys

    def has(self, key: str) -> bool:
        """Whether ``series(key)`` is not None, without computing it (the norm of all
        tensors is a sum over every tensor and step)."""
        kind, _, name = key.partition(":")
        if kind == "scalar":
            return name in self.scalars
        return bool(self.tensors) and (not name or name in self.tensors)

    def series(self, key: str) -> tuple[np.ndarray, np.ndarray] | None:
        """((K,) int64 steps, (K,) float64 values) of a quantity, or None if it has none."""
        kind, _, name = key.partition(":")
        if kind == "scalar":
            return self.scalars.get(name)
        if not self.tensors:
            return None
        lost = self.grad_missing
        if not name:
            keep = ~lost.any(axis=0)
            with np.errstate(invalid="ignore", over="ignore"):
                total = np.sqrt(np.sum(np.square(self.grad_norms), axis=0))
            return self.grad_steps[keep], total[keep]
        if name not in self.tensors:
            return None
        t = self.tensors.index(name)
        return self.grad_steps[~lost[t]], self.grad_norms[t, ~lost[t]]

    def wall_times(self, steps: np.ndarray) -> np.ndarray | None:
        """(K,) Unix seconds of ``steps`` (NaN where not logged), or None without times."""
        if self.times is None:
            return None
        known, seconds = self.times
        out = np.full(len(steps), np.nan)
        if len(known):
            at = np.clip(np.searchsorted(known, steps), 0, len(known) - 1)
            hit = known[at] == steps
            out[hit] = seconds[at[hit]]
        return out


def read_runs(reader: Reader, rank: int | None = None) -> RunSeries:
    """One rank (None: the lowest) of a recording, as the Runs page draws it. Slow (disk):
    call it off the GUI thread."""
    ranks = tuple(reader.ranks)
    stream = reader.rank(ranks[0] if rank is None and ranks else (rank or 0))
    scalars = {}
    for name in stream.scalar_names():
        series = stream.scalar(name)
        scalars[name] = (series.steps, series.values)
    tensors = tuple(stream.tensors)
    steps = stream.step_numbers()
    norms = np.zeros((len(tensors), len(steps)))
    missing = np.zeros((len(tensors), len(steps)), bool)
    for t, name in enumerate(tensors):
        series = stream.tensor(name)
        nan, pos_inf, neg_inf = (series.counts[:, k] for k in (2, 3, 4))
        norms[t] = gradient_norm(series.grad_norm, nan, pos_inf + neg_inf)
        missing[t] = series.missing
    times = stream.wall_times()
    return RunSeries(
        label=str(reader.path),
        rank=stream.rank,
        scalars=scalars,
        tensors=tensors,
        grad_steps=steps,
        grad_norms=norms,
        grad_missing=missing,
        times=None if times is None else (times.steps, times.values),
        meta=dict(stream.meta),
        summary=reader.summary(check=(stream.rank,)),
    )


def live_series(
    label: str,
    losses: np.ndarray,
    times: np.ndarray,
    grad_norms: np.ndarray | None = None,
    tensors: tuple[str, ...] = (),
    estimated_times: int = 0,
    steps: np.ndarray | None = None,
) -> RunSeries:
    """The lab's live run: ``losses`` (S,) float64, the loss of each of ``steps`` (S,)
    (0-based, as the lab's loss plot and the CLI count; None: entry k is step k), ``times``
    (S,) Unix seconds each was seen; ``grad_norms`` (T, S) float64, column s each of the
    ``tensors``' gradient norm in that step (NaN and Inf as they were), or None for a run
    that has none; ``estimated_times``: how many steps before the first one seen were dated
    back (kept in ``meta``)."""
    if steps is None:
        steps = np.arange(len(losses), dtype=np.int64)
    steps = np.asarray(steps, dtype=np.int64)
    has_norms = grad_norms is not None and len(tensors) > 0
    norms = np.asarray(grad_norms, np.float64) if has_norms else np.zeros((0, 0))
    return RunSeries(
        label=label,
        rank=0,
        scalars={"loss": (steps, np.asarray(losses, np.float64))},
        tensors=tuple(tensors) if has_norms else (),
        grad_steps=steps if has_norms else np.zeros(0, np.int64),
        grad_norms=norms,
        grad_missing=np.zeros(norms.shape, bool),
        times=(steps, np.asarray(times, np.float64)),
        meta={"estimated_times": int(estimated_times)} if estimated_times else {},
    )


def debiased_ema(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's scalar smoothing: an exponential moving average of the finite values
    with weight ``weight`` in [0, 1), divided by ``1 - weight**n`` (n finite values so far)
    so that the first points are not pulled towards 0. A non-finite value is passed through
    as it is and leaves the average alone. (K,) float64 -> (K,) float64."""
    values = np.asarray(values, dtype=np.float64)
    out = values.copy()
    finite = np.isfinite(values)
    if weight <= 0 or not finite.any():
        return out
    averaged = _ema(values[finite], float(weight))
    out[finite] = averaged / (1 - weight ** np.arange(1, len(averaged) + 1))
    return out


def _ema(c: np.ndarray, w: float) -> np.ndarray:
    """(n,) ``last_k = w * last_(k-1) + (1 - w) * c_k`` from ``last_0 = 0``, in blocks of
    numpy operations (a Python loop over 100,000 steps took 1.5 s on the GUI thread): within a
    block ``sum_i w^(j-i) c_i = w^j * cumsum(w^-i c_i)``, its length kept so that ``w^-i``
    stays below 1e150."""
    n = len(c)
    block = int(min(1024, max(1, 150 / max(-np.log10(w), 1e-12))))
    j = np.arange(block, dtype=np.float64)
    grow, shrink, carry_decay = w**-j, w**j, w ** (j + 1)
    out = np.empty(n)
    carry = 0.0
    for start in range(0, n, block):
        part = c[start : start + block]
        m = len(part)
        sums = np.cumsum(part * grow[:m]) * shrink[:m]
        out[start : start + m] = carry * carry_decay[:m] + (1 - w) * sums
        carry = out[start + m - 1]
    return out
