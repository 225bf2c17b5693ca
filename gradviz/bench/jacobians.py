"""Jacobian speed: every method side by side, against the loop and against a FLOP floor.

On one thread, each (net, batch, method) is timed once per repeat, the repeats interleaved
(every case and method in turn, then again), and the median reported, so a slow spell on a
shared machine hits all methods alike. Three figures are checked against targets:

- steady state at B = 1024: ``auto`` at least 200x faster than the loop, for both nets;
- first call in a fresh process (torch imported, model built, nothing computed yet): ``auto``
  at least 100x faster than the loop's steady state;
- B = 16384 on the wide net: ``auto`` within 2x of the floor of one forward pass plus m
  backward passes, the floor's FLOPs divided by the matmul rate measured in this run.

Where a method would take minutes (the loop, and jacfwd on big batches) it runs on part of the
work and the time is scaled up: the loop on its first k samples (each costs m backward passes
of the whole batch's graph), jacfwd on a smaller batch (its cost is linear in B). A repeat of
a millisecond-scale case records the median of a few back-to-back calls.

That loop's cost grows as B^2, so the ratios above measure it as much as gradviz: beside
them, ``bench.jacobian_baselines`` times gradviz against a per-sample loop and
``vmap(jacrev)`` as a user writes them, on the tiny MLP, the wide one and a small CNN.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from gradviz.bench import jacobian_baselines
from gradviz.bench.harness import Case, show_table, time_calls, time_interleaved, torch_threads
from gradviz.bench.jacobian_baselines import scaled_note
from gradviz.core.nets import jacobians as jm
from gradviz.core.nets.networks import NetworkSpec

NETS: dict[str, str] = {"small": "2-20-20-4:tanh", "wide": "64-256-256-10:tanh"}
BATCHES: tuple[int, ...] = (64, 1024, 16384)
QUICK_BATCHES: tuple[int, ...] = (64, 256)
METHODS: tuple[str, ...] = ("auto", "batchsum", "jacrev", "jacfwd", "loop")
#: Methods that run on a smaller batch where the whole one would take minutes (the loop has
#: its own plan); their cost is linear in B, so the time scales exactly.
CAPPED: tuple[str, ...] = ("jacfwd",)
#: A repeat of a fast case times this many seconds of calls (at most MAX_INNER_CALLS) and
#: records their median, so one scheduler hiccup on a shared machine does not decide a
#: millisecond figure.
INNER_SECONDS = 0.05
MAX_INNER_CALLS = 50
MATMUL_CALLS = 5
TARGETS = {"steady_vs_loop": 200.0, "first_call_vs_loop": 100.0, "floor_factor": 2.0}
RATIO_BATCH = 1024
FLOOR_BATCH = 16384


@dataclass
class _Plan:
    """One (net, batch, method) measurement plan: what runs per repeat and how it scales."""

    net: str
    batch: int
    method: str
    case: Case  # what one repeat times (harness.Case)
    scale: Callable[[float], float]  # measured seconds -> estimated seconds for the whole batch
    note: str

    @property
    def name(self) -> str:
        return f"{self.net} B={self.batch} {self.method}"


def run(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    """Measure every method; return figures and target verdicts (targets need quick=False)."""
    with torch_threads(1):
        return _run(max(3, repeats), quick, emit)


def _run(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    batches = QUICK_BATCHES if quick else BATCHES
    budget = 0.2 if quick else 1.0  # seconds one capped measurement may take
    emit(
        f"jacobians: torch {torch.__version__}, 1 thread, float32, median of {repeats} "
        "interleaved repeats"
    )
    models = {name: NetworkSpec.parse(text).build(seed=0) for name, text in NETS.items()}
    cases = [
        _plan(name, models[name], batch, method, budget)
        for name in NETS
        for batch in batches
        for method in METHODS
    ]
    a, b = torch.randn(FLOOR_BATCH, 256), torch.randn(256, 256)
    # Best of a few calls: the floor should be the fastest the matmul runs here, so a slow
    # spell on a shared machine cannot make the target easier.
    matmul = Case(lambda: a @ b, calls=MATMUL_CALLS, warmup=0, statistic="min")
    timings = time_interleaved(
        {"matmul": matmul, **{c.name: c.case for c in cases}},
        repeats,
        warmup=2,  # one untimed call, then the calibration call
        min_seconds=INNER_SECONDS,
        max_calls=MAX_INNER_CALLS,
        statistic="median",
    )
    gflops = 2 * FLOOR_BATCH * 256 * 256 / timings["matmul"].median / 1e9

    # Scaling is applied per repeat, then the median taken across repeats.
    table = {
        (c.net, c.batch, c.method): statistics.median(c.scale(s) for s in timings[c.name].seconds)
        for c in cases
    }
    results = [
        {
            "net": NETS[c.net],
            "batch": c.batch,
            "method": c.method,
            "seconds": table[(c.net, c.batch, c.method)],
            "note": c.note,
        }
        for c in cases
    ]
    report: dict = {
        "threads": 1,
        "repeats": repeats,
        "quick": quick,
        "results": results,
        "matmul_gflops": gflops,
    }
    ratio_batch = RATIO_BATCH if RATIO_BATCH in batches else batches[-1]
    steady = {
        name: table[(name, ratio_batch, "loop")] / table[(name, ratio_batch, "auto")]
        for name in NETS
    }
    report["steady_vs_loop"] = {"batch": ratio_batch, **steady}
    lines = [
        f"steady state at B={ratio_batch}: auto is "
        + ", ".join(f"{r:,.0f}x the loop on {NETS[n]}" for n, r in steady.items())
        + f" (target >= {TARGETS['steady_vs_loop']:.0f}x)"
    ]

    first = {}
    for name in NETS:
        seconds = first_call_seconds(NETS[name], ratio_batch)
        loop = table[(name, ratio_batch, "loop")]
        first[name] = {"seconds": seconds, "vs_loop": loop / seconds}
        lines.append(
            f"first call in a fresh process, {NETS[name]} B={ratio_batch}: auto "
            f"{seconds * 1e3:.2f} ms = {loop / seconds:,.0f}x the loop "
            f"(target >= {TARGETS['first_call_vs_loop']:.0f}x)"
        )
    report["first_call"] = {"batch": ratio_batch, **first}

    floor_batch = batches[-1]
    floor = floor_seconds(NETS["wide"], floor_batch, gflops)
    auto = table[("wide", floor_batch, "auto")]
    report["floor"] = {
        "batch": floor_batch,
        "seconds": floor,
        "auto_seconds": auto,
        "factor": auto / floor,
    }
    lines.append(
        f"floor at B={floor_batch} on {NETS['wide']}: 1 forward + m backward passes = "
        f"{floor * 1e3:.1f} ms at {gflops:.1f} GFLOP/s (float32 matmul, best of "
        f"{MATMUL_CALLS} per repeat, measured in this run); auto "
        f"{auto * 1e3:.1f} ms = {auto / floor:.2f}x the floor "
        f"(target <= {TARGETS['floor_factor']:.0f}x)"
    )
    methods_table = _table(emit, cases, table, batches, lines)
    fair, fair_table = jacobian_baselines.measure(repeats, quick, emit)
    report["fair_baselines"] = fair
    report["tables"] = [methods_table, fair_table]

    report["targets_met"] = (
        None
        if quick
        else {
            "steady_vs_loop": min(steady.values()) >= TARGETS["steady_vs_loop"],
            "first_call_vs_loop": min(f["vs_loop"] for f in first.values())
            >= TARGETS["first_call_vs_loop"],
            "floor_factor": auto / floor <= TARGETS["floor_factor"],
        }
    )
    return report


def floor_seconds(net: str, batch: int, gflops: float) -> float:
    """Seconds for one forward and m input-gradient backward passes of ``net`` on ``batch``
    samples at ``gflops`` (matmul FLOPs only: 2*B*in*out per Linear and pass)."""
    spec = NetworkSpec.parse(net)
    per_pass = sum(2 * batch * lin.in_features * lin.out_features for lin in spec.linears)
    return (1 + spec.out_dim) * per_pass / (gflops * 1e9)


def first_call_seconds(net: str, batch: int) -> float:
    """Seconds of auto's first call in a fresh Python process (torch imported, model and
    inputs ready, one thread), as a CLI user pays it."""
    script = textwrap.dedent(
        f"""
        import json, time, torch
        torch.set_num_threads(1)
        from gradviz.core.nets.jacobians import compute_jacobians
        from gradviz.core.nets.networks import NetworkSpec
        model = NetworkSpec.parse({net!r}).build(seed=0)
        x = torch.randn({batch}, model[0].in_features)
        start = time.perf_counter()
        compute_jacobians(model, x)
        print(json.dumps(time.perf_counter() - start))
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env_with_path(root),
    )
    if done.returncode != 0:
        raise RuntimeError(f"the first-call measurement failed: {done.stderr.strip()}")
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


# ---- planning -----------------------------------------------------------------------------
def _plan(name: str, model: torch.nn.Module, batch: int, method: str, budget: float) -> _Plan:
    """Decide how much of the work to time so one measurement stays near ``budget`` seconds."""
    x = torch.randn(batch, model[0].in_features, generator=torch.Generator().manual_seed(batch))
    if method == "loop":
        return _plan_loop(name, model, x, budget)
    part = batch
    if method in CAPPED:
        small = x[: min(batch, 64)]
        jm.compute_jacobians(model, small, method)  # warm-up (first-call costs stay out)
        per_sample = time_calls(lambda: jm.compute_jacobians(model, small, method)) / len(small)
        while part > 64 and per_sample * part > budget:
            part //= 2
    sub = x[:part]
    note = "" if part == batch else f"timed on {part} samples, scaled x{batch // part}"
    # The harness warms the call up at the size that is timed and calibrates its calls.
    return _Plan(
        name,
        batch,
        method,
        Case(lambda: jm.compute_jacobians(model, sub, method)),
        lambda s, f=batch / part: s * f,
        note,
    )


def _plan_loop(name: str, model: torch.nn.Module, x: torch.Tensor, budget: float) -> _Plan:
    """The loop's cost is one forward plus k * m backward passes of the whole batch: time the
    forward and the first k samples, and scale the per-sample part to all B."""
    batch = len(x)
    one = time_calls(lambda: jm._loop(model, x, samples=1))
    forward = _time_forward(model, x)
    per_sample = max(one - forward, 1e-6)
    k = int(min(batch, max(1, budget / per_sample)))

    def scale(seconds: float) -> float:
        if k == batch:
            return seconds
        return forward + (seconds - forward) * batch / k

    note = "" if k == batch else scaled_note(k, batch)
    # One call per repeat (already about ``budget`` long) and no warm-up beyond the one above.
    case = Case(lambda: jm._loop(model, x, samples=k), calls=1, warmup=0)
    return _Plan(name, batch, "loop", case, scale, note)


def _time_forward(model: torch.nn.Module, x: torch.Tensor) -> float:
    leaf = x.detach().requires_grad_(True)
    return statistics.median(time_calls(lambda: model(leaf)) for _ in range(3))


def _table(emit, cases: list[_Plan], table: dict, batches: tuple[int, ...], lines) -> dict:
    """Print the methods' table (its notes: the cases timed on part of the batch and scaled,
    then ``lines``, the targets' figures) and return it as data."""
    rows = [
        [NETS[name], batch, *(table[(name, batch, m)] * 1e3 for m in METHODS)]
        for name in NETS
        for batch in batches
    ]
    scaled = [f"{NETS[c.net]} B={c.batch} {c.method}: {c.note}" for c in cases if c.note]
    return show_table(
        emit,
        "ms per Jacobian of a batch (B, m, n), every method; one thread, float32",
        ["net", "B", *METHODS],
        rows,
        [*scaled, *lines],
    )


def _env_with_path(root: Path) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    return env


if __name__ == "__main__":  # python -m gradviz.bench.jacobians [--quick] [--repeats N]
    import argparse

    parser = argparse.ArgumentParser(description="Jacobian speed, every method side by side.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    figures = run(options.repeats, options.quick, print)
    print(json.dumps(figures["targets_met"]))
