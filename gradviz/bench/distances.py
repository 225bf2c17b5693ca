"""Benchmark: steps/s of the distance-matrix fit, every method, one torch thread.

One step is what a fit does: zero_grad, distances by the method, MSE against the target
distance matrix, backward, Adam step. The target: ``safe`` at least 3x ``masked`` at
N = 1000 and N = 3000.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from gradviz.bench.harness import Timing, format_table, median_ratio, time_interleaved
from gradviz.core.distances import METHODS, pairwise_distances

SIZES = (10, 100, 1000, 3000)
QUICK_SIZES = (10, 100)
DIM = 3
BASELINE = "masked"
#: The speed target: this method at least TARGET_RATIO x the baseline at TARGET_SIZES.
TARGET_METHOD = "safe"
TARGET_RATIO = 3.0
TARGET_SIZES = (1000, 3000)


def exact_target(n: int, dim: int = DIM, seed: int = 0) -> torch.Tensor:
    """The target distance matrix (N, N) float32 of seeded standard-normal points."""
    points = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))
    return torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")


def make_fit_step(
    method: str, target: torch.Tensor, dim: int = DIM, seed: int = 1, lr: float = 1e-3
) -> Callable[[], torch.Tensor]:
    """One fit step of ``method`` towards ``target`` (N, N); each call runs one step.

    Coordinates (N, dim) float32 start seeded standard normal, as in the classic example.
    """
    n = len(target)
    init = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))
    coords = torch.nn.Parameter(init)
    optimizer = torch.optim.Adam([coords], lr=lr)
    loss_fn = torch.nn.MSELoss()

    def step() -> torch.Tensor:
        optimizer.zero_grad()
        loss = loss_fn(pairwise_distances(coords, method).distances, target)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def measure(
    n: int, repeats: int, methods: tuple[str, ...] = tuple(METHODS), min_seconds: float = 0.25
) -> dict[str, Timing]:
    """Timings (harness.Timing) of a fit step of each method at N = n, interleaved; each
    repeat of a case runs whole steps for about ``min_seconds`` (at least one step)."""
    target = exact_target(n)
    cases = {method: make_fit_step(method, target) for method in methods}
    return time_interleaved(cases, repeats, min_seconds=min_seconds, threads=1)


def run(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    """Measure every method at each size; print tables through ``emit``; return the figures."""
    sizes = QUICK_SIZES if quick else SIZES
    methods = tuple(METHODS)
    emit(
        f"distances: fit steps/s (zero_grad + forward + MSE + backward + Adam), D = {DIM}, "
        f"one torch thread, median of {repeats} interleaved repeat(s)"
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
    emit("steps/s")
    for line in format_table(headers, [[m, *speed[m].values()] for m in methods]):
        emit("  " + line)
    emit(f"ratio to {BASELINE} (median of per-repeat ratios)")
    for line in format_table(headers, [[m, *ratio[m].values()] for m in methods]):
        emit("  " + line)

    verdict = _verdict(ratio[TARGET_METHOD], sizes)
    emit(verdict["summary"])
    return {
        "unit": "steps/s",
        "step": "zero_grad + forward + MSELoss + backward + Adam step",
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
