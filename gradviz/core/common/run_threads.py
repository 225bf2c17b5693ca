"""How many torch CPU threads a run's steps use: the number its settings give, or "auto".

Why auto exists: a distance fit's step at the default N = 200 is a few hundred microseconds
of work in a few dozen small operations. Sharing each of them between threads costs more in
hand-offs than it saves, and on a machine that is doing something else OpenMP's workers
spin-wait against the other processes (on 2 cores beside two busy processes the default
experiment ran 10-16 steps/s on 2 threads and 190-210 on 1). So auto runs a step of fewer
than ``MEASURE_FROM_POINTS`` points, or one that runs on a GPU, on one thread. From that
size a step takes milliseconds and more threads may pay: auto times a few steps on 1 thread
and on every core this process may use, taken in turn, and keeps the faster; more threads
are kept only when clearly faster (``MORE_THREADS_MARGIN``), since they also take cores from
everything else on the machine. The choice is made once per run.

``torch.set_num_threads`` sets the count of the calling thread (OpenMP's and MKL's settings
are per thread) and the count that threads which have not yet run torch start with. The
plan sets it on the thread that steps the run, before a step, whenever the count there is
not the plan's (a replay of the first NaN on the same thread builds a run of its own). The
inter-op pool is left alone: a step runs no inter-op work (autograd runs a CPU backward on
the calling thread), and its size can only be set before its first use.

Imports torch only inside functions: the settings table reads the words of the rule
(``AUTO_RULE``) before torch has loaded.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

#: From this many points auto times steps before choosing (below it: one thread).
MEASURE_FROM_POINTS = 1000
#: Steps timed per thread count, after one untimed step each (the first use of a count
#: starts OpenMP's workers and warms caches).
TIMED_STEPS = 3
#: More threads are kept only if their median step takes at most this fraction of one
#: thread's.
MORE_THREADS_MARGIN = 0.85

#: What "auto" does, in the words of ``--help`` and the form's tooltip.
AUTO_RULE = (
    f"auto: 1 thread for a step of under {MEASURE_FROM_POINTS:,} points or on a GPU; from "
    f"{MEASURE_FROM_POINTS:,} points a few steps are timed on 1 thread and on every core, "
    "and the faster is kept"
)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ThreadChoice:
    """The torch CPU threads a run's steps use, and why.

    ``threads``: the count (None while auto is still timing); ``auto``: chosen by the rule,
    not set by the run's settings; ``why``: the reason in words; ``measured``: the steps/s
    timed on each count, (threads, steps/s) pairs, where auto timed them.
    """

    threads: int | None
    auto: bool
    why: str
    measured: tuple[tuple[int, float], ...] = ()

    def text(self) -> str:
        """One line, e.g. "1 thread (auto: 200 points, a step too small to share)"."""
        if self.threads is None:
            return f"threads not chosen yet ({self.why})"
        plural = "" if self.threads == 1 else "s"
        return f"{self.threads} thread{plural} ({self.why})"

    def to_dict(self) -> dict:
        """JSON-ready: count, auto, why and the steps/s timed per count."""
        return {
            "count": self.threads,
            "auto": self.auto,
            "why": self.why,
            "measured_steps_per_second": {str(k): rate for k, rate in self.measured},
        }


class ThreadPlan:
    """The thread count of one run's steps, fixed or found by timing (see the module).

    ``setting``: the run's ``threads`` (None: auto); ``n_points``: its N; ``device_type``:
    "cpu", "cuda" or "mps"; ``cores``: the cores auto may use (default: this process's; the
    comparison window gives each of its two runs half). Call ``before_step`` before each
    step and ``after_step`` with its compute time after it.
    """

    def __init__(
        self, setting: int | None, n_points: int, device_type: str, cores: int | None = None
    ) -> None:
        self.cores = max(1, cores if cores is not None else available_cores())
        self._samples: dict[int, list[float]] = {}
        self._current = 1
        self._choice = self._first_choice(setting, n_points, device_type)
        if self._choice.threads is None:
            self._samples = {1: [], self.cores: []}

    @property
    def choice(self) -> ThreadChoice:
        return self._choice

    @property
    def measuring(self) -> bool:
        return self._choice.threads is None

    def _first_choice(self, setting: int | None, n_points: int, device_type: str) -> ThreadChoice:
        if setting is not None:
            return ThreadChoice(setting, False, "set by the run's settings")
        if device_type != "cpu":
            return ThreadChoice(1, True, f"auto: the step runs on {device_type}")
        if n_points < MEASURE_FROM_POINTS:
            return ThreadChoice(
                1, True, f"auto: a step of {n_points:,} points is too small to share"
            )
        if self.cores == 1:
            return ThreadChoice(1, True, "auto: one core for this run")
        return ThreadChoice(None, True, f"auto: timing steps on 1 and {self.cores} threads in turn")

    def before_step(self) -> None:
        """Set the count for the next step on this thread (the next one to time, while
        timing)."""
        if self.measuring:
            # The count with fewer samples goes next: 1, cores, 1, cores, ...
            self._current = min(self._samples, key=lambda k: (len(self._samples[k]), k))
        else:
            self._current = self._choice.threads
        _set_threads(self._current)

    def after_step(self, seconds: float, timed: bool = True) -> None:
        """The step just run took ``seconds`` of compute; ``timed``: it may count (not a
        first step, which carries one-off costs)."""
        if not self.measuring or not timed:
            return
        self._samples[self._current].append(seconds)
        if all(len(v) > TIMED_STEPS for v in self._samples.values()):
            self._settle()

    def _settle(self) -> None:
        # Each count's first sample started its workers: left out.
        median = {k: statistics.median(v[1:]) for k, v in self._samples.items()}
        rates = tuple((k, 1.0 / s if s > 0 else float("inf")) for k, s in median.items())
        more = median[self.cores] <= MORE_THREADS_MARGIN * median[1]
        threads = self.cores if more else 1
        shown = ", ".join(f"{rate:,.3g} steps/s on {k}" for k, rate in rates)
        self._choice = ThreadChoice(threads, True, f"auto: timed {shown}", rates)
        _set_threads(threads)


def _set_threads(count: int) -> None:
    import torch

    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
