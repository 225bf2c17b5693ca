"""Benchmark: the cost of finding where NaN starts, as ratios to the bare training step.

Three CPU training steps (zero_grad, forward, loss, backward, Adam), one torch thread: the
classic MNIST CNN (conv 1->32, conv 32->64, max-pool, 9216->128->10; batch 64), a 6-layer
MLP (width 256, ReLU, 10 classes; batch 64: few, cheap operations, where a traced
operation's fixed cost weighs most) and a 6-layer transformer encoder (d_model 64, 4 heads,
feed-forward 128, 32 tokens, batch 8: many small operations). Each is timed bare, under
``gradviz.trace_nonfinite``, under
``torch.autograd.detect_anomaly(check_nan=True)`` (the peer: backward only, raises), and
with ``gradviz.watch`` at its default interval with and without the module-level origin.
Cases are interleaved in short windows, each charged its CPU time with its recording's
background writes (see ``bench.cpu_rounds``), in two groups, each with a bare step of its
own: the traced cases two steps a window, the watched ones (a whole recording interval a
round) one step a window. A few percent is the watch cases' whole question, and timing them
half a second apart (longer windows, the traced cases' windows between them) let the
machine's drift reach a case and its bare step unequally: the control then strayed by 4%
in a round, where one step a window keeps it within about 1%.
Targets: trace_nonfinite <= 2x on the CNN and the MLP, <= 3x on the transformer, and at most
``detect_anomaly``'s cost on every model; watch(origin=True) at its default interval <= 1.05x
on the CNN and the transformer.
"""

from __future__ import annotations

import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import gradviz
from gradviz.bench.cpu_rounds import StepCase, built_with_threads, time_rounds
from gradviz.bench.harness import CONTROL, CONTROL_NOTE, median_ratio, show_table
from gradviz.core.record.recorder import DEFAULT_EVERY

BASELINE = "bare"
TARGETS = {
    "trace_nonfinite": {"CNN": 2.0, "MLP": 2.0, "transformer": 3.0},
    # (the MLP's 4 ms step is timed watched too, untargeted: the watch's own per-step work
    # is a tenth of it, origin or not)
    "watch origin": {"CNN": 1.05, "transformer": 1.05},
}
#: Steps per repeat of the traced cases (the bare and watch cases run a whole recording
#: interval, so that the watch's recorded step is paid for).
TRACE_CALLS = 20


def mnist_cnn() -> tuple[nn.Module, torch.Tensor, Callable]:
    net = nn.Sequential(
        nn.Conv2d(1, 32, 3),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(9216, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )
    y = torch.randint(0, 10, (64,))
    return net, torch.randn(64, 1, 28, 28), lambda out: F.cross_entropy(out, y)


def mlp() -> tuple[nn.Module, torch.Tensor, Callable]:
    layers: list[nn.Module] = []
    for _ in range(5):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    net = nn.Sequential(*layers, nn.Linear(256, 10))
    y = torch.randint(0, 10, (64,))
    return net, torch.randn(64, 256), lambda out: F.cross_entropy(out, y)


def transformer() -> tuple[nn.Module, torch.Tensor, Callable]:
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    net = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)
    return net, torch.randn(8, 32, 64), lambda out: out.square().mean()


NETS = {
    "CNN": ("MNIST CNN, B=64", mnist_cnn),
    "MLP": ("6-layer MLP, B=64", mlp),
    "transformer": ("6-layer encoder", transformer),
}


def training_step(build, folder: Path, how: str) -> Callable[[], None]:
    torch.manual_seed(0)
    net, x, loss_of = build()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    rec = None
    if how.startswith("watch"):
        rec = gradviz.watch(net, folder / how.replace(" ", "_"), origin=how == "watch origin")

    def plain() -> None:
        opt.zero_grad()
        loss = loss_of(net(x))
        loss.backward()
        if rec is not None:
            rec.log(loss=loss)
        opt.step()

    if how == "trace_nonfinite":

        def step() -> None:
            with gradviz.trace_nonfinite():
                plain()
    elif how == "detect_anomaly":

        def step() -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "Anomaly Detection has been enabled"
                with torch.autograd.detect_anomaly(check_nan=True):
                    plain()
    else:
        step = plain
    step.close = rec.close if rec is not None else (lambda: None)
    return step


TRACED = (BASELINE, CONTROL, "trace_nonfinite", "detect_anomaly")
WATCHED = (BASELINE, CONTROL, "watch origin", "watch no origin")
CASES = TRACED + WATCHED[2:]
#: The traced group's bare rows, where the watched group's are shown too.
_BESIDE_TRACES = {BASELINE: "bare (beside traces)", CONTROL: "bare, control (beside traces)"}


def build_cases(build, folder: Path, cases, calls: int) -> dict[str, StepCase]:
    """Each case's training step, ``calls`` steps a round (for the watch cases a whole
    recording interval, so that the recorded step is paid for) and the recording threads
    it started."""
    built = {}
    for name in cases:
        step, threads = built_with_threads(lambda name=name: training_step(build, folder, name))
        built[name] = StepCase(step, calls, threads, writes=name.startswith("watch"))
    return built


def time_group(build, folder: Path, cases, calls: int, windows: int, repeats: int) -> dict:
    """CPU seconds per step of each case (``bench.cpu_rounds``), the group's own bare step
    among them."""
    # The first of identical models a process builds ran about 1% slower than the others
    # (where its memory lies, measured: a group whose bare step was built first read every
    # case 1% cheaper): a model built first and left out of the timing takes that place
    # (held until the function returns).
    _first = training_step(build, folder, BASELINE)
    steps = build_cases(build, folder, cases, calls)
    try:
        cpu, _ = time_rounds(steps, repeats, windows=windows)
    finally:
        for case in steps.values():
            case.step.close()
    return cpu


def _rows(cpu: dict, names: dict[str, str] | None = None) -> tuple[dict, dict]:
    """(CPU ms, ratio to the group's own bare step) of each case of a group, renamed by
    ``names`` where given."""
    names = names or {}
    ms = {names.get(n, n): t.median * 1e3 for n, t in cpu.items()}
    ratios = {names.get(n, n): median_ratio(cpu[BASELINE], t) for n, t in cpu.items()}
    return ms, ratios


def run(repeats: int, quick: bool, emit: Callable[[str], None]) -> dict:
    """Time every case on both nets; ``quick`` leaves the watch cases out."""
    every = DEFAULT_EVERY
    cases = TRACED if quick else (*_BESIDE_TRACES.values(), *TRACED[2:], *WATCHED)
    emit(
        f"origin: training-step CPU time under trace_nonfinite, detect_anomaly and watch "
        f"(K = {every}), ratio to the bare step, one torch thread, {repeats} interleaved "
        "repeat(s)"
    )
    ms: dict[str, dict[str, float]] = {}
    ratios: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for key, (title, build) in NETS.items():
            started = time.perf_counter()
            folder = Path(tmp) / key
            traced = time_group(build, folder, TRACED, TRACE_CALLS, TRACE_CALLS // 2, repeats)
            # Where both groups ran, the traced group's own bare rows are named as such.
            ms[key], ratios[key] = _rows(traced, {} if quick else _BESIDE_TRACES)
            if not quick:
                watched = _rows(time_group(build, folder, WATCHED, every, every, repeats))
                ms[key].update(watched[0])
                ratios[key].update(watched[1])
            emit(f"  {title}: measured in {time.perf_counter() - started:.1f} s")
    tables = _tables(ms, ratios, cases, quick, emit)
    checks = {
        f"trace_nonfinite {k}": (ratios[k]["trace_nonfinite"], t)
        for k, t in TARGETS["trace_nonfinite"].items()
    }
    for k in ratios:  # never dearer than the peer that only checks the backward
        checks[f"trace_nonfinite {k} vs detect_anomaly"] = (
            ratios[k]["trace_nonfinite"],
            round(ratios[k]["detect_anomaly"], 3),
        )
    if not quick:
        for k, t in TARGETS["watch origin"].items():
            checks[f"watch origin {k}"] = (ratios[k]["watch origin"], t)
    met = all(r <= t for r, t in checks.values())
    summary = "targets: " + ", ".join(
        f"{name} {r:.2f}x (<= {t}x {'met' if r <= t else 'NOT met'})"
        for name, (r, t) in checks.items()
    )
    emit(summary)
    return {
        "tables": tables,
        "unit": "CPU ms per training step",
        "threads": 1,
        "repeats": repeats,
        "every": every,
        "ms": ms,
        "ratio_to_bare": ratios,
        "target": {
            "ratios": {n: r for n, (r, _) in checks.items()},
            "met": met,
            "summary": summary,
        },
    }


def _tables(ms: dict, ratios: dict, cases, quick: bool, emit: Callable[[str], None]) -> list:
    """The CPU ms and ratio tables (a row a case, a column a net), printed and as data."""
    columns = ["case", *(NETS[k][0] for k in ms)]
    notes = [CONTROL_NOTE.strip()]
    if not quick:
        notes.append(
            "(traced cases: ratios to the bare step timed beside them, 2 steps a window; "
            "watch cases: to the one beside them, 1 step a window)"
        )
    return [
        show_table(
            emit,
            "CPU ms per training step",
            columns,
            [[c, *(ms[k][c] for k in ms)] for c in cases],
        ),
        show_table(
            emit,
            "CPU-time ratio to the bare step (median of per-repeat ratios)",
            columns,
            [[c, *(ratios[k][c] for k in ratios)] for c in cases],
            notes,
        ),
    ]
