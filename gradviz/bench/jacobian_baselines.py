"""Per-input Jacobians against the baselines a careful user would write, not only the worst.

The ``jacobians`` suite's "loop" runs B x m backward passes, each through the whole batch's
graph: its cost grows as B^2, so its ratio to gradviz grows with the batch and the headline
figures (hundreds of times) say more about that loop than about gradviz. Here gradviz
(``gradviz.per_input_jacobians``, method ``auto``) is timed beside:

- ``per-sample loop``: each sample on its own, one forward and m backward passes
  (``torch.autograd.grad`` per output coordinate): B forwards and B x m backward passes of a
  one-sample graph (``per_sample_loop``);
- ``vmap(jacrev)``: ``torch.func.vmap(torch.func.jacrev(f))`` of the one-sample function,
  as torch's documentation writes it (``vmap_jacrev``; steady state: its first call in a
  process, 1-3 s of a lazy import, is left out);
- ``whole-batch loop``: the suite's loop (``gradviz.core.nets.jacobians._loop``);
- ``gradviz, control``: gradviz a second time, whose ratio to the first is the run's noise.

on the tiny MLP 2-20-20-4:tanh, the wide MLP 64-256-256-10:tanh and a small CNN (conv 1->16,
pool, conv 16->32, pool, linear to 10 classes, 1 x 28 x 28 inputs: m = 10, n = 784), one
thread, float32, interleaved repeats. The loops' costs are linear in the samples they do
(the whole-batch loop's beside one forward of the batch), so where the whole batch would take
too long they run on the first k samples and are scaled, and the table's notes say so.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from gradviz.bench.harness import Case, show_table, time_calls, time_interleaved, torch_threads
from gradviz.core.explorer.input_gradients import flattened
from gradviz.core.nets import jacobians as jm
from gradviz.core.nets.networks import NetworkSpec
from gradviz.core.ops import per_input_jacobians

METHODS: tuple[str, ...] = ("gradviz auto", "per-sample loop", "vmap(jacrev)", "whole-batch loop")
GRADVIZ = METHODS[0]
#: How the notes name each baseline.
NAMES = {m: m if m.startswith("vmap") else f"the {m}" for m in METHODS[1:]}
#: gradviz timed a second time, last in each round: how far its ratio to the first is from
#: 1.00 is what two identical cases differ by in that run.
CONTROL = "gradviz, control"
#: A baseline within this factor of gradviz's time, or within the noise of its net and batch
#: (the control's distance from 1.00 there) where that is larger, is called even with it,
#: not faster or slower.
EVEN = 1.05
#: Seconds one timed call of a loop may take before it runs on part of the batch.
BUDGET_S = 1.0
QUICK_BUDGET_S = 0.2


def small_cnn() -> nn.Module:
    """Conv 1->16 -> ReLU -> pool -> conv 16->32 -> ReLU -> pool -> linear 1568->10 (1x28x28)."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 7 * 7, 10),
    )


@dataclass(frozen=True)
class Net:
    """A benchmarked model: its name, builder, one sample's input shape and batch sizes."""

    name: str
    build: Callable[[], nn.Module]
    in_shape: tuple[int, ...]
    batches: tuple[int, ...]
    quick_batches: tuple[int, ...]


NETS: tuple[Net, ...] = (
    Net("MLP 2-20-20-4:tanh", lambda: NetworkSpec.parse("2-20-20-4:tanh").build(seed=0),
        (2,), (64, 1024), (64,)),
    Net("MLP 64-256-256-10:tanh", lambda: NetworkSpec.parse("64-256-256-10:tanh").build(seed=0),
        (64,), (64, 1024), (64,)),
    Net("CNN 1x28x28 -> 10", small_cnn, (1, 28, 28), (64, 256), (16,)),
)  # fmt: skip


# ---- the baselines, as a user writes them ------------------------------------------------
def per_sample_loop(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """J (B, m, *in_shape) of ``x`` (B, *in_shape): each sample alone, one forward and one
    ``torch.autograd.grad`` per output coordinate."""
    rows = []
    for sample in x:
        leaf = sample.unsqueeze(0).detach().requires_grad_(True)
        y = model(leaf).reshape(-1)
        last = len(y) - 1
        grads = [
            torch.autograd.grad(y[i], leaf, retain_graph=i < last)[0][0] for i in range(len(y))
        ]
        rows.append(torch.stack(grads))
    return torch.stack(rows)


def vmap_jacrev(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """J (B, m, *in_shape) by ``torch.func.vmap(torch.func.jacrev(f))`` over single samples."""
    from torch.func import jacrev, vmap

    def one(sample: torch.Tensor) -> torch.Tensor:
        return model(sample.unsqueeze(0)).reshape(-1)

    return vmap(jacrev(one))(x.detach())


# ---- timing ------------------------------------------------------------------------------
@dataclass
class _Plan:
    """What one repeat of a (net, batch, method) times, and how its seconds scale to B."""

    case: Case
    scale: Callable[[float], float]
    note: str


def _plans(net: Net, model: nn.Module, batch: int, budget: float) -> dict[str, _Plan]:
    generator = torch.Generator().manual_seed(batch)
    x = torch.randn(batch, *net.in_shape, generator=generator)
    return {
        GRADVIZ: _Plan(Case(lambda: per_input_jacobians(model, x)), _whole, ""),
        "per-sample loop": _per_sample_plan(model, x, budget),
        "vmap(jacrev)": _Plan(Case(lambda: vmap_jacrev(model, x)), _whole, ""),
        "whole-batch loop": _whole_batch_plan(model, x, net.in_shape, budget),
        CONTROL: _Plan(Case(lambda: per_input_jacobians(model, x)), _whole, ""),
    }


def scaled_note(k: int, batch: int) -> str:
    """How a loop timed on its first ``k`` samples was scaled to the batch."""
    return f"first {k} sample{'s' if k > 1 else ''}, scaled to {batch}"


def _whole(seconds: float) -> float:
    """The scale of a case timed on the whole batch."""
    return seconds


def _per_sample_plan(model: nn.Module, x: torch.Tensor, budget: float) -> _Plan:
    """The per-sample loop on the first k samples (its cost is k times one sample's)."""
    batch = len(x)
    one = statistics.median(time_calls(lambda: per_sample_loop(model, x[:1])) for _ in range(3))
    k = int(min(batch, max(1, budget / max(one, 1e-6))))
    part = x[:k]
    note = "" if k == batch else scaled_note(k, batch)
    # Timed on part of the batch, a call already lasts about ``budget``: one a repeat.
    case = Case(lambda: per_sample_loop(model, part), *((1, 1) if k < batch else (None, None)))
    return _Plan(case, lambda s: s * batch / k, note)


def _whole_batch_plan(
    model: nn.Module, x: torch.Tensor, in_shape: tuple[int, ...], budget: float
) -> _Plan:
    """The suite's loop: one forward of the batch and m backward passes of the whole graph
    per sample; the first k samples are timed and that part scaled to all B."""
    batch = len(x)
    flat_model, flat = flattened(model, in_shape), x.reshape(batch, -1)
    leaf = flat.detach().requires_grad_(True)
    forward = statistics.median(time_calls(lambda: flat_model(leaf)) for _ in range(3))
    one = time_calls(lambda: jm._loop(flat_model, flat, samples=1))
    k = int(min(batch, max(1, budget / max(one - forward, 1e-6))))

    def scale(seconds: float) -> float:
        return seconds if k == batch else forward + (seconds - forward) * batch / k

    note = "" if k == batch else scaled_note(k, batch)
    case = Case(lambda: jm._loop(flat_model, flat, samples=k), calls=1, warmup=0)
    return _Plan(case, scale, note)


def measure(repeats: int, quick: bool, emit: Callable[[str], None]) -> tuple[dict, dict]:
    """(figures, table): ms per Jacobian of each net, batch and method, and each baseline's
    time over gradviz's; one torch thread, ``repeats`` interleaved repeats, medians."""
    with torch_threads(1):
        return _measure(repeats, quick, emit)


def _measure(repeats: int, quick: bool, emit: Callable[[str], None]) -> tuple[dict, dict]:
    budget = QUICK_BUDGET_S if quick else BUDGET_S
    plans: dict[tuple[str, int, str], _Plan] = {}
    for net in NETS:
        model = net.build()
        for batch in net.quick_batches if quick else net.batches:
            for method, plan in _plans(net, model, batch, budget).items():
                plans[(net.name, batch, method)] = plan
    timings = time_interleaved(
        {" ".join(map(str, key)): plan.case for key, plan in plans.items()},
        repeats,
        warmup=2,
        min_seconds=0.05,
        max_calls=50,
        statistic="median",
    )
    ms = {
        key: 1e3
        * statistics.median(plan.scale(s) for s in timings[" ".join(map(str, key))].seconds)
        for key, plan in plans.items()
    }
    emit("  fair baselines: measured")
    return _report(ms, plans, emit)


def _report(ms: dict, plans: dict, emit: Callable[[str], None]) -> tuple[dict, dict]:
    """The figures as JSON-ready rows and the printed table with its notes."""
    pairs = sorted({key[:2] for key in ms}, key=lambda p: (_order(p[0]), p[1]))
    ratios = {
        (net, batch, method): ms[(net, batch, method)] / ms[(net, batch, GRADVIZ)]
        for net, batch in pairs
        for method in METHODS[1:]
    }
    control = {pair: ms[(*pair, CONTROL)] / ms[(*pair, GRADVIZ)] for pair in pairs}
    even = {pair: max(EVEN, c, 1 / c) for pair, c in control.items()}
    rows = [
        [net, batch, *(ms[(net, batch, m)] for m in METHODS),
         *(ratios[(net, batch, m)] for m in METHODS[1:]), control[(net, batch)]]
        for net, batch in pairs
    ]  # fmt: skip
    scaled = [
        f"{key[2]}, {key[0]} B={key[1]}: {plan.note}" for key, plan in plans.items() if plan.note
    ]
    columns = ["net", "B", *METHODS, *(f"{m.split()[0]} / gradviz" for m in METHODS[1:])]
    columns.append("control / gradviz")
    control_note = (
        f"control: gradviz timed a second time; its ratio to the first, "
        f"{min(control.values()):.2f}x to {max(control.values()):.2f}x, is this run's noise"
    )
    table = show_table(
        emit,
        "gradviz against the baselines a user writes: ms per Jacobian of a batch, one thread, "
        "float32 (a ratio above 1 is gradviz's lead)",
        columns,
        rows,
        [control_note, *lead_notes(ratios, even), *loop_notes(ms), *scaled],
    )
    figures = [
        {"net": net, "batch": batch, "ms": {m: ms[(net, batch, m)] for m in METHODS},
         "ratio_to_gradviz": {m: ratios[(net, batch, m)] for m in METHODS[1:]},
         "control_ratio": control[(net, batch)]}
        for net, batch in pairs
    ]  # fmt: skip
    return {"unit": "ms per Jacobian of a batch", "threads": 1, "results": figures}, table


def lead_notes(
    ratios: dict[tuple[str, int, str], float], even: dict[tuple[str, int], float] | None = None
) -> list[str]:
    """Where gradviz's lead over each baseline is largest and smallest, from ``ratios``
    (net, batch, baseline) -> baseline time / gradviz time; a ratio within a factor
    ``even[(net, batch)]`` (default EVEN) of 1 is named even, one below that the baseline
    being faster."""
    even = even or {}
    notes = []
    for method in METHODS[1:]:
        mine = {key[:2]: r for key, r in ratios.items() if key[2] == method}
        high = max(mine, key=mine.get)
        low = min(mine, key=mine.get)
        text = f"against {NAMES[method]}, gradviz's lead is largest on {_where(high, mine, even)}"
        if low != high:
            text += f" and smallest on {_where(low, mine, even)}"
        notes.append(text)
    return notes


def _where(pair: tuple[str, int], ratios: dict[tuple[str, int], float], evens: dict) -> str:
    ratio, even = ratios[pair], evens.get(pair, EVEN)
    if ratio < 1 / even:
        verdict = ": the baseline is faster there"
    elif ratio <= even:
        verdict = f": even, within {even - 1:.0%}"
    else:
        verdict = ""
    return f"{pair[0]} at B={pair[1]} ({ratio:,.{0 if ratio >= 100 else 2}f}x{verdict})"


def loop_notes(ms: dict[tuple[str, int, str], float]) -> list[str]:
    """How much of the whole-batch loop's ratio is that loop's own cost: its time over the
    per-sample loop's, per net and batch."""
    pairs = sorted({key[:2] for key in ms}, key=lambda p: (_order(p[0]), p[1]))
    whole, each = "whole-batch loop", "per-sample loop"
    parts = [
        f"{net} B={batch} {ms[(net, batch, whole)] / ms[(net, batch, each)]:,.1f}x"
        for net, batch in pairs
    ]
    return ["the whole-batch loop's time over the per-sample loop's: " + ", ".join(parts)]


def _order(net: str) -> int:
    return [n.name for n in NETS].index(net)
