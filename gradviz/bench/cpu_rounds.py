"""CPU time of training steps, cases interleaved in short windows, background work included.

A watched training step has two costs: what the training thread spends (the hooks, the
checks, the recorded step) and what the recording's threads spend writing a recorded step
a few hundred milliseconds later. Timing whole 100-step stretches of one case after the
other charged the second to whichever case ran next, and on a shared machine the speed
drifts over such seconds-long stretches. Here each round gives every case the same number
of steps (a whole recording interval, so one recorded step each), run in short windows
taken in turn (drift over seconds reaches every case alike), and the round then waits for
the writers to finish. A step's cost also depends on the case that ran just before it
(measured: the same four cases in one fixed order and in its reverse moved a watched
step's ratio to the bare step by 3%): each window takes the cases in a fresh shuffled
order (seeded: a run can be repeated), so that every case follows each other case, and
holds each place in the window, alike.

The training thread's CPU time is charged to the case whose window it was; each case's own
threads (those started while it was built: its recording's writer, a peer's) are charged
to it; what the other background threads spent (zarr's I/O loop and its workers, shared by
every recording) is split evenly among the cases that write recordings.

A real loop logs without pauses; here each case pauses while the others run, which would
make every recording's sink write its waiting scalars ``sink.IDLE_S`` into each pause (a
write a window instead of one a recorded step), so that wait is held off while the rounds
run (``no_idle_writes``).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gradviz.bench.harness import Timing, torch_threads
from gradviz.core.record import sink

#: How long a round waits at its end for the recordings' writers (they write at most every
#: 0.25 s; a recorded step's write takes a few milliseconds).
SETTLE_S = 0.6


@dataclass
class StepCase:
    """One case: ``step`` runs one training step; ``calls`` steps a round; ``threads``: the
    background threads it started; ``writes``: it takes a share of the shared threads'
    time (it writes a recording)."""

    step: Callable[[], None]
    calls: int
    threads: list[threading.Thread] = field(default_factory=list)
    writes: bool = False


#: Threads every recording shares (zarr's event loop and its executor's workers), started
#: by whichever recording comes first: not any one case's own.
SHARED_THREADS = ("zarr", "asyncio_")


def built_with_threads(build: Callable[[], Callable[[], None]]) -> tuple[Callable, list]:
    """(what ``build()`` returns, the threads it started that are its own)."""
    before = set(threading.enumerate())
    made = build()
    new = [t for t in threading.enumerate() if t not in before]
    return made, [t for t in new if not t.name.startswith(SHARED_THREADS)]


def time_rounds(
    cases: dict[str, StepCase], rounds: int, windows: int = 10, warmup: int = 3
) -> tuple[dict[str, Timing], dict[str, Timing]]:
    """(CPU, wall-clock) seconds per step of each case, one entry per round (see the
    module; the wall clock counts the case's windows only); one torch thread. Each case's
    ``calls`` must be a multiple of ``windows``."""
    for name, case in cases.items():
        if case.calls % windows:
            raise ValueError(f"{name}: {case.calls} steps do not split into {windows} windows")
    writers = [name for name, case in cases.items() if case.writes]
    shuffled, order = random.Random(0), list(cases)
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    walls: dict[str, list[float]] = {name: [] for name in cases}
    with torch_threads(1), no_idle_writes():
        for case in cases.values():
            for _ in range(warmup):
                case.step()
        for _ in range(rounds):
            process0, main0 = time.process_time(), time.thread_time()
            own0 = {name: _cpu(case.threads) for name, case in cases.items()}
            spent, wall = dict.fromkeys(cases, 0.0), dict.fromkeys(cases, 0.0)
            for _ in range(windows):
                shuffled.shuffle(order)
                for name in order:
                    case = cases[name]
                    start, wall_start = time.thread_time(), time.perf_counter()
                    for _ in range(case.calls // windows):
                        case.step()
                    spent[name] += time.thread_time() - start
                    wall[name] += time.perf_counter() - wall_start
            time.sleep(SETTLE_S)
            own = {n: max(0.0, _cpu(c.threads) - own0[n]) for n, c in cases.items()}
            background = (time.process_time() - process0) - (time.thread_time() - main0)
            shared = max(0.0, background - sum(own.values()))
            for name, case in cases.items():
                share = shared / len(writers) if name in writers else 0.0
                seconds[name].append((spent[name] + own[name] + share) / case.calls)
                walls[name].append(wall[name] / case.calls)
    return _timings(cases, seconds), _timings(cases, walls)


def _timings(cases: dict[str, StepCase], seconds: dict[str, list[float]]) -> dict[str, Timing]:
    return {name: Timing(name, cases[name].calls, tuple(v)) for name, v in seconds.items()}


@contextlib.contextmanager
def no_idle_writes() -> Iterator[None]:
    """Hold off the recordings' idle writes for the block's length: a benchmark that pauses
    a case while others run would otherwise get a write at every pause (see the module)."""
    before = sink.IDLE_S
    sink.IDLE_S = 3600.0
    try:
        yield
    finally:
        sink.IDLE_S = before


def _cpu(threads: list[threading.Thread]) -> float:
    """CPU seconds the live ``threads`` have run (0 where the platform cannot tell)."""
    total = 0.0
    for thread in threads:
        if thread.ident is None or not hasattr(time, "pthread_getcpuclockid"):
            continue
        try:
            total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:  # the thread has ended
            continue
    return total
