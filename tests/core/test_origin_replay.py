"""watch(origin=True) on the CPU: after a first step taken with every module noted, a loop
that logs before the optimizer's step keeps only its calls of the model, and a step that
goes bad is run again with every module noted (``core.origin.replay``). The origin must be
the one the notes name, and the replay must leave no trace."""

from __future__ import annotations

import pytest
import torch
from test_origin_watch import Kink, LogOf, Residual, _untouched
from torch import nn

import gradviz
from gradviz.core.record import origin_notes
from gradviz.core.record.reader import Reader


class Switch(nn.Module):
    """``inner`` from the step it is switched on, the identity before."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner, self.on = inner, False

    def forward(self, x):
        return self.inner(x) if self.on else x


class Scaled(nn.Module):
    """Takes a keyword: ``x / scale`` (Inf where scale is 0)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x, *, scale):
        return self.lin(x) / scale


def _run(
    model, batches, *, switch=None, at=2, log_after_step=False, clip=False, kw=None, bf16=False
):
    """Train on ``batches`` (SGD, lr small), switching ``switch`` on at step ``at``; returns
    (first_nonfinite's origin, the way it was looked for, the recorder's origin notes)."""
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    path = _run.tmp / f"run{_run.count}"
    _run.count += 1
    with gradviz.watch(model, path) as rec:
        notes = rec._origin
        for step, x in enumerate(batches):
            if switch is not None:
                switch.on = step >= at
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = model(x) if kw is None else model(x, **kw(step))
            loss = out.float().square().mean()
            loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if log_after_step:
                opt.step()
                rec.log(loss=loss)
            else:
                rec.log(loss=loss)
                opt.step()
    first = Reader(path).describe()["first_nonfinite"]
    return (None if first is None else first.get("origin")), notes.way, notes


@pytest.fixture(autouse=True)
def _runs_in(tmp_path):
    _run.tmp, _run.count = tmp_path, 0


def _cases():
    """(name, build() -> (model, batches, run keywords)): a NaN or Inf from step 1 or 2."""

    def log_forward():
        sw = Switch(LogOf())
        model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), sw, nn.Linear(3, 1))
        return model, [torch.randn(8, 3) for _ in range(4)], {"switch": sw}

    def kink_backward():
        sw = Switch(Kink())
        model = nn.Sequential(nn.Linear(3, 3), sw, nn.Linear(3, 1))
        return model, [torch.randn(4, 3) for _ in range(4)], {"switch": sw}

    def kink_clipped():
        model, batches, kw = kink_backward()
        return model, batches, {**kw, "clip": True}

    def residual_overflow():
        model = nn.Sequential(Residual(), nn.Linear(2, 1))  # f is the identity
        batches = [torch.ones(3, 2), torch.ones(3, 2), torch.full((3, 2), 2e38)]
        return model, batches, {}

    def nan_input():
        model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
        batches = [torch.ones(2, 2), torch.ones(2, 2), torch.full((2, 2), float("nan"))]
        return model, batches, {}

    def dropout_then_log():
        # Which entries the dropout zeroes (and the log then makes -Inf) depends on the
        # generator: the replay must draw the same mask.
        sw = Switch(LogOf())
        model = nn.Sequential(nn.Linear(4, 8), nn.Sigmoid(), nn.Dropout(0.5), sw, nn.Linear(8, 1))
        return model, [torch.randn(16, 4) for _ in range(4)], {"switch": sw}

    def batchnorm():
        sw = Switch(Kink())
        model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), sw, nn.Linear(4, 1))
        return model, [torch.randn(8, 3) for _ in range(4)], {"switch": sw}

    def keyword():
        model = Scaled()
        scales = [1.0, 2.0, 0.0, 1.0]
        return model, [torch.randn(4, 3) for _ in range(4)], {"kw": lambda s: {"scale": scales[s]}}

    def encoder():
        sw = Switch(Kink())
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
        model = nn.Sequential(layer, sw, nn.Linear(8, 1))
        return model, [torch.randn(2, 5, 8) for _ in range(4)], {"switch": sw}

    def autocast():
        # Under the CPU autocast (bfloat16 outputs): replayed under it too.
        model, batches, kw = kink_backward()
        return model, batches, {**kw, "bf16": True}

    return {
        "autocast": autocast,
        "forward": log_forward,
        "backward": kink_backward,
        "clipped": kink_clipped,
        "residual": residual_overflow,
        "input": nan_input,
        "dropout": dropout_then_log,
        "batchnorm": batchnorm,
        "keyword": keyword,
        "encoder": encoder,
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_the_replay_names_the_origin_the_notes_name(case, monkeypatch):
    build = _cases()[case]
    torch.manual_seed(0)
    model, batches, kw = build()
    replayed, way, _ = _run(model, batches, **kw)
    assert way == "replay"
    monkeypatch.setattr(origin_notes, "REPLAY", False)
    torch.manual_seed(0)
    model, batches, kw = build()
    noted, way, _ = _run(model, batches, **kw)
    assert way == "notes"
    assert replayed is not None and noted is not None
    assert (replayed["phase"], replayed["module"]) == (noted["phase"], noted["module"])
    # The notes alone (no step to run again) place it by the module boundaries; the
    # replay ran the step again under the tracer too, which saw the operation.
    assert noted["how"] == "module_boundaries" and noted["op"] is None
    assert replayed["how"] == "replayed" and replayed["source"]


def test_a_replayed_origin_is_exact():
    torch.manual_seed(0)
    model, batches, kw = _cases()["backward"]()
    origin, way, _ = _run(model, batches, **kw)
    assert way == "replay" and origin["step"] == 2
    assert (origin["phase"], origin["module"]) == ("backward", "1.inner")
    assert "the output of module '0'" in origin["cause"]


def test_a_loop_that_logs_after_the_optimizers_step_keeps_the_notes():
    torch.manual_seed(0)
    model, batches, kw = _cases()["forward"]()
    origin, way, notes = _run(model, batches, log_after_step=True, **kw)
    assert way == "notes" and notes._calls is None
    assert (origin["phase"], origin["module"], origin["step"]) == ("forward", "2.inner", 2)


class OwnDraw(nn.Module):
    """Noise from a generator of its own: a replay cannot draw it again."""

    def __init__(self):
        super().__init__()
        self.lin, self.gen = nn.Linear(3, 3), torch.Generator().manual_seed(1)

    def forward(self, x):
        return self.lin(x) + torch.rand(x.shape, generator=self.gen)


class Counted(nn.Module):
    """Kinks (from its backward: NaN) at its call ``at``, counted by itself."""

    def __init__(self, at: int):
        super().__init__()
        self.lin, self.at, self.calls = nn.Linear(3, 3), at, 0

    def forward(self, x):
        self.calls += 1
        y = self.lin(x)
        return Kink()(y) if self.calls - 1 == self.at else y


@pytest.mark.parametrize("stateful", ["generator", "counter"])
def test_a_forward_that_changes_the_models_own_state_keeps_the_notes(stateful):
    # Seen on the first step (its own generator's state, a call counter): such a forward is
    # not the same when run again, so the notes stay, and they name the origin.
    torch.manual_seed(0)
    if stateful == "generator":
        sw = Switch(Kink())
        model, kw = nn.Sequential(OwnDraw(), sw, nn.Linear(3, 1)), {"switch": sw}
        expected = ("backward", "1.inner")
    else:
        model, kw = nn.Sequential(Counted(at=2), nn.Linear(3, 1)), {}
        expected = ("backward", "0")
    origin, way, notes = _run(model, [torch.randn(4, 3) for _ in range(4)], **kw)
    assert way == "notes" and notes._calls is None
    assert (origin["phase"], origin["module"], origin["step"]) == (*expected, 2)


_NOISE = torch.Generator().manual_seed(2)  # not the model's: no attribute of it changes


class GlobalDraw(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) + torch.rand(x.shape, generator=_NOISE)


def test_a_forward_that_is_not_the_same_twice_says_its_origin_is_not_known(capsys):
    # Replayed, its noise is drawn afresh: the (finite) outputs differ, and the recording
    # says why it names no origin rather than naming one the step may not have had.
    from gradviz.cli import main

    torch.manual_seed(0)
    sw = Switch(Kink())
    model = nn.Sequential(GlobalDraw(), sw, nn.Linear(3, 1))
    origin, way, notes = _run(model, [torch.randn(4, 3) for _ in range(4)], switch=sw)
    assert origin is None and way == "notes" and notes._calls is None
    first = Reader(_run.tmp / "run0").describe()["first_nonfinite"]
    why = "the step could not be run again (the replayed forward gave other outputs)"
    assert first["step"] == 2 and first["origin_unknown"] == why
    assert main(["inspect", str(_run.tmp / "run0")]) == 0
    assert f"  where it started: not known: {why}" in capsys.readouterr().out.splitlines()


def test_a_bad_step_that_runs_again_clean_says_its_origin_is_not_known(tmp_path):
    # The NaN is the user's own, written into a gradient after the backward: the replayed
    # step is finite, so it was not the model's doing (or not the same step).
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    with gradviz.watch(model, tmp_path / "run") as rec:
        for step in range(3):
            model(torch.randn(4, 3)).sum().backward()
            if step == 2:
                model[2].bias.grad.fill_(float("nan"))
            rec.log()
            model.zero_grad()
    first = Reader(tmp_path / "run").describe()["first_nonfinite"]
    assert first["tensor"] == "2.bias" and "origin" not in first
    assert first["origin_unknown"].startswith("run again, the step made no NaN or Inf: it came")


def test_an_output_the_caller_changed_in_place_is_not_taken_for_the_replays():
    # Kink's backward makes the NaN at step 2; its forward, and so the model's output, is
    # finite: a replay gives the output before the caller's add, not the one kept.
    torch.manual_seed(0)
    sw = Switch(Kink())
    model = nn.Sequential(nn.Linear(3, 3), sw, nn.Linear(3, 1))
    with gradviz.watch(model, _run.tmp / "run") as rec:
        for step in range(3):
            sw.on = step == 2
            out = model(torch.randn(4, 3))
            out.add_(1.0)  # the kept output is no longer what the model returned
            out.sum().backward()
            rec.log()
    first = Reader(_run.tmp / "run").describe()["first_nonfinite"]
    assert first["step"] == 2 and "origin" not in first
    assert "other outputs" in first["origin_unknown"]


@pytest.mark.parametrize("limit", ["calls", "bytes"])
def test_too_many_or_too_large_calls_in_a_step_keep_the_notes(limit, tmp_path, monkeypatch):
    from gradviz.core.origin import replay

    calls = 3
    if limit == "calls":
        monkeypatch.setattr(replay, "MAX_CALLS", 2)
    else:
        monkeypatch.setattr(replay, "MAX_HELD_BYTES", 2 * 8 * 3 * 4)  # two calls' batches
    model = nn.Sequential(nn.Linear(3, 1))
    with gradviz.watch(model, tmp_path / "run") as rec:
        loss = sum(model(torch.randn(8, 3)).sum() for _ in range(calls))
        assert rec._origin._calls.calls == []  # what was held went at once
        loss.backward()
        rec.log()
        assert rec._origin.way == "notes" and rec._origin._calls is None


def _trajectory(watched: bool, tmp_path) -> list:
    """What a user's loop sees after each logged step, with or without the watch: the
    generator's state, the buffers, the gradients, the parameters and the calls of a hook
    on a gradient's accumulation. Its step 2 holds NaN (replayed by the watch)."""
    torch.manual_seed(0)
    sw = Switch(LogOf())
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.3), sw, nn.Linear(8, 1))
    accumulated = []
    model[4].weight.register_post_accumulate_grad_hook(lambda p: accumulated.append(1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    rec = gradviz.watch(model, tmp_path / f"run{watched}") if watched else None
    seen = []
    for step in range(4):
        sw.on = step == 2
        opt.zero_grad()
        loss = model(torch.randn(16, 4)).square().mean()
        loss.backward()
        if rec is not None:
            rec.log(loss=loss)
        grads = [p.grad.clone() for p in model.parameters()]
        buffers = [b.clone() for b in model.buffers()]
        seen.append((torch.get_rng_state(), buffers, grads, len(accumulated)))
        opt.step()
        seen.append([p.detach().clone() for p in model.parameters()])
    if rec is not None:
        assert rec._origin.way == "replay" and rec._origin.found["step"] == 2
        rec.close()
    return seen


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def test_the_replay_leaves_no_trace(tmp_path):
    plain, watched = _trajectory(False, tmp_path), _trajectory(True, tmp_path)
    flat = [list(_leaves(a)) for a in (plain, watched)]
    assert len(flat[0]) == len(flat[1])
    for a, b in zip(*flat):
        if isinstance(a, torch.Tensor):
            assert torch.equal(_bits(a), _bits(b))
        else:
            assert a == b


def _leaves(value):
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def test_a_before_with_keywords_gets_them_wrapped_or_hooked(monkeypatch):
    from gradviz.core.common import module_calls

    seen = []
    for wrappable in (True, False):
        monkeypatch.setattr(module_calls, "_wrappable", lambda m, w=wrappable: w)
        model = Scaled()
        handles = module_calls.note_each_call(
            model, lambda *a: None, lambda m, a, kw: seen.append(kw), with_kwargs=True
        )
        model(torch.ones(1, 3), scale=2.0)
        for h in handles:
            h.remove()
        assert model._compiled_call_impl is None and not model._forward_pre_hooks
    assert seen == [{"scale": 2.0}, {"scale": 2.0}]


class _RefusesTwice(torch.autograd.Function):
    """A backward that works once per forward's graph and raises when run again (a custom
    Function with a counter of its own, outside the model's attributes)."""

    runs = 0

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        _RefusesTwice.runs += 1
        if _RefusesTwice.runs > 3:
            raise RuntimeError("refused")
        return grad * float("nan") if _RefusesTwice.runs == 3 else grad


class Refuses(nn.Module):
    def forward(self, x):
        return _RefusesTwice.apply(x)


def test_a_replay_whose_backward_raises_names_no_origin_and_the_loop_goes_on(tmp_path):
    _RefusesTwice.runs = 0
    model = nn.Sequential(nn.Linear(3, 3), Refuses(), nn.Linear(3, 1))
    with gradviz.watch(model, tmp_path / "run") as rec:
        for _ in range(3):
            model(torch.randn(4, 3)).sum().backward()  # NaN from the third backward
            rec.log()
            model.zero_grad()
    first = Reader(tmp_path / "run").describe()["first_nonfinite"]
    assert first["step"] == 2 and "origin" not in first
    assert (
        first["origin_unknown"]
        == "the step could not be run again (its backward raised RuntimeError)"
    )


class _Interrupts(nn.Module):
    """Ctrl-C as the watch runs the bad step again (its fourth call)."""

    calls = 0

    def forward(self, x):
        _Interrupts.calls += 1
        if _Interrupts.calls == 4:
            raise KeyboardInterrupt
        return x


def test_an_interrupt_while_the_bad_step_runs_again_loses_no_step(tmp_path):
    _Interrupts.calls = 0
    sw = Switch(Kink())
    model = nn.Sequential(nn.Linear(3, 3), _Interrupts(), sw, nn.Linear(3, 1))
    with pytest.raises(KeyboardInterrupt), gradviz.watch(model, tmp_path / "run") as rec:
        for step in range(3):
            sw.on = step == 2
            model(torch.randn(4, 3)).sum().backward()
            rec.log()
            model.zero_grad()
    summary = Reader(tmp_path / "run").describe()
    assert summary["complete"] and summary["first_nonfinite"]["step"] == 2
    assert _untouched(model)  # the replay's notes went with it
