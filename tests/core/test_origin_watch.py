"""watch(origin=True): every step checks each module's output and the gradient reaching it,
so the recording's first non-finite step also names the module whose forward or backward
made it (``first_nonfinite["origin"]``)."""

from __future__ import annotations

import torch
from torch import nn

import gradviz
from gradviz.core.record.reader import Reader


class LogOf(nn.Module):
    def forward(self, x):
        return torch.log(x)


class Penalised(nn.Module):
    """Finite forward; sqrt at 0 makes the gradient reaching ``head``'s output NaN."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(3, 3)
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        h = self.head(self.body(x))
        return h + torch.sqrt((h - h).square())


def _train(model, path, batches, **watch):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with gradviz.watch(model, path, **watch) as rec:
        for x in batches:
            opt.zero_grad()
            loss = model(x).sum()
            loss.backward()
            rec.log(loss=loss)
            opt.step()
    return Reader(path).describe()["first_nonfinite"]


def test_the_first_bad_step_names_the_module_whose_forward_made_it(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Sequential(nn.Identity(), LogOf()), nn.Linear(2, 2))
    batches = [torch.rand(4, 2) + 0.5 for _ in range(5)]
    batches[3][1, 0] = 0.0  # log of 0 at step 3: -Inf, and an infinite gradient
    first = _train(model, tmp_path / "run", batches, every=100)
    assert first["step"] == 3
    origin = first["origin"]
    assert origin["phase"] == "forward" and origin["module"] == "0.1"
    assert "0.1" in origin["cause"] and origin["step"] == 3
    # Step 3 ran again under the tracer: the operation and its line are known.
    assert (origin["op"], origin["how"]) == ("aten.log.default", "replayed")
    assert origin["source"].endswith("test_origin_watch.py:16")


def test_a_nan_gradient_is_blamed_on_the_backward_that_made_it(tmp_path):
    torch.manual_seed(0)
    first = _train(Penalised(), tmp_path / "run", [torch.randn(4, 3)])
    origin = first["origin"]
    assert (origin["phase"], origin["module"]) == ("backward", "")  # the loss, not a module
    assert "the output of module 'head'" in origin["cause"] and first["step"] == 0


def test_nan_in_the_batch_is_an_input_and_origin_false_records_none(tmp_path):
    batches = [torch.ones(2, 2), torch.full((2, 2), float("nan"))]
    model = nn.Sequential(nn.Linear(2, 1))
    first = _train(model, tmp_path / "a", batches)
    assert first["step"] == 1 and first["origin"]["phase"] == "input"
    model = nn.Sequential(nn.Linear(2, 1))
    assert "origin" not in _train(model, tmp_path / "b", batches, origin=False)


def test_a_large_batch_holding_nan_is_an_input_and_is_not_held_past_its_step(tmp_path):
    # A batch larger than the outputs kept through a step is kept too (its caller holds it
    # anyway), not summed, and let go when the step ends.
    import weakref

    from gradviz.core.origin.modules import KEEP_NUMEL

    model = nn.Sequential(nn.Linear(8, 1))
    rows = 2 * KEEP_NUMEL // 8
    batches = [torch.ones(rows, 8), torch.ones(rows, 8)]
    batches[1][rows - 1, 7] = float("nan")
    refs = [weakref.ref(b) for b in batches]
    first = _train(model, tmp_path / "run", batches)
    assert (first["step"], first["origin"]["phase"]) == (1, "input")
    del batches
    assert all(ref() is None for ref in refs)


def test_a_gradient_spoilt_after_the_backward_is_no_modules_doing(tmp_path):
    # The biases' gradients are read as the backward left them (finite here): a NaN the
    # user's own code writes into .grad afterwards is the first non-finite gradient, but
    # no module's forward or backward made it.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    with gradviz.watch(model, tmp_path / "run") as rec:
        model(torch.randn(4, 3)).sum().backward()
        model[2].bias.grad.fill_(float("nan"))
        rec.log()
    first = Reader(tmp_path / "run").describe()["first_nonfinite"]
    assert first["tensor"] == "2.bias" and "origin" not in first


def _untouched(model: nn.Module) -> bool:
    """No module of ``model`` has a hook or a wrapped call left (see ``note_each_call``)."""
    return all(
        not m._forward_hooks and not m._forward_pre_hooks and m._compiled_call_impl is None
        for m in model.modules()
    )


def test_a_clean_run_leaves_no_hooks_and_no_origin(tmp_path):
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    assert _train(model, tmp_path / "run", [torch.randn(3, 2)] * 3) is None
    assert _untouched(model)


def test_a_copy_or_a_pickle_of_a_watched_model_carries_nothing_of_the_watch(tmp_path):
    # An EMA copy made while watching must compute with its own weights and note nothing
    # into the watch; ``torch.save(model)`` must load as a plain model.
    import copy
    import io

    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
    x = torch.randn(3, 2)
    with gradviz.watch(model, tmp_path / "run", every=1) as rec:
        model(x).sum().backward()
        rec.log()
        assert not _untouched(model)  # the watch is on
        ema = copy.deepcopy(model)
        buffer = io.BytesIO()
        torch.save(model, buffer)
        with torch.no_grad():
            for p in ema.parameters():
                p.mul_(2)
        assert not torch.equal(ema(x), model(x))
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    for copied in (ema, loaded):
        assert _untouched(copied)
    assert torch.equal(loaded(x), model(x))


def test_a_copy_made_before_the_first_step_is_recorded_carries_nothing_and_saves(tmp_path):
    # The usual EMA: copied right after the watch starts, while the first step's graph is
    # still being noted on every module (and with origin=False, where only that runs).
    import copy
    import io

    for origin in (True, False):
        model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
        with gradviz.watch(model, tmp_path / f"run{origin}", origin=origin) as rec:
            ema = copy.deepcopy(model)
            assert _untouched(ema)
            torch.save(ema, io.BytesIO())
            model(torch.randn(3, 2)).sum().backward()
            rec.log()
        assert _untouched(model)
    graph = Reader(tmp_path / "runFalse").rank(0).meta["graph"]
    assert graph["order"] == ["", "0", "1", "2"]  # the graph is noted all the same


def test_where_dataparallel_could_replicate_a_replica_runs_its_own_weights(tmp_path, monkeypatch):
    # DataParallel's replicas copy a module's attributes (``_replicate_for_data_parallel``):
    # a wrapped call would come along and run the original module on the replica's input.
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    x = torch.randn(3, 2)
    with gradviz.watch(model, tmp_path / "run"):
        replica = model[0]._replicate_for_data_parallel()
        replica.weight, replica.bias = torch.ones(2, 2), torch.zeros(2)
        assert torch.equal(replica(x), x @ torch.ones(2, 2))
        assert model[0]._forward_hooks  # watched by a hook, which the replica shares


def test_a_submodule_its_user_compiled_keeps_its_compiled_call_and_is_still_watched(tmp_path):
    calls = []

    class Compiled:  # stands in for what ``nn.Module.compile`` puts there
        def __init__(self, module):
            self.module = module

        def __call__(self, *args, **kwargs):
            calls.append(1)
            return self.module._call_impl(*args, **kwargs)

    model = nn.Sequential(nn.Sequential(nn.Identity(), LogOf()), nn.Linear(2, 2))
    compiled = Compiled(model[0][1])
    model[0][1]._compiled_call_impl = compiled
    batches = [torch.rand(4, 2) + 0.5, torch.zeros(4, 2)]  # log of 0 at step 1
    first = _train(model, tmp_path / "run", batches)
    # Its call ran at both steps, at the replay of step 1 and at that step's run again under
    # the tracer (see ``core.origin.replay``).
    assert len(calls) == 4 and model[0][1]._compiled_call_impl is compiled
    assert (first["step"], first["origin"]["module"]) == (1, "0.1")


def test_a_large_output_is_let_go_once_its_consumer_ran_and_its_nan_still_found(tmp_path):
    # The Linear's output (larger than the outputs kept through a step) is needed by no one
    # once ReLU ran (ReLU keeps its own result): the watch must not hold it either.
    import weakref

    from gradviz.core.origin.modules import KEEP_NUMEL

    width = KEEP_NUMEL // 4 + 1
    seen: dict[str, object] = {}

    class Probe(nn.Module):
        def forward(self, x):
            seen["alive after relu"] = seen["ref"]() is not None
            return x

    model = nn.Sequential(nn.Linear(4, width), nn.ReLU(), Probe(), nn.Linear(width, 1))
    model[0].register_forward_hook(lambda m, a, out: seen.update(ref=weakref.ref(out)))
    batches = [torch.randn(8, 4), torch.full((8, 4), 1e38)]  # 1e38 * w overflows: Inf
    with torch.no_grad():
        model[0].weight.fill_(10.0)
    first = _train(model, tmp_path / "run", batches)
    assert seen["alive after relu"] is False
    assert (first["step"], first["origin"]["phase"], first["origin"]["module"]) == (
        1,
        "forward",
        "0",
    )


def test_inspect_says_where_it_started_and_each_rank_keeps_it(tmp_path, capsys):
    from gradviz.cli import main

    torch.manual_seed(0)
    _train(Penalised(), tmp_path / "run", [torch.randn(4, 3)])
    summary = Reader(tmp_path / "run").describe()
    assert summary["per_rank"][0]["first_nonfinite"]["origin"]["phase"] == "backward"
    assert main(["inspect", str(tmp_path / "run")]) == 0
    lines = capsys.readouterr().out.splitlines()
    started = [line for line in lines if line.startswith("  where it started: ")]
    assert started == [f"  where it started: {summary['first_nonfinite']['origin']['cause']}"]


def test_a_loss_already_non_finite_outside_every_module_is_named_as_the_forward(tmp_path):
    """log(0) in the loss, outside every module: every module's output is finite, and the
    first bad gradient reaches the last module from the loss. The recording must say it
    started in the loss's forward, not in a backward."""
    import gradviz
    from gradviz.core.record.reader import Reader

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = gradviz.watch(model, tmp_path / "rec", every=5)
    for step in range(4):
        y = model(torch.randn(16, 4))
        if step == 2:
            y = torch.log(y - y.detach())  # log(0) = -inf, outside any module
        loss = y.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        rec.log(loss=loss)
    rec.close()
    origin = Reader(tmp_path / "rec").first_nonfinite()["origin"]
    assert origin["step"] == 2 and origin["phase"] == "forward" and origin["module"] == ""
    assert origin["cause"].startswith("The loss was Inf though every module's output was finite")


class Kink(nn.Module):
    """Finite forward (0); its backward is 0 x Inf = NaN: the gradient reaching its input."""

    def forward(self, x):
        return torch.sqrt((x - x.detach()).square()) + x


class Residual(nn.Module):
    """``x + f(x)``: both finite, their sum overflows to Inf in the parent's own add."""

    def __init__(self):
        super().__init__()
        self.f = nn.Linear(2, 2)
        with torch.no_grad():
            self.f.weight.copy_(torch.eye(2))
            self.f.bias.zero_()

    def forward(self, x):
        return x + self.f(x)


def test_a_nan_made_in_a_modules_backward_names_that_module_and_the_hooks_then_go(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), Kink(), nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with gradviz.watch(model, tmp_path / "run") as rec:
        for _ in range(3):
            opt.zero_grad()
            loss = model(torch.randn(4, 3)).sum()
            loss.backward()
            rec.log(loss=loss)
            # Found at step 0: nothing is hooked for the steps after it.
            assert _untouched(model)
    first = Reader(tmp_path / "run").describe()["first_nonfinite"]
    origin = first["origin"]
    assert (origin["phase"], origin["module"], origin["step"]) == ("backward", "1", 0)
    assert "the output of module '0'" in origin["cause"]
    assert "the backward of module '1'" in origin["cause"]


def test_a_parent_whose_own_residual_add_overflows_is_named(tmp_path):
    model = nn.Sequential(Residual(), nn.Linear(2, 1))
    batches = [torch.ones(3, 2), torch.full((3, 2), 2e38)]  # 2e38 + 2e38 = Inf
    first = _train(model, tmp_path / "run", batches)
    assert first["step"] == 1
    assert (first["origin"]["phase"], first["origin"]["module"]) == ("forward", "0")


def test_an_inplace_relu_on_a_kept_output_does_not_move_the_blame(tmp_path):
    # The Linear's output is rewritten in place by ReLU(inplace=True) after its hook; the
    # log of the zeros it leaves is the third module's doing.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(inplace=True), LogOf(), nn.Linear(2, 1))
    first = _train(model, tmp_path / "run", [torch.randn(8, 2)])
    assert (first["origin"]["phase"], first["origin"]["module"]) == ("forward", "2")


def test_evaluation_forwards_between_steps_are_neither_blamed_nor_kept(tmp_path):
    import weakref

    model = nn.Sequential(LogOf(), nn.Linear(2, 2))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    kept = []
    with gradviz.watch(model, tmp_path / "run") as rec:
        for step in range(3):
            x = torch.rand(4, 2) + 0.5
            if step == 2:
                x[0, 0] = 0.0  # log(0) in the forward of module '0', at step 2
            opt.zero_grad()
            loss = model(x).sum()
            loss.backward()
            rec.log(loss=loss)
            with torch.no_grad():  # an evaluation whose batch holds NaN: no training step's
                out = model(torch.full((4, 2), float("nan")))
            kept.append(weakref.ref(out))
            del out
    assert all(ref() is None for ref in kept)  # the recorder held on to none of them
    origin = Reader(tmp_path / "run").describe()["first_nonfinite"]["origin"]
    assert (origin["phase"], origin["module"], origin["step"]) == ("forward", "0", 2)


def test_two_forwards_before_one_backward_find_the_first_forwards_nan(tmp_path):
    # Gradient accumulation: two micro-batches per step; the first one's log(0) is found
    # though only its sums were kept once the second forward started.
    model = nn.Sequential(LogOf(), nn.Linear(2, 2))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with gradviz.watch(model, tmp_path / "run") as rec:
        for step in range(2):
            opt.zero_grad()
            for micro in range(2):
                x = torch.rand(4, 2) + 0.5
                if (step, micro) == (1, 0):
                    x[2, 1] = 0.0
                loss = model(x).sum()
                loss.backward()
            rec.log(loss=loss)
            opt.step()
    origin = Reader(tmp_path / "run").describe()["first_nonfinite"]["origin"]
    assert (origin["phase"], origin["module"], origin["step"]) == ("forward", "0", 1)


def _module_origin_of(model, x, lazy):
    from gradviz.core.origin.modules import ModuleOrigin

    origin = ModuleOrigin(model, lazy=lazy)
    try:
        model(x).sum().backward()
        return origin.step_end(read=True, suspect=None)
    finally:
        origin.remove()


def test_summing_at_once_on_an_accelerator_agrees_with_keeping_the_tensors():
    """Where the module outputs are summed at once (an accelerator's way) the origin is the
    same as where they are kept and tested after the step (the CPU's). (Not where finite
    values sum past the float32 limit: only a kept tensor is then tested exactly.)"""
    cases = [
        (nn.Sequential(nn.Linear(3, 3), Kink(), nn.Linear(3, 1)), torch.randn(4, 3)),
        (nn.Sequential(Residual(), nn.Linear(2, 1)), torch.tensor([[2e38, 0.0]])),
        (nn.Sequential(nn.Identity(), LogOf(), nn.Linear(2, 2)), torch.tensor([[0.0, 1.0]])),
        (Penalised(), torch.randn(4, 3)),
        (nn.Sequential(nn.Linear(2, 1)), torch.full((2, 2), float("nan"))),
        (nn.Sequential(nn.Linear(2, 2), nn.Tanh()), torch.randn(3, 2)),
    ]
    for model, x in cases:
        kept = _module_origin_of(model, x, lazy=True)
        summed = _module_origin_of(model, x, lazy=False)
        assert kept == summed
    assert _module_origin_of(*cases[-1], lazy=True) is None


class _NaNGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return torch.full_like(grad, float("nan"))


class _BadBackward(nn.Module):
    def forward(self, x):
        return _NaNGradient.apply(x)


class _Branches(nn.Module):
    """c(a(x) + b(bad(a2(x)))): the backward of ``bad`` makes the NaN that reaches a2."""

    def __init__(self):
        super().__init__()
        self.a, self.a2, self.bad = nn.Linear(3, 3), nn.Linear(3, 3), _BadBackward()
        self.b, self.c = nn.Linear(3, 3), nn.Linear(3, 1)

    def forward(self, x):
        return self.c(self.a(x) + self.b(self.bad(self.a2(x))))


def test_a_backward_nan_in_one_branch_is_blamed_on_that_branch_in_the_backwards_order(tmp_path):
    # Gradients are read in the order the backward made them (a2's comes after bad's, and
    # a's, made from the finite add, is finite): by the forward's order it would be 'a'.
    torch.manual_seed(0)
    first = _train(_Branches(), tmp_path / "run", [torch.randn(4, 3)])
    origin = first["origin"]
    assert (origin["phase"], origin["module"]) == ("backward", "bad")
    assert "the output of module 'a2'" in origin["cause"]


def test_a_users_own_retained_activation_gradient_is_left_as_autograd_gives_it(tmp_path):
    # Grad-CAM's way: a forward hook keeps an activation and asks for its gradient.
    def run(watched: bool):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        kept = []

        def keep(_module, _args, out):
            out.retain_grad()
            kept.append(out)

        model[1].register_forward_hook(keep)
        x = torch.randn(5, 3)
        rec = gradviz.watch(model, tmp_path / f"run{watched}") if watched else None
        model(x).sum().backward()
        if rec is not None:
            rec.log()
            rec.close()
        return kept[0].grad

    plain, watched = run(False), run(True)
    assert watched is not None and torch.equal(watched, plain)


class _Twice(nn.Module):
    """One Linear called twice in a step, with Kink's NaN gradient reaching the output of
    its first call (``first_bad``) or of its second."""

    def __init__(self, first_bad: bool):
        super().__init__()
        self.f, self.kink, self.first_bad = nn.Linear(3, 3), Kink(), first_bad

    def forward(self, x):
        if self.first_bad:
            return self.f(self.kink(self.f(x)))
        return self.kink(self.f(self.f(x)))


def _biased_cases():
    torch.manual_seed(0)
    encoder = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    return [
        (nn.Sequential(nn.Linear(3, 3), Kink(), nn.Linear(3, 1)), torch.randn(4, 3), "1"),
        (
            nn.Sequential(nn.Linear(3, 3, bias=False), Kink(), nn.Linear(3, 1)),
            torch.randn(4, 3),
            "1",
        ),
        (
            nn.Sequential(nn.Conv2d(1, 2, 3), Kink(), nn.Flatten(), nn.Linear(18, 1)),
            torch.randn(2, 1, 5, 5),
            "1",
        ),
        (
            nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), Kink(), nn.Linear(4, 1)),
            torch.randn(4, 3),
            "2",
        ),
        (nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), Kink()), torch.randn(4, 3), "2"),
        (nn.Sequential(encoder, Kink(), nn.Linear(8, 1)), torch.randn(2, 5, 8), "1"),
        (_Branches(), torch.randn(4, 3), "bad"),
        (_Twice(first_bad=True), torch.randn(4, 3), "kink"),
        (_Twice(first_bad=False), torch.randn(4, 3), "kink"),
        (nn.Sequential(nn.Linear(3, 3), nn.Tanh()), torch.randn(4, 3), None),
    ]


def _origin_with(model, x, *, biases: bool, lazy: bool = True):
    from gradviz.core.origin.modules import ModuleOrigin

    origin = ModuleOrigin(model, lazy=lazy)
    if not biases:
        origin._biases = {}  # every output's gradient kept or hooked as it is made
    try:
        model(x).sum().backward()
        return origin.step_end(read=True, suspect=None)
    finally:
        origin.remove()
        model.zero_grad()


def test_reading_a_layers_output_gradient_from_its_bias_finds_the_same_origin():
    """The gradient reaching a biased layer's output is read from its bias's gradient (no
    copy, no hook in the backward); the origin is the one found from the gradients
    themselves, also for a bias-free layer, attention's projection and a layer called twice."""
    for model, x, expected in _biased_cases():
        with_bias = _origin_with(model, x, biases=True)
        assert with_bias == _origin_with(model, x, biases=False)
        assert with_bias == _origin_with(model, x, biases=True, lazy=False)
        if expected is None:
            assert with_bias is None
        else:
            assert (with_bias["phase"], with_bias["module"]) == ("backward", expected)


def test_a_biased_layers_gradient_is_not_copied_but_another_modules_is(tmp_path):
    model = nn.Sequential(nn.Linear(3, 3), Kink(), nn.Linear(3, 1))
    outputs = {}
    with gradviz.watch(model, tmp_path / "run"):
        for name in ("0", "1"):
            module = model.get_submodule(name)
            module.register_forward_hook(lambda m, _a, out, name=name: outputs.update({name: out}))
        model(torch.randn(4, 3)).sum().backward()
        retains = {name: out.retains_grad for name, out in outputs.items()}
    assert retains == {"0": False, "1": True}


def test_only_a_plain_layer_in_a_wide_dtype_has_its_output_gradient_read_from_its_bias():
    from gradviz.core.origin.modules import output_bias

    class Unbiased(nn.Linear):
        def forward(self, x):
            return nn.functional.linear(x, self.weight)  # its bias gets no gradient

    attention = nn.MultiheadAttention(4, 2)
    assert output_bias(attention) is attention.out_proj.bias
    lin = nn.Linear(2, 2)
    assert output_bias(lin) is lin.bias
    assert output_bias(nn.Linear(2, 2).half()) is None  # float16 sums overflow soon
    assert output_bias(nn.Linear(2, 2, bias=False)) is None
    assert output_bias(Unbiased(2, 2)) is None
    assert output_bias(nn.LayerNorm(2, elementwise_affine=False)) is None


def test_gradient_clipping_before_rec_log_does_not_move_the_blame(tmp_path):
    # A NaN total norm makes clip_grad_norm_ turn every gradient NaN in place (a trainer
    # that clips before its callbacks run does this): the biases' gradients are read as
    # the backward left them, so Kink's backward is still named.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), Kink(), nn.Linear(3, 3), nn.Linear(3, 1))
    with gradviz.watch(model, tmp_path / "run") as rec:
        model(torch.randn(4, 3)).sum().backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        assert all(bool(torch.isnan(p.grad).all()) for p in model.parameters())
        rec.log()
    origin = Reader(tmp_path / "run").describe()["first_nonfinite"]["origin"]
    assert (origin["phase"], origin["module"]) == ("backward", "1")
    assert "the output of module '0'" in origin["cause"]


class _KinkFromStep1(nn.Module):
    def __init__(self):
        super().__init__()
        self.on = False

    def forward(self, x):
        return Kink.forward(self, x) if self.on else x


class _FirstLayerUnused(nn.Module):
    def __init__(self):
        super().__init__()
        self.unused = nn.Linear(3, 3)  # the first bias of the model, never given a gradient
        self.body = nn.Sequential(nn.Linear(3, 3), _KinkFromStep1(), nn.Linear(3, 1))

    def forward(self, x):
        return self.body(x)


def test_clipping_does_not_move_the_blame_where_the_first_bias_gets_no_gradient(tmp_path):
    # The biases' gradients are tested as the backward ends when a bias's gradient asks
    # for it; where that bias got none, a bias the step used asks from the next step on.
    torch.manual_seed(0)
    model = _FirstLayerUnused()
    with gradviz.watch(model, tmp_path / "run") as rec:
        for step in range(2):
            model.body[1].on = step == 1
            model.zero_grad()
            model(torch.randn(4, 3)).sum().backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            rec.log()
    origin = Reader(tmp_path / "run").describe()["first_nonfinite"]["origin"]
    assert (origin["phase"], origin["module"], origin["step"]) == ("backward", "body.1", 1)
    assert "the output of module 'body.0'" in origin["cause"]


def test_a_graph_kept_past_its_step_and_run_again_adds_nothing_and_breaks_nothing(tmp_path):
    # retain_graph=True, then the same graph's backward again after rec.log ended the step:
    # the pre-hook that asks for the biases' copy fires with no step to add to.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    with gradviz.watch(model, tmp_path / "run") as rec:
        loss = model(torch.randn(4, 3)).sum()
        loss.backward(retain_graph=True)
        rec.log(loss=loss)
        loss.backward()
        rec.log(loss=loss)
    assert Reader(tmp_path / "run").describe()["first_nonfinite"] is None


def test_a_model_cast_to_float16_after_watch_keeps_its_own_output_gradients(tmp_path):
    # In float16 a sum of finite gradients overflows soon: a bias cast after watch began
    # is not read for its layer's output gradient; that gradient is kept itself.
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    outputs = []
    with gradviz.watch(model, tmp_path / "run"):
        model.half()
        model[0].register_forward_hook(lambda _m, _a, out: outputs.append(out))
        model(torch.randn(4, 3, dtype=torch.float16)).float().sum().backward()
        retains = [out.retains_grad for out in outputs]
    assert retains == [True]


def test_a_layers_place_in_the_backward_is_its_own_node_though_its_output_is_changed_in_place():
    from gradviz.core.origin.modules import ModuleOrigin

    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True))  # ReLU rewrites its output
    made_by_linear = []
    model[0].register_forward_hook(lambda m, a, out: made_by_linear.append(out.grad_fn))
    origin = ModuleOrigin(model)
    try:
        y = model(torch.randn(4, 3))
        (_, _, order, _), *_ = origin._by_bias
        linear = made_by_linear[0]._sequence_nr()
        assert order == linear < y.grad_fn._sequence_nr()  # y's node is now ReLU's
    finally:
        origin.remove()


def test_biases_that_cannot_be_laid_end_to_end_are_still_read_as_the_backward_left_them(tmp_path):
    # A LayerNorm over two dimensions has a bias of two: its gradient is copied by itself.
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(6, 6), nn.Unflatten(1, (2, 3)), nn.LayerNorm([2, 3]), nn.Flatten(), Kink()
    )
    model.append(nn.Linear(6, 1))
    with gradviz.watch(model, tmp_path / "run") as rec:
        model(torch.randn(4, 6)).sum().backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # every gradient NaN now
        rec.log()
    origin = Reader(tmp_path / "run").describe()["first_nonfinite"]["origin"]
    assert (origin["phase"], origin["module"]) == ("backward", "4")
    assert "the output of module '2'" in origin["cause"]


def test_the_copy_of_the_biases_gradients_keeps_no_graph_of_a_create_graph_backward():
    import warnings

    from gradviz.core.origin.modules import ModuleOrigin

    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))
    origin = ModuleOrigin(model)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # backward(create_graph=True)'s reference cycle
            model(torch.randn(4, 3)).sum().backward(create_graph=True)
        flat, biases = origin._bias_flat
        assert not flat.requires_grad
        assert [id(b) for b in biases] == [id(model[0].bias), id(model[2].bias)]
        assert torch.equal(flat, torch.cat([model[0].bias.grad, model[2].bias.grad]).detach())
    finally:
        origin.remove()
        model.zero_grad(set_to_none=True)
