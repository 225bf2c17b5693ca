"""How many torch CPU threads a run's steps use: the number its settings give, or "auto".

Why auto exists: a distance fit's step at the default N = 200 is a few hundred microseconds
of work in a few dozen small operations. On a machine that is doing something else, OpenMP's
workers spin-wait against the other processes (on 2 cores beside two busy processes the
default experiment ran 10-16 steps/s on 2 threads and 190-210 on 1; a single 2-thread step
there took 190 ms against 4 ms on 1), while on an idle machine 2 threads ran it 1.3 times
faster. So a step of fewer than ``QUIET_FROM_POINTS`` points, or one that runs on a GPU,
runs on one thread; from ``QUIET_FROM_POINTS`` to ``MEASURE_FROM_POINTS`` points auto starts
on one thread and looks at the machine every ``LOOK_EVERY_S`` seconds of steps (the tasks
running or ready to run, from Linux's /proc, its own threads left out; about 70
microseconds a look): it times the counts only once nothing else has run for
``QUIET_LOOKS`` looks in a row (again after ``RECHECK_S``), and one look that sees other
work takes it back to one thread at once, without timing. Where the system does not say,
such a step stays on one thread. From ``MEASURE_FROM_POINTS`` points a step takes
milliseconds and more threads may pay even beside other work: auto times a few steps on 1
thread and then on every core this process may use (the first step after a change of
count left out: it wakes that count's OpenMP workers), and keeps the faster; more
threads are kept only when clearly faster (``MORE_THREADS_MARGIN``), since they also take
cores from everything else on the machine.

Which is faster changes with the machine's load (beside two busy processes a step at
N = 1000 ran 4.6 times slower on 2 threads than on 1, idle 1.7 times faster), and a load may
come or go after auto timed. So auto keeps watching its own steps, at no cost but a few
numbers a step, and times both counts again (``RETIMED_STEPS`` each) when

- the median of its last ``DRIFT_WINDOW`` steps is more than ``DRIFT_FACTOR`` times slower
  than the steps it timed on its count, or, once that holds, more than ``DRIFT_FACTOR``
  times slower or faster than its first steps after choosing; or
- its steps have run ``RECHECK_S`` seconds since it last timed (a load that leaves may speed
  one thread less than that factor while more threads would now win), or
  ``CLOSE_CALL_RECHECK_S`` seconds after a timing whose counts came out close (one moment
  of the machine may have decided it), each count then timed for longer
  (``CLOSE_CALL_TIMED_S``); close again, twice as long after it, and so on up to
  ``RECHECK_S``.

A timing costs what the slower count's steps lost; each is followed by at least
``DRIFT_SPACING`` (after a change of speed) or ``RECHECK_SPACING`` (periodic) times that
many seconds of steps, so timing again takes about 10% of a run's time at most where its
speed keeps changing and about 2% where it holds (a timing's cost is known only after it:
the first one after a load came may cost more).

The count changes a run's speed, not its course: its coordinates and gradients came out
bit-identical on 1 and on 2 threads (N = 1000 to 3000, free coordinates and a network,
float32 and float64), also when auto switches between them. Its loss, a mean over N x N
entries whose sum torch splits between the threads, may differ in the last bits (relative
2e-7 in float32, 4e-16 in float64), and no step uses it (tests/core/test_run_threads.py).

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
from collections import deque
from dataclasses import dataclass

#: From this many points auto times steps before choosing (below it: one thread, or see
#: ``QUIET_FROM_POINTS``).
MEASURE_FROM_POINTS = 1000
#: From this many points (to ``MEASURE_FROM_POINTS``) auto times steps only while nothing
#: else runs on the machine, and goes back to one thread as soon as something does.
QUIET_FROM_POINTS = 200
#: Seconds of steps between two looks at what else runs on the machine; a timing waits
#: for ``QUIET_LOOKS`` quiet looks in a row.
LOOK_EVERY_S = 0.5
QUIET_LOOKS = 2
#: Steps timed per thread count. A timing runs each count's steps one after another, and
#: the first step after a change of count is not timed: it wakes (or first starts) that
#: count's OpenMP workers, and the other count's still spin. Taken in turn one step each,
#: every 2-thread step at N = 200 paid that: timed 436 against 462 steps/s on 1 thread,
#: while run on, 2 threads took 748 against 569.
TIMED_STEPS = 3
#: Steps timed per count when auto times again.
RETIMED_STEPS = 3
#: ... and at least this many seconds of each count's steps: three steps of 200 points
#: (about 2 ms each) timed one moment of a machine whose second core's speed wanders, and
#: 2 threads came out 1.05x to 1.45x as fast as 1 from one run to the next.
TIMED_S = 0.05
#: More threads are kept only if their mean step takes at most this fraction of one
#: thread's.
MORE_THREADS_MARGIN = 0.85
#: ... but a small step is timed only on a quiet machine, and there a tie goes to more
#: threads: a second core's speed wanders over tenths of a second (2-thread steps at N = 200
#: took 1.15-1.9 ms, 1 thread a steady 1.7), so a short timing often catches 2 threads in a
#: slow moment, and 1 thread was kept for 10 s of steps (a close call, below, is still
#: timed again). Two sets of five interleaved runs at N = 200 idle, fit / bare loop's best:
#: 0.72-0.97 and 0.71-0.95 with the margin above (one run in each kept 1 thread),
#: 0.87-0.96 and 0.89-0.95 with this one.
QUIET_MORE_THREADS_MARGIN = 1.0
#: Auto times again when the median of its last ``DRIFT_WINDOW`` steps differs from what it
#: expects by more than this factor (see the module).
DRIFT_FACTOR = 1.5
DRIFT_WINDOW = 3
#: ... and in any case after this many seconds of steps since it last timed.
RECHECK_S = 10.0
#: Seconds of steps after a timing that the watch leaves out: the other count's OpenMP
#: workers spin on for a while (about 0.2 s) and slow those steps, and a baseline taken from
#: them made later, normal steps look several times faster, and auto timed again and again.
SETTLE_S = 0.3
#: Seconds of steps after a timing, as a multiple of the seconds that timing lost on its
#: slower count, before auto times again for a change of speed and periodically.
DRIFT_SPACING = 10.0
RECHECK_SPACING = 50.0
#: A timing whose counts came out within ``1 / MORE_THREADS_MARGIN`` of each other is a
#: close call, which one moment of the machine can decide either way: at N = 1000 on 2
#: idle cores auto once timed 28.7 steps/s on 1 thread and 29.9 on 2, and kept 1 thread
#: while a bare loop then ran 26.8 and 40.6. A close call is timed again after this many
#: seconds of steps, and each close call in a row after twice as many as the last, up to
#: ``RECHECK_S``: two timings in a row at N = 1000 idle once came out 1.13x, where the bare
#: loop then ran 1.48x as fast on 2 threads, and 1 thread was kept for 10 s of steps. Close,
#: the slower count costs little.
CLOSE_CALL_RECHECK_S = 1.0
CLOSE_CALL = "the last timing was a close call"
#: ... and each count is then timed at least this many seconds (``TIMED_S`` is too short to
#: settle it: at N = 200 two timings in a row came out 389 and 422 steps/s on 1 and 2 threads
#: where a bare loop ran 487 and 720). Close, the slower count costs little.
CLOSE_CALL_TIMED_S = 0.2

#: A count's timed steps come down to their mean: its speed is steps per second, slow steps
#: included. Beside two busy processes a 2-thread step at N = 1000 runs fast most of the
#: time and several times slower now and then, which a median hid. Over six interleaved
#: runs each the fit there ran 0.73-1.07x of the bare loop's best by the median and
#: 0.79-1.06x by the mean (an earlier six, the drift watch also by the mean: 0.43-1.11x and
#: 0.75-1.0x).
_typical_step = statistics.fmean

#: What "auto" does, in the words of ``--help`` and the form's tooltip.
AUTO_RULE = (
    f"auto: 1 thread for a step of under {QUIET_FROM_POINTS:,} points or on a GPU; from "
    f"{QUIET_FROM_POINTS:,} points a few steps are timed on 1 thread and on every core, and "
    f"the faster is kept (under {MEASURE_FROM_POINTS:,} points only while nothing else runs "
    "on the machine, else 1 thread), timed again when the steps' speed changes and every "
    f"{RECHECK_S:g} s or so"
)


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ThreadChoice:
    """The torch CPU threads a run's steps use, and why.

    ``threads``: the count (None while auto is still timing for the first time; while it
    times again, the count it had chosen); ``auto``: chosen by the rule, not set by the run's
    settings; ``why``: the reason in words; ``measured``: the steps/s of the latest timing on
    each count, (threads, steps/s) pairs, where auto timed them; ``timings``: how many times
    auto has timed (more than 1: it timed again when the machine's speed changed);
    ``timing``: the next steps are being timed, on each count in its turn.
    """

    threads: int | None
    auto: bool
    why: str
    measured: tuple[tuple[int, float], ...] = ()
    timings: int = 0
    timing: bool = False

    def text(self) -> str:
        """One line, e.g. "1 thread (auto: 200 points, a step too small to share)"."""
        if self.threads is None:
            return f"threads not chosen yet ({self.why})"
        plural = "" if self.threads == 1 else "s"
        return f"{self.threads} thread{plural} ({self.why})"

    def to_dict(self) -> dict:
        """JSON-ready: count, auto, why, the steps/s of the latest timing per count and how
        many times auto timed."""
        return {
            "count": self.threads,
            "auto": self.auto,
            "why": self.why,
            "measured_steps_per_second": {str(k): rate for k, rate in self.measured},
            "timings": self.timings,
        }


class ThreadPlan:
    """The thread count of one run's steps, fixed or found by timing (see the module).

    ``setting``: the run's ``threads`` (None: auto); ``n_points``: its N; ``device_type``:
    "cpu", "cuda" or "mps"; ``cores``: the cores auto may use (default: this process's; the
    comparison window gives each of its two runs half). Call ``before_step`` before each
    step and ``after_step`` with its compute time after it: those times are all auto goes by
    (no clock of its own), so a paused run's wait counts for nothing.
    """

    def __init__(
        self, setting: int | None, n_points: int, device_type: str, cores: int | None = None
    ) -> None:
        self.cores = max(1, cores if cores is not None else available_cores())
        self._samples: dict[int, list[float]] = {}
        self._current = 1
        self._switched = False  # the step being run is the first on a new count
        self._gate: _QuietGate | None = None  # a small step's look at the machine's other work
        self._choice = self._first_choice(setting, n_points, device_type)
        self._watch = _Watch()
        self._wanted, self._reason = 0, None
        self._close_calls = 0  # timings in a row whose counts came out close
        # Auto times only where it has a choice to make; every other plan stays as it is.
        self._times = self._choice.threads is None or self._gate is not None
        if self._choice.threads is None:
            self._start_timing(TIMED_STEPS, None)

    @property
    def choice(self) -> ThreadChoice:
        return self._choice

    @property
    def measuring(self) -> bool:
        """Whether the next steps are being timed (first or again)."""
        return bool(self._samples)

    def _first_choice(self, setting: int | None, n_points: int, device_type: str) -> ThreadChoice:
        if setting is not None:
            return ThreadChoice(setting, False, "set by the run's settings")
        if device_type != "cpu":
            return ThreadChoice(1, True, f"auto: the step runs on {device_type}")
        small = f"auto: a step of {n_points:,} points is too small to share"
        if n_points < MEASURE_FROM_POINTS:
            if n_points < QUIET_FROM_POINTS or self.cores == 1 or others_running() is None:
                return ThreadChoice(1, True, small)
            self._gate = _QuietGate()
            return ThreadChoice(1, True, small + " beside other work; timed once none runs")
        if self.cores == 1:
            return ThreadChoice(1, True, "auto: one core for this run")
        why = f"auto: timing steps on 1 and then {self.cores} threads"
        return ThreadChoice(None, True, why, timing=True)

    def before_step(self) -> None:
        """Set the count for the next step on this thread (the next one to time, while
        timing)."""
        before = self._current
        if self.measuring:
            # The count running goes on until it has its samples, then the other.
            unfinished = [k for k, v in self._samples.items() if self._short(v)]
            self._current = before if before in unfinished else unfinished[0]
        else:
            self._current = self._choice.threads
        self._switched = self._current != before
        _set_threads(self._current)

    def after_step(self, seconds: float, timed: bool = True) -> None:
        """The step just run took ``seconds`` of compute; ``timed``: it may count (not a
        first step, which carries one-off costs)."""
        if not self._times or not timed:
            return
        if self.measuring:
            if not self._switched:
                self._samples[self._current].append(seconds)
            if not any(self._short(v) for v in self._samples.values()):
                self._settle()
            return
        if self._gate is not None:
            self._after_small_step(seconds)
            return
        if self._watch.active:
            reason = self._watch.after_step(seconds)
            if reason is not None:
                self._start_timing(RETIMED_STEPS, reason)

    def _short(self, samples: list[float]) -> bool:
        """Whether a count's timed steps are too few to settle on (see ``TIMED_S``)."""
        long_enough = CLOSE_CALL_TIMED_S if self._reason == CLOSE_CALL else TIMED_S
        return len(samples) < self._wanted or sum(samples) < long_enough

    def _after_small_step(self, seconds: float) -> None:
        """A small step shares only while nothing else runs: a step of a few hundred
        microseconds on two threads beside two busy processes ran 40 times slower (OpenMP's
        workers wait on each other), so it is never timed there, and one look that sees
        other work takes it back to one thread at once."""
        others = self._gate.after_step(seconds)
        if others is None:
            return
        old = self._choice
        if others > 0 and old.threads != 1:
            why = f"auto: back to 1 thread: {others} other task{'s' if others > 1 else ''} running"
            self._choice = ThreadChoice(1, True, why, old.measured, old.timings)
            _set_threads(1)
        elif others == 0 and self._gate.quiet():
            if self._gate.timing_due():
                self._gate.timed()
                first = old.timings == 0
                reason = None if first else self._gate.recheck_reason()
                self._start_timing(TIMED_STEPS if first else RETIMED_STEPS, reason)
            elif old.threads != self._gate.quiet_threads:  # as timed on a quiet machine
                threads = self._gate.quiet_threads
                why = f"auto: {threads} threads again: nothing else runs on the machine"
                self._choice = ThreadChoice(threads, True, why, old.measured, old.timings)
                _set_threads(threads)

    def _start_timing(self, wanted: int, reason: str | None) -> None:
        """Time ``wanted`` steps on each count from the next step; ``reason``: why again
        (None: the first timing)."""
        self._samples = {1: [], self.cores: []}
        self._wanted = wanted
        self._reason = reason
        if reason is not None:
            old = self._choice
            why = f"auto: timing 1 and {self.cores} threads again: {reason}"
            self._choice = ThreadChoice(old.threads, True, why, old.measured, old.timings, True)

    def _settle(self) -> None:
        step = {k: _typical_step(v) for k, v in self._samples.items()}
        rates = tuple((k, 1.0 / s if s > 0 else float("inf")) for k, s in step.items())
        margin = MORE_THREADS_MARGIN if self._gate is None else QUIET_MORE_THREADS_MARGIN
        more = step[self.cores] <= margin * step[1]
        threads = self.cores if more else 1
        other = 1 if more else self.cores
        # What the slower count's steps cost beyond the chosen count's.
        lost = max(0.0, sum(self._samples[other]) - len(self._samples[other]) * step[threads])
        shown = ", ".join(f"{_rate_words(rate)} steps/s on {k}" for k, rate in rates)
        why = f"auto: timed {shown}"
        if self._reason is not None:
            why += f" (again: {self._reason})"
        timings = self._choice.timings + 1
        self._choice = ThreadChoice(threads, True, why, rates, timings)
        self._samples = {}
        close = MORE_THREADS_MARGIN < step[self.cores] / step[1] < 1 / MORE_THREADS_MARGIN
        self._close_calls = self._close_calls + 1 if close else 0
        # Timed again soon only where that is sooner than the periodic check.
        close_calls = self._close_calls if _recheck_s(self._close_calls) < RECHECK_S else 0
        if self._gate is not None:  # a small step: its looks at the machine watch it
            self._gate.quiet_threads, self._gate.close_calls = threads, close_calls
        else:
            self._watch.restart(step[threads], lost, close_calls)
        _set_threads(threads)


class _QuietGate:
    """When a small step may be timed on more threads: looks at the machine's other work
    every ``LOOK_EVERY_S`` seconds of steps; after ``QUIET_LOOKS`` quiet looks in a row the
    counts are timed (the first time, or ``RECHECK_S`` seconds of steps after the last), or
    the count the latest timing chose is taken back without timing (sooner after close
    calls, see ``_recheck_s``)."""

    def __init__(self) -> None:
        self._since_look = 0.0
        self._since_timing: float | None = None  # None: never timed
        self._quiet = 0
        self.quiet_threads = 1  # the count the latest timing chose (on a quiet machine)
        # Close calls in a row up to the latest timing, as the plan passes them (0: it was
        # clear, or their back-off has reached the periodic check).
        self.close_calls = 0

    def after_step(self, seconds: float) -> int | None:
        """The tasks running beside this process, when it is time to look (else None)."""
        self._since_look += seconds
        if self._since_timing is not None:
            self._since_timing += seconds
        if self._since_look < LOOK_EVERY_S:
            return None
        self._since_look = 0.0
        others = others_running()
        if others is None:
            return None
        self._quiet = self._quiet + 1 if others == 0 else 0
        return others

    def quiet(self) -> bool:
        return self._quiet >= QUIET_LOOKS

    def timing_due(self) -> bool:
        return self._since_timing is None or self._since_timing >= _recheck_s(self.close_calls)

    def recheck_reason(self) -> str:
        """Why a timing after the first is due, in words."""
        return CLOSE_CALL if self.close_calls else "nothing else runs on the machine"

    def timed(self) -> None:
        self._since_timing = 0.0
        self._quiet = 0


def others_running() -> int | None:
    """Tasks running or ready to run on the machine now, this process's own left out; None
    where the system does not say (it is read from Linux's /proc). In a container /proc
    may show the host's tasks: then more is seen running, and auto keeps one thread."""
    try:
        with open("/proc/loadavg") as loadavg:
            running = int(loadavg.read().split()[3].split("/")[0])
        own = 0
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/stat") as stat:
                    own += stat.read().rsplit(")", 1)[1].split()[0] == "R"
            except OSError:
                continue  # a thread that ended meanwhile
    except (OSError, ValueError, IndexError):
        return None
    return max(0, running - own)


class _Watch:
    """Auto's watch over its own steps between timings: when to time again (see the
    module). Fed each step's seconds; knows nothing of threads."""

    def __init__(self) -> None:
        self.active = False

    def restart(self, timed_s: float, lost_s: float, close_calls: int) -> None:
        """A timing chose a count whose steps took ``timed_s`` each; the slower count's
        steps lost ``lost_s`` seconds; ``close_calls``: close calls in a row, to be timed
        again soon (0: none, or not sooner than the periodic check)."""
        self._close_calls = close_calls
        self.active = True
        self._timed = timed_s
        self._steady: float | None = None  # the median of the first steps after choosing
        self._recent: deque[float] = deque(maxlen=DRIFT_WINDOW)
        self._since = 0.0
        self._drift_after = DRIFT_SPACING * lost_s
        self._recheck_after = max(_recheck_s(close_calls), RECHECK_SPACING * lost_s)

    def after_step(self, seconds: float) -> str | None:
        """Why to time again after this step, in words, or None."""
        self._since += seconds
        if self._since <= SETTLE_S:
            return None
        self._recent.append(seconds)
        if len(self._recent) < DRIFT_WINDOW:
            return None
        now = statistics.median(self._recent)
        if self._steady is None and now <= DRIFT_FACTOR * self._timed:
            self._steady = now  # the speed the choice runs at, switching no more
        expected = self._timed if self._steady is None else self._steady
        ratio = now / expected if expected > 0 else 1.0
        drifted = ratio > DRIFT_FACTOR or ratio < 1.0 / DRIFT_FACTOR
        if drifted and self._since >= self._drift_after:
            change = "slower" if ratio > 1 else "faster"
            factor = ratio if ratio > 1 else 1.0 / ratio
            return f"its steps ran {factor:.2g}x {change}"
        if self._since >= self._recheck_after:
            periodic = f"a periodic check after {self._since:.3g} s of steps"
            return CLOSE_CALL if self._close_calls else periodic
        return None


def _recheck_s(close_calls: int) -> float:
    """Seconds of steps from a timing to the next one, at the least, after ``close_calls``
    close calls in a row (0: the timing was clear)."""
    if not close_calls:
        return RECHECK_S
    return min(RECHECK_S, CLOSE_CALL_RECHECK_S * 2 ** (close_calls - 1))


def _rate_words(rate: float) -> str:
    """Steps per second as people write them: 1,980 or 5.72, never 1.98e+03."""
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"


def _set_threads(count: int) -> None:
    import torch

    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
