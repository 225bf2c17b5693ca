"""Benchmark: the cost of gradviz's DDP communication hook, as a ratio to the bare DDP step.

Two gloo processes on this machine (one torch thread each) train the same MLP
784-512-512-10 at batch 64 per rank (zero_grad, forward, cross-entropy, backward with the
all-reduce, SGD). Cases, interleaved, each its own DDP model:

- ``bare DDP``: DDP's built-in all-reduce, no hook;
- ``python allreduce hook``: torch's default ``allreduce_hook`` registered from Python (what
  any Python comm hook costs, before gradviz does anything);
- ``gradviz hook``: the hook ``gradviz.watch`` registers (a finiteness check of each bucket,
  then the same all-reduce), its listener counting;
- ``gradviz watch K=100``: ``gradviz.watch(model, every=100)`` on the DDP model, its hook
  included (what a user pays).

Times are rank 0's wall clock per step (the all-reduce waits for the other rank, so CPU time
alone would miss it) and its CPU time, medians of per-repeat ratios.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gradviz.bench.harness import Timing, median_ratio, show_table

BASELINE = "bare DDP"
CASES = ("bare DDP", "python allreduce hook", "gradviz hook", "gradviz watch K=100")
STEPS_PER_REPEAT = 100
QUICK_STEPS = 20
TIMEOUT_S = 600


def run(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    steps = QUICK_STEPS if quick else STEPS_PER_REPEAT
    emit(
        f"ddp: DDP training step (MLP 784-512-512-10, B=64 per rank, two gloo processes, one "
        f"torch thread each), ratio to the bare DDP step, {repeats} interleaved repeat(s) of "
        f"{steps} steps"
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = _run_ranks(Path(tmp), steps, repeats)
    emit(f"  measured in {time.perf_counter() - started:.1f} s")
    wall = {n: Timing(n, steps, tuple(v)) for n, v in result["wall"].items()}
    cpu = {n: Timing(n, steps, tuple(v)) for n, v in result["cpu"].items()}
    ms = {n: t.median * 1e3 for n, t in wall.items()}
    wall_ratios = {n: median_ratio(wall[BASELINE], t) for n, t in wall.items()}
    cpu_ratios = {n: median_ratio(cpu[BASELINE], t) for n, t in cpu.items()}
    rows = [[n, ms[n], wall_ratios[n], cpu_ratios[n]] for n in CASES]
    table = show_table(
        emit,
        "rank 0 per DDP step: wall ms, and ratios to the bare DDP step (medians of per-repeat "
        "ratios)",
        ["case", "wall ms", "wall ratio", "CPU ratio"],
        rows,
    )
    return {
        "tables": [table],
        "unit": "rank 0 wall ms per DDP step",
        "steps_per_repeat": steps,
        "repeats": repeats,
        "ms": ms,
        "ratio_to_bare": wall_ratios,
        "cpu_ratio_to_bare": cpu_ratios,
    }


def _run_ranks(folder: Path, steps: int, repeats: int) -> dict:
    init = f"file://{folder / 'init'}"
    out = folder / "rank0.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_root(), env.get("PYTHONPATH")]))
    code = "from gradviz.bench.ddp import rank_main; rank_main()"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(r), init, str(folder), str(steps), str(repeats)],
            env=env,
        )
        for r in (0, 1)
    ]
    codes = [p.wait(TIMEOUT_S) for p in procs]
    if codes != [0, 0]:
        raise RuntimeError(f"the DDP benchmark's ranks exited with {codes}")
    return json.loads(out.read_text())


def _root() -> str:
    return str(Path(__file__).resolve().parents[2])


def rank_main() -> None:
    """One rank of the benchmark (run by ``_run_ranks`` in its own process)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    import gradviz
    from gradviz.core.record import ddp

    rank, init, folder = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    steps, repeats = int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))

    def make(case: str):
        torch.manual_seed(0)
        net = nn.Sequential(
            nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )
        model = nn.parallel.DistributedDataParallel(net)
        rec = None
        if case == "python allreduce hook":
            model.register_comm_hook(None, default_hooks.allreduce_hook)
        elif case == "gradviz hook":
            listener = _CountingListener(model)
            ddp.install(model, listener)
            model._gradviz_listener = listener  # kept alive with the model
        elif case == "gradviz watch K=100":
            rec = gradviz.watch(model, folder / f"rank{rank}-watch", every=100)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)

        def step() -> None:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if rec is not None:
                rec.log(loss=loss)
            opt.step()

        step.close = lambda: rec.close() if rec is not None else None
        return step

    cases = {case: make(case) for case in CASES}
    wall: dict[str, list[float]] = {c: [] for c in CASES}
    cpu: dict[str, list[float]] = {c: [] for c in CASES}
    for step in cases.values():
        for _ in range(5):
            step()
    for _ in range(repeats):
        for case, step in cases.items():
            dist.barrier()
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(steps):
                step()
            wall[case].append((time.perf_counter() - w0) / steps)
            cpu[case].append((time.process_time() - c0) / steps)
    for step in cases.values():
        step.close()
    dist.destroy_process_group()
    if rank == 0:
        (folder / "rank0.json").write_text(json.dumps({"wall": wall, "cpu": cpu}))


class _CountingListener:
    """Listens to buckets as a recorder does (the same finiteness check), recording nothing."""

    def __init__(self, model) -> None:
        from gradviz.core.record.ddp import LocalChecks

        names = {id(p): (i, n) for i, (n, p) in enumerate(model.named_parameters())}
        self.checks = LocalChecks(names, next(model.parameters()).device)

    def on_bucket(self, bucket) -> None:
        if self.checks.owns(bucket):
            self.checks.on_bucket(bucket)
