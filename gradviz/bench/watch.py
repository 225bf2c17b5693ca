"""Benchmark: the cost of ``gradviz.watch`` in a training loop, as a ratio to the bare loop.

CPU training steps (zero_grad, forward, cross-entropy, backward, Adam): an MLP
784-512-512-10 at batch 256, a small CNN (two 3x3 convolutions, 28x28 inputs) at batch
32, a ReLU + Dropout MLP on sparse inputs at batch 8 (most gradient entries exactly zero,
as ReLU, dropout and images with blank borders make them) and the first MLP with its loss
scaled by 1e-39 (subnormal gradients, as late in training many entries are). Each is
timed bare, with ``gradviz.watch`` at its default interval K and at every step, and, where
installed, with the peers doing the same job at the same intervals (optional,
benchmark-only dependencies): TensorBoard's ``SummaryWriter.add_histogram`` per parameter,
and ``wandb.watch(model, log="gradients", log_freq=K)`` in offline mode (with the
``wandb.log`` per step it needs to commit the histograms). A repeat runs whole multiples
of K steps, so the recorded steps' cost is included; the cases are interleaved. Also: how
soon a reader sees a step a writer logged, and what one ``rec.log()`` costs on dense values
and on zeros and subnormals of the same size.
Times are CPU time of this process (see ``time_cases``), with the wall-clock ratio beside.
Targets: gradviz's CPU-time ratio <= 1.05 at its defaults on the first two nets; at every
step below both peers on the zero-heavy and subnormal nets; ``rec.log()`` on zeros and
subnormals within 1.3x of its cost on dense values.
"""

from __future__ import annotations

import importlib.util
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import gradviz
from gradviz.bench.cpu_rounds import SETTLE_S, no_idle_writes
from gradviz.bench.harness import (
    CONTROL,
    CONTROL_NOTE,
    Timing,
    median_ratio,
    show_table,
    torch_threads,
)
from gradviz.core.record.reader import Reader
from gradviz.core.record.recorder import DEFAULT_EVERY

TARGET_RATIO = 1.05
BASELINE = "bare"


def mlp() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """MLP 784-512-512-10, a batch of 256 inputs and class labels."""
    net = nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    return net, torch.randn(256, 784), torch.randint(0, 10, (256,))


def cnn() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """Conv 1->16 -> pool -> conv 16->32 -> pool -> linear, 28x28 inputs, batch 32."""
    net = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 10),
    )
    return net, torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))


def sparse_relu_dropout() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """MLP 784-512-512-10 with ReLU and Dropout(0.5), a batch of 8 inputs that are zero but
    for a central 14x14 patch (like digits on a blank page): most gradient entries are 0."""
    net = nn.Sequential(
        nn.Linear(784, 512),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(512, 512),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(512, 10),
    )
    x = torch.zeros(8, 28, 28)
    x[:, 7:21, 7:21] = torch.rand(8, 14, 14)
    return net, x.reshape(8, 784), torch.randint(0, 10, (8,))


#: The loss scale that makes the first MLP's gradients subnormal float32 (below 1.2e-38).
SUBNORMAL_SCALE = 1e-39


def subnormal_mlp() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """The MLP of ``mlp``; its step scales the loss by SUBNORMAL_SCALE (``loss_scale``)."""
    return mlp()


NETS: dict[str, Callable[[], tuple[nn.Module, torch.Tensor, torch.Tensor]]] = {
    "MLP 784-512-512-10, B=256": mlp,
    "CNN 2 conv, B=32": cnn,
    "ReLU+Dropout MLP, sparse, B=8": sparse_relu_dropout,
    "MLP, subnormal gradients": subnormal_mlp,
}
#: Nets whose step multiplies the loss before backward.
LOSS_SCALE = {subnormal_mlp: SUBNORMAL_SCALE}
#: The nets the README's target at defaults is about (the others are for every step).
DEFAULT_TARGET_NETS = ("MLP 784-512-512-10, B=256", "CNN 2 conv, B=32")


def tensorboard_available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def wandb_available() -> bool:
    return importlib.util.find_spec("wandb") is not None


def _wandb_run(folder: Path):
    """The one offline wandb run of this process (wandb.watch logs to the current run; one
    run watches every case's net, each with its own log_freq)."""
    import wandb

    if wandb.run is None:
        settings = wandb.Settings(silent=True, console="off")
        wandb.init(mode="offline", dir=str(folder), project="gradviz-bench", settings=settings)
    return wandb


def training_step(build, folder: Path, how: str, every: int) -> Callable[[], None]:
    """One training step of a fresh seeded net, watched as ``how`` says."""
    torch.manual_seed(0)
    net, x, y = build()
    scale = LOSS_SCALE.get(build, 1.0)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    rec = gradviz.watch(net, folder / how, every=every) if how.startswith("gradviz") else None
    writer = None
    if how.startswith("tensorboard"):
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(folder / how))
    wandb = None
    if how.startswith("wandb"):
        wandb = _wandb_run(folder)
        wandb.watch(net, log="gradients", log_freq=every)
    count = [0]

    def step() -> None:
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        (loss * scale if scale != 1.0 else loss).backward()
        if rec is not None:
            rec.log(loss=loss)
        elif wandb is not None:
            wandb.log({"loss": loss.item()})
        elif writer is not None and count[0] % every == 0:
            for name, p in net.named_parameters():
                writer.add_histogram(name, p.grad, count[0])
        opt.step()
        count[0] += 1

    step.close = lambda: (rec.close() if rec else None, writer.close() if writer else None)
    return step


def cases_for(every: int) -> dict[str, int]:
    """Case name -> interval."""
    cases = {BASELINE: 1, CONTROL: 1, f"gradviz K={every}": every, "gradviz K=1": 1}
    if tensorboard_available():
        cases[f"tensorboard K={every}"] = every
        cases["tensorboard K=1"] = 1
    if wandb_available():
        cases[f"wandb K={every}"] = every
        cases["wandb K=1"] = 1
    return cases


#: Steps per repeat of a case that records every step (the cost of each step is alike).
EVERY_STEP_CALLS = 20


def time_cases(
    steps: dict[str, Callable[[], None]], calls: int, repeats: int
) -> tuple[dict[str, Timing], dict[str, Timing]]:
    """(CPU, wall) seconds per step of each case: ``repeats`` interleaved rounds of ``calls``
    steps (one whole recording interval; EVERY_STEP_CALLS for the cases named "K=1") after
    5 warm-up steps, on one torch thread.

    CPU time is this process's, all threads together (the recorder's background writer
    included), so it charges gradviz its whole cost while other processes' load, which
    drifts on a shared machine, does not enter it. After each case's steps the clock runs
    on for ``SETTLE_S`` while nothing else does, so that the writes its recorded step
    started are charged to it, not to the case that runs next; the recordings' idle writes,
    which only the pauses between cases would cause, are held off (``no_idle_writes``).
    The wall clock counts the steps alone.
    """
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    wall: dict[str, list[float]] = {name: [] for name in steps}
    with torch_threads(1), no_idle_writes():
        for step in steps.values():
            for _ in range(5):
                step()
        for _ in range(repeats):
            for name, step in steps.items():
                n = EVERY_STEP_CALLS if name.endswith("K=1") else calls
                c0, w0 = time.process_time(), time.perf_counter()
                for _ in range(n):
                    step()
                wall[name].append((time.perf_counter() - w0) / n)
                time.sleep(SETTLE_S)
                cpu[name].append((time.process_time() - c0) / n)
    return (
        {n: Timing(n, calls, tuple(v)) for n, v in cpu.items()},
        {n: Timing(n, calls, tuple(v)) for n, v in wall.items()},
    )


def follow_latency(folder: Path, trials: int = 20) -> list[float]:
    """Seconds from ``rec.log()`` returning to a Reader's ``refresh()`` seeing that step."""
    w = torch.zeros(1000, requires_grad=True)
    seconds = []
    with gradviz.watch({"w": w}, folder / "latency", every=1) as rec:
        w.grad = torch.ones(1000)
        rec.log()
        rec.log()  # step 0 is written once step 1 tells its update
        reader = Reader(folder / "latency")
        for i in range(trials):
            rec.log()
            start = time.perf_counter()
            while True:
                reader.refresh()
                if reader.rank(0).steps >= i + 2:
                    break
                time.sleep(0.001)
            seconds.append(time.perf_counter() - start)
    return seconds


#: Entries of the gradients ``log_cost_by_content`` records (as the profiled MNIST net's 1.2M).
CONTENT_ENTRIES = 1_200_000
#: rec.log on zeros and subnormals may cost at most this many times its cost on dense values.
CONTENT_TARGET = 1.3


def content_gradients(kind: str, generator: torch.Generator) -> torch.Tensor:
    """(1000, 1200) float32 gradient: "dense" random normals; "zeros+subnormals" 70% exact
    zeros and the rest subnormal (below 1.2e-38), the two slow cases of float32 log10."""
    values = torch.randn(1000, CONTENT_ENTRIES // 1000, generator=generator)
    if kind == "dense":
        return values * 1e-3
    values *= 1e-40
    values[torch.rand(values.shape, generator=generator) < 0.7] = 0.0
    return values


def log_cost_by_content(folder: Path, repeats: int) -> dict[str, float]:
    """CPU ms of one ``rec.log()`` (every=1; the writer's thread included) on a watched
    tensor of CONTENT_ENTRIES entries holding each content kind (medians, interleaved)."""
    generator = torch.Generator().manual_seed(0)
    kinds = ("dense", "zeros+subnormals")
    grads = {kind: content_gradients(kind, generator) for kind in kinds}
    seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
    w = torch.zeros(grads["dense"].shape, requires_grad=True)
    with torch_threads(1), gradviz.watch({"w": w}, folder / "content", every=1) as rec:
        for kind in kinds * 2:  # warm-up: tables, buffers, the writer
            w.grad = grads[kind]
            rec.log()
        for _ in range(repeats):
            for kind in kinds:
                w.grad = grads[kind]
                start = time.process_time()
                for _ in range(EVERY_STEP_CALLS // 2):
                    rec.log()
                seconds[kind].append((time.process_time() - start) / (EVERY_STEP_CALLS // 2))
    return {kind: statistics.median(v) * 1e3 for kind, v in seconds.items()}


def run(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    """Time every case on both nets (``quick`` changes nothing: the run is short already)."""
    every = DEFAULT_EVERY
    cases = cases_for(every)
    emit(
        f"watch: training-step time with gradviz.watch (default K = {every}) and peers, "
        f"ratio to the bare step, one torch thread, {repeats} interleaved repeat(s) of "
        f"{every} steps ({EVERY_STEP_CALLS} for K=1)"
    )
    if not tensorboard_available():
        emit("  (tensorboard not installed: peer skipped)")
    if not wandb_available():
        emit("  (wandb not installed: peer skipped)")
    ratios: dict[str, dict[str, float]] = {}
    wall_ratios: dict[str, dict[str, float]] = {}
    ms: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for net_name, build in NETS.items():
            folder = Path(tmp) / str(len(ratios))
            steps = {
                name: training_step(build, folder, name.split()[0] + name.split()[-1], k)
                for name, k in cases.items()
            }
            started = time.perf_counter()
            cpu, wall = time_cases(steps, every, repeats)
            for fn in steps.values():
                fn.close()
            ms[net_name] = {n: t.median * 1e3 for n, t in cpu.items()}
            ratios[net_name] = {n: median_ratio(cpu[BASELINE], t) for n, t in cpu.items()}
            wall_ratios[net_name] = {n: median_ratio(wall[BASELINE], t) for n, t in wall.items()}
            emit(f"  {net_name}: measured in {time.perf_counter() - started:.1f} s")
        latency = follow_latency(Path(tmp))
        content_ms = log_cost_by_content(Path(tmp), max(repeats, 3))
        if wandb_available():
            import wandb

            wandb.finish()  # before its folder is removed
    headers = ["case", *ratios]
    tables = [
        show_table(
            emit,
            "CPU ms per training step (this process, all threads: the recorder's writer included)",
            headers,
            [[c, *(ms[n][c] for n in ms)] for c in cases],
        ),
        show_table(
            emit,
            "CPU-time ratio to the bare step (median of per-repeat ratios)",
            headers,
            [[c, *(ratios[n][c] for n in ratios)] for c in cases],
            [CONTROL_NOTE.strip()],
        ),
        show_table(
            emit,
            "wall-clock ratio (moves with other processes' load on a shared machine)",
            headers,
            [[c, *(r[c] for r in wall_ratios.values())] for c in cases],
        ),
    ]
    median_ms, max_ms = statistics.median(latency) * 1e3, max(latency) * 1e3
    default = f"gradviz K={every}"
    measured = {n: ratios[n][default] for n in DEFAULT_TARGET_NETS}
    met = all(r <= TARGET_RATIO for r in measured.values())
    summary = (
        f"target (gradviz at defaults <= {TARGET_RATIO}x the bare step): "
        f"{'met' if met else 'NOT met'} ("
        + ", ".join(f"{r:.3f}x {n}" for n, r in measured.items())
        + ")"
    )
    peers = [c for c in cases if c.endswith("K=1") and not c.startswith("gradviz")]
    every_step = {
        n: {"gradviz": r["gradviz K=1"], **{c.split()[0]: r[c] for c in peers}}
        for n, r in ratios.items()
        if n not in DEFAULT_TARGET_NETS
    }
    below_peers = (
        all(v["gradviz"] < min(v[p] for p in v if p != "gradviz") for v in every_step.values())
        if peers
        else None
    )
    peers_line = (
        "every step on the zero-heavy and subnormal nets, gradviz below both peers: "
        + ("no peer installed" if below_peers is None else ("met" if below_peers else "NOT met"))
        + " ("
        + "; ".join(
            f"{n}: " + ", ".join(f"{p} {r:.2f}x" for p, r in v.items())
            for n, v in every_step.items()
        )
        + ")"
    )
    content_ratio = content_ms["zeros+subnormals"] / content_ms["dense"]
    content_met = content_ratio <= CONTENT_TARGET
    tables.append(
        show_table(
            emit,
            "targets and other figures",
            ["figure", "measured", "unit"],
            [
                ["a reader sees a logged step after, median", median_ms, "ms"],
                [f"a reader sees a logged step after, max of {len(latency)}", max_ms, "ms"],
                [f"rec.log on {CONTENT_ENTRIES:,} dense entries", content_ms["dense"], "CPU ms"],
                [
                    f"rec.log on {CONTENT_ENTRIES:,} entries, 70% zeros + subnormals",
                    content_ms["zeros+subnormals"],
                    "CPU ms",
                ],
            ],
            [
                summary,
                peers_line,
                f"rec.log on zeros and subnormals: {content_ratio:.2f}x its cost on dense "
                f"values (target <= {CONTENT_TARGET}x: {'met' if content_met else 'NOT met'})",
            ],
        )
    )
    return {
        "tables": tables,
        "unit": "CPU ms per training step",
        "ratio_to_bare_wall_clock": wall_ratios,
        "every": every,
        "threads": 1,
        "repeats": repeats,
        "ms": ms,
        "ratio_to_bare": ratios,
        "follow_latency_ms": {"median": median_ms, "max": max_ms},
        "log_ms_by_content": content_ms,
        "every_step_below_peers": {"ratios": every_step, "met": below_peers},
        "content_target": {"ratio": content_ratio, "limit": CONTENT_TARGET, "met": content_met},
        "target": {
            "rule": f"{default} <= {TARGET_RATIO}",
            "ratios": measured,
            "met": met,
            "summary": summary,
        },
    }
