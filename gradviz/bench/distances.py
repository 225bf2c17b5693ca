"""Benchmark: steps/s of the distance-matrix fit, every method, one torch thread.

One step is ``DistanceFitRun.step()``, the step the CLI and the GUI run: zero_grad,
distances by the method, MSE against the target distance matrix, backward, the read of the
loss and of whether every gradient is finite, Adam step. Target and initial points are
seeded standard normal (D = 3) on the CPU. The target: ``safe`` at least 3x ``masked`` at
N = 1000 and N = 3000.

Beside it, the op alone (``op_cases``): forward, then backward of a fixed upstream gradient,
of ``gradviz.pairwise_distances`` against the seed's masked fix and ``torch.cdist``, in
float32 and float64, at N = 1000, 3000, 10000 and batched (8, 500, 3).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from gradviz.bench.harness import (
    Timing,
    median_ratio,
    show_table,
    time_interleaved,
    torch_threads,
)
from gradviz.core.lab import distances
from gradviz.core.lab.distances import METHODS
from gradviz.core.lab.fit import DistanceFitRun
from gradviz.core.ops import pairwise_distances
from gradviz.core.settings.config import FitConfig

SIZES = (10, 100, 1000, 3000)
QUICK_SIZES = (10, 100)
DIM = 3
BASELINE = "masked"
#: The speed target: this method at least TARGET_RATIO x the baseline at TARGET_SIZES.
TARGET_METHOD = "safe"
TARGET_RATIO = 3.0
TARGET_SIZES = (1000, 3000)
#: More steps than any measurement takes, so that a run never finishes while it is timed.
STEP_ALLOWANCE = 10**9


def fit_run(method: str, n: int, dim: int = DIM, seed: int = 0) -> DistanceFitRun:
    """A fit of ``n`` points by ``method``: gaussian target, random init, Adam at lr 1e-3,
    float32 on the CPU, NaN does not stop it (a NaN step costs what any step costs)."""
    config = FitConfig(
        target="gaussian",
        n=n,
        dim=dim,
        init="random",
        method=method,
        optimizer="adam",
        lr=1e-3,
        steps=STEP_ALLOWANCE,
        seed=seed,
        device="cpu",
        dtype="float32",
    )
    return DistanceFitRun(config)


def measure(
    n: int, repeats: int, methods: tuple[str, ...] = tuple(METHODS), min_seconds: float = 0.25
) -> dict[str, Timing]:
    """Timings (harness.Timing) of ``DistanceFitRun.step`` of each method at N = n,
    interleaved; each repeat of a case runs whole steps for about ``min_seconds`` (at least
    one step)."""
    cases = {method: fit_run(method, n).step for method in methods}
    return time_interleaved(cases, repeats, min_seconds=min_seconds, threads=1)


#: Point-set shapes of the op-alone table ((N, D) or (batch, N, D)).
OP_SHAPES: tuple[tuple[int, ...], ...] = ((1000, DIM), (3000, DIM), (10000, DIM), (8, 500, DIM))
#: A quick run (a smoke test of the suite): small sets, a fraction of a second each.
QUICK_OP_SHAPES: tuple[tuple[int, ...], ...] = ((300, DIM), (4, 100, DIM))
OP_DTYPES = (torch.float32, torch.float64)


def _masked_batched(x: torch.Tensor) -> torch.Tensor:
    """The seed's masked fix, set by set for a batch."""
    if x.ndim == 2:
        return distances.masked(x).distances
    return torch.stack([distances.masked(one).distances for one in x])


#: The op's contenders: name -> (points -> distance matrix).
OP_METHODS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gradviz.pairwise_distances": pairwise_distances,
    "masked (seed's fix)": _masked_batched,
    "torch.cdist": lambda x: torch.cdist(x, x),
}


def op_case(method: Callable[[torch.Tensor], torch.Tensor], shape, dtype) -> Callable[[], None]:
    """Forward, then backward of a fixed upstream gradient, of ``method`` on seeded points."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=generator, dtype=dtype).requires_grad_()
    upstream = torch.randn((*shape[:-1], shape[-2]), generator=generator, dtype=dtype)

    def call() -> None:
        x.grad = None
        method(x).backward(upstream)

    return call


def measure_op(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    """ms of the op alone per method, dtype and shape (one call a repeat, and one repeat,
    at N >= 10000, where the masked fix takes tens of seconds); each row printed as it is
    measured, then the table with the ratios of the others' time to gradviz's."""
    shapes = QUICK_OP_SHAPES if quick else OP_SHAPES
    names = list(OP_METHODS)
    ms: dict[str, dict[str, float]] = {}
    for dtype in OP_DTYPES:
        for shape in shapes:
            label = f"{str(dtype).removeprefix('torch.')} {'x'.join(map(str, shape))}"
            start = time.perf_counter()
            cases = {name: op_case(m, shape, dtype) for name, m in OP_METHODS.items()}
            big = shape[-2] >= 10000
            timings = time_interleaved(
                cases,
                1 if big else repeats,
                min_seconds=0.0 if big else (0.05 if quick else 0.3),
                max_calls=1 if big else 1000,
                threads=1,
            )
            ms[label] = {name: t.median * 1e3 for name, t in timings.items()}
            shown = ", ".join(f"{n} {v:.4g} ms" for n, v in ms[label].items())
            emit(f"  op {label}: {shown} (measured in {time.perf_counter() - start:.1f} s)")
    gradviz_name = names[0]
    headers = [
        "dtype, shape",
        *names,
        *(f"{n.split()[0]} time / gradviz time" for n in names[1:]),
    ]
    rows = [
        [label, *(v[n] for n in names), *(v[n] / v[gradviz_name] for n in names[1:])]
        for label, v in ms.items()
    ]
    table = show_table(
        emit,
        "the op alone: ms per forward + backward of a fixed upstream gradient, one thread",
        headers,
        rows,
    )
    return {"unit": "ms per forward + backward", "threads": 1, "ms": ms, "table": table}


def measure_op_cpu(rounds: int, quick: bool, emit: Callable[[str], None]) -> dict:
    """The op alone against torch.cdist in CPU time of the calling thread (time.thread_time),
    ``rounds`` interleaved calls each (one at N >= 10000), the median per case.

    On a shared machine the wall-clock figures of ``measure_op`` also count the time a call
    waits for a core, which swamps a 1.2-1.4x difference; a thread's own CPU time does not."""
    shapes = QUICK_OP_SHAPES if quick else OP_SHAPES
    names = ("gradviz.pairwise_distances", "torch.cdist")
    ms: dict[str, dict[str, float]] = {}
    with torch_threads(1):
        for dtype in OP_DTYPES:
            for shape in shapes:
                label = f"{str(dtype).removeprefix('torch.')} {'x'.join(map(str, shape))}"
                cases = {name: op_case(OP_METHODS[name], shape, dtype) for name in names}
                for call in cases.values():
                    call()  # warm-up
                seconds: dict[str, list[float]] = {name: [] for name in names}
                for _ in range(1 if shape[-2] >= 10000 else rounds):
                    for name, call in cases.items():
                        start = time.thread_time()
                        call()
                        seconds[name].append(time.thread_time() - start)
                ms[label] = {n: sorted(v)[len(v) // 2] * 1e3 for n, v in seconds.items()}
                ratio = ms[label]["torch.cdist"] / ms[label]["gradviz.pairwise_distances"]
                emit(
                    f"  op CPU time {label}: gradviz {ms[label][names[0]]:.4g} ms, "
                    f"torch.cdist {ms[label][names[1]]:.4g} ms, cdist / gradviz {ratio:.2f}x"
                )
    rows = [[label, *(v[n] for n in names), v[names[1]] / v[names[0]]] for label, v in ms.items()]
    table = show_table(
        emit,
        "the op alone in CPU time of the calling thread: ms per forward + backward, one thread",
        ["dtype, shape", *names, "cdist time / gradviz time"],
        rows,
        [f"median of {rounds} interleaved calls (one at N >= 10000)"],
    )
    return {"unit": "ms of the calling thread's CPU time", "threads": 1, "ms": ms, "table": table}


def run(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    """Measure every method at each size; print tables through ``emit``; return the figures."""
    sizes = QUICK_SIZES if quick else SIZES
    methods = tuple(METHODS)
    emit(
        f"distances: fit steps/s (DistanceFitRun.step: zero_grad + forward + MSE + backward "
        f"+ finiteness check + Adam), D = {DIM}, one torch thread, median of {repeats} "
        "interleaved repeat(s)"
    )
    speed: dict[str, dict[str, float]] = {m: {} for m in methods}
    ratio: dict[str, dict[str, float]] = {m: {} for m in methods}
    for n in sizes:
        start = time.perf_counter()
        timings = measure(n, repeats, methods, min_seconds=0.05 if quick else 0.25)
        for m in methods:
            speed[m][str(n)] = timings[m].per_second
            ratio[m][str(n)] = median_ratio(timings[m], timings[BASELINE])
        emit(f"  N = {n}: measured in {time.perf_counter() - start:.1f} s")

    headers = ["method", *(f"N={n}" for n in sizes)]
    verdict = _verdict(ratio[TARGET_METHOD], sizes)
    tables = [
        show_table(emit, "steps/s", headers, [[m, *speed[m].values()] for m in methods]),
        show_table(
            emit,
            f"ratio to {BASELINE} (median of per-repeat ratios)",
            headers,
            [[m, *ratio[m].values()] for m in methods],
            [verdict["summary"]],
        ),
    ]
    op = measure_op(repeats, quick, emit)
    op_cpu = measure_op_cpu(max(5, repeats), quick, emit)
    return {
        "tables": [*tables, op.pop("table"), op_cpu.pop("table")],
        "op_alone": op,
        "op_alone_cpu_time": op_cpu,
        "unit": "steps/s",
        "step": "DistanceFitRun.step: zero_grad + forward + MSE loss + backward + loss and "
        "gradient finiteness read + Adam step",
        "dim": DIM,
        "threads": 1,
        "repeats": repeats,
        "sizes": list(sizes),
        "steps_per_second": speed,
        "ratio_to_" + BASELINE: ratio,
        "target": verdict,
    }


def _verdict(ratios: dict[str, float], sizes: tuple[int, ...]) -> dict:
    rule = f"{TARGET_METHOD} >= {TARGET_RATIO:g}x {BASELINE} at " + " and ".join(
        f"N = {n}" for n in TARGET_SIZES
    )
    measured = {str(n): ratios[str(n)] for n in TARGET_SIZES if n in sizes}
    if len(measured) < len(TARGET_SIZES):
        met = None
        summary = f"target ({rule}): not measured in a quick run"
    else:
        met = all(r >= TARGET_RATIO for r in measured.values())
        shown = ", ".join(f"{r:.2f}x at N = {n}" for n, r in measured.items())
        summary = f"target ({rule}): {'met' if met else 'NOT met'} ({shown})"
    return {"rule": rule, "ratios": measured, "met": met, "summary": summary}
