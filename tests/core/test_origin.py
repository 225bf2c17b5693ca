"""trace_nonfinite: one small program per cause, each checked for the phase, operation,
node, module, source line and cause of the first non-finite value, and clean runs that
report None and are bitwise the same as without the tracer."""

from __future__ import annotations

import math
import os

import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

import gradviz
from gradviz.core.origin import trace_nonfinite

HERE = os.path.relpath(__file__) if not os.path.relpath(__file__).startswith("..") else __file__


def line(marker: str) -> str:
    """``tests/core/test_origin.py:N`` of the line ending in ``# <marker>``."""
    with open(__file__, encoding="utf-8") as f:
        for number, text in enumerate(f, start=1):
            if text.rstrip().endswith(f"# {marker}"):
                return f"{HERE}:{number}"
    raise AssertionError(marker)


def traced(step, *args):
    """The origin of ``step(*args)``, asked while its result is still held (a non-finite
    value that nothing holds any more was masked away and started nothing)."""
    with trace_nonfinite() as t:
        result = step(*args)
    origin = t.origin
    del result
    return origin


# ---- the seed: the naive distance matrix ---------------------------------------------------------
class NaiveDistances(nn.Module):
    def forward(self, x):
        sq = ((x[:, None] - x[None]) ** 2).sum(-1)
        return torch.sqrt(sq)  # naive sqrt


class Fit(nn.Module):
    def __init__(self):
        super().__init__()
        self.dist = NaiveDistances()

    def forward(self, x):
        return self.dist(x)


def test_naive_distances_start_in_sqrt_backward_on_the_diagonal():
    torch.manual_seed(0)
    x = torch.randn(6, 3, requires_grad=True)
    target = torch.cdist(torch.randn(6, 3), torch.randn(6, 3)).fill_diagonal_(0)
    model = Fit()

    def step():
        loss = ((model(x) - target) ** 2).mean()
        loss.backward()

    origin = traced(step)
    assert origin.phase == "backward"
    assert origin.op == "aten.div.Tensor" and origin.node == "SqrtBackward0"
    assert origin.module == "dist"
    assert origin.source == line("naive sqrt")
    assert origin.cause_code == "sqrt_at_zero" and "sqrt at 0" in origin.cause
    assert origin.kind == "nan" and origin.count == 6 and origin.numel == 36
    assert origin.indices == ((0, 0), (1, 1), (2, 2), (3, 3))
    # The incoming gradient (0 on the diagonal) and 2 sqrt(0) = 0: 0 / 0.
    assert origin.inputs == ((0.0,) * 4, (0.0,) * 4)
    assert origin.events and all(e.kind == "nan" for e in origin.events)
    assert x.grad.isnan().any()  # the tracer changed nothing: the NaN is still there


# ---- one program per cause ----------------------------------------------------------------------
class LogLoss(nn.Module):
    def forward(self, p):
        return -torch.log(p).mean()  # log


def test_log_of_zero_is_named_in_the_forward():
    p = torch.tensor([0.5, 0.0, 0.25], requires_grad=True)

    def step():
        loss = LogLoss()(p)
        loss.backward()
        return loss

    origin = traced(step)
    assert (origin.phase, origin.op, origin.node) == ("forward", "aten.log.default", None)
    assert origin.module == "" and origin.source == line("log")
    assert origin.cause_code == "log_of_zero" and origin.kind == "-inf"
    assert origin.indices == ((1,),) and origin.inputs == ((0.0,),)


def test_a_forward_log_of_zero_is_the_origin_though_only_its_gradient_lasts():
    # The -Inf loss is not kept, only the gradient its backward made (1 / 0): that gradient
    # is the forward's log(0) continued, not a new start in the backward.
    p = torch.tensor([0.5, 0.0], requires_grad=True)
    origin = traced(lambda: LogLoss()(p).backward())
    assert (origin.phase, origin.op, origin.node) == ("forward", "aten.log.default", None)
    assert origin.source == line("log") and origin.cause_code == "log_of_zero"
    assert [e.node for e in origin.events if e.phase == "backward"][-1] == "LogBackward0"
    assert p.grad[1] == -math.inf


class LogOfDifference(nn.Module):
    def forward(self, x):
        return torch.log(x - x)  # log of x - x


def test_a_forward_log_of_zero_inside_a_submodule_is_the_origin_where_nan_shows_in_the_backward():
    # log(x - x) = -Inf in the forward; the backward's LogBackward0 makes Inf from it and
    # SubBackward0 adds +Inf and -Inf: NaN first shows in the backward, but started before.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), LogOfDifference())

    def step():
        loss = model(torch.randn(8, 4)).mean()
        loss.backward()
        return loss

    origin = traced(step)
    assert (origin.phase, origin.op, origin.module) == ("forward", "aten.log.default", "1")
    assert origin.source == line("log of x - x") and origin.kind == "-inf"
    assert origin.cause_code == "log_of_zero" and origin.spread_code == "inf_minus_inf"
    assert "It became NaN in the backward, in aten.add.Tensor (SubBackward0)" in origin.cause


class LogInOwnCode(nn.Module):
    """The root's own forward makes -Inf, between its submodule and its output."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        h = self.fc(x)
        return torch.log(h - h)  # log in the root's own code


@pytest.mark.parametrize("where", ["model", "loss"])
def test_the_models_own_code_is_told_from_code_outside_any_module(where):
    # Neither runs in a submodule (module ""): the root's own forward is in the model, the
    # loss's code is not, and the words must not say "outside any module" of the first.
    torch.manual_seed(0)
    model = LogInOwnCode()
    if where == "loss":
        model.forward = lambda x: model.fc(x)  # the same log, now applied by the loss

    def step():
        out = model(torch.ones(3, 2))
        if where == "loss":
            out = torch.log(out - out)  # log in the loss
        out.sum().backward()

    origin = traced(step)
    assert (origin.phase, origin.op, origin.module) == ("forward", "aten.log.default", "")
    assert origin.in_model == (where == "model")
    said = origin.words()
    if where == "model":
        assert "aten.log.default in the model's own code (its forward" in said
        assert "(SubBackward0) in the model's own code" in origin.cause  # where NaN showed
    else:
        assert "aten.log.default outside any module" in said
        assert "own code" not in said


def test_log_of_a_negative_number_is_nan_in_the_forward():
    p = torch.tensor([0.5, -2.0])
    origin = traced(lambda: LogLoss()(p))
    assert origin.cause_code == "log_of_negative" and origin.kind == "nan"
    assert "-2" in origin.cause and origin.source == line("log")


class MeanOfSelected(nn.Module):
    def forward(self, x, keep):
        return (x * keep).sum() / keep.sum()  # divide


class Pooled(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(3, 3)
        self.pool = MeanOfSelected()

    def forward(self, x, keep):
        return self.pool(self.body(x), keep)


def test_division_by_zero_is_named_with_its_module():
    origin = traced(lambda: Pooled()(torch.randn(2, 3), torch.zeros(2, 3)))
    assert (origin.phase, origin.op) == ("forward", "aten.div.Tensor")
    assert origin.module == "pool" and origin.source == line("divide")
    assert origin.cause_code == "division_by_zero" and origin.kind == "nan"


class NaiveSoftmax(nn.Module):
    def forward(self, z):
        e = torch.exp(z)  # exp
        return e / e.sum(-1, keepdim=True)


def test_softmax_without_the_max_subtracted_overflows_in_exp():
    z = torch.tensor([[1.0, 100.0, 2.0]])
    origin = traced(lambda: NaiveSoftmax()(z))
    assert (origin.phase, origin.op) == ("forward", "aten.exp.default")
    assert origin.source == line("exp") and origin.kind == "inf"
    assert origin.cause_code == "exp_overflow" and "100" in origin.cause
    assert origin.spread_code == "inf_over_inf" and "Inf / Inf" in origin.cause
    assert [e.op for e in origin.events] == ["aten.sum.dim_IntList", "aten.div.Tensor"]


def masked_reciprocal(x):
    return torch.where(x != 0, 1 / x, torch.zeros_like(x))  # where


def test_masked_where_whose_other_branch_is_inf_gives_zero_times_inf_in_backward():
    x = torch.tensor([2.0, 0.0, 4.0], requires_grad=True)
    y = None

    def step():
        nonlocal y
        y = masked_reciprocal(x)
        y.sum().backward()

    origin = traced(step)
    assert torch.isfinite(y).all()  # the forward looks fine: where hid the Inf
    assert (origin.phase, origin.op) == ("forward", "aten.reciprocal.default")
    assert origin.source == line("where") and origin.kind == "inf"
    assert origin.cause_code == "division_by_zero"
    assert origin.spread_code == "zero_times_inf" and "0 x Inf" in origin.cause
    assert x.grad.isnan().tolist() == [False, True, False]


def test_inf_minus_inf_is_where_the_overflow_became_nan():
    z = torch.tensor([90.0, 1.0])

    def step():
        big = torch.exp(z)  # inf source
        return big - torch.exp(z)

    origin = traced(step)
    assert origin.op == "aten.exp.default" and origin.source == line("inf source")
    assert origin.spread_code == "inf_minus_inf" and "Inf - Inf" in origin.cause


def test_acos_outside_its_domain_is_nan():
    u = torch.tensor([3.0, 4.0])

    def step():
        cosine = (u * u).sum() / (u.norm() * u.norm()) * 1.001
        return torch.acos(cosine)  # acos

    origin = traced(step)
    assert (origin.op, origin.source) == ("aten.acos.default", line("acos"))
    assert origin.cause_code == "domain" and "[-1, 1]" in origin.cause


def test_float16_overflow_is_named():
    x = torch.full((4,), 300.0, dtype=torch.float16)

    def step():
        return x * x  # half

    origin = traced(step)
    assert (origin.op, origin.source, origin.dtype) == ("aten.mul.Tensor", line("half"), "float16")
    assert origin.cause_code == "low_precision_overflow" and "65504" in origin.cause


# ---- values from outside, custom backward, optimizer ------------------------------------------
def test_nan_in_the_batch_is_an_input_named_at_the_module_that_received_it():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    batch = torch.randn(5, 4)
    batch[2, 1] = math.nan

    def step():
        model(batch).sum().backward()  # batch

    origin = traced(step)
    assert origin.phase == "input" and origin.tensor == ""
    assert origin.op == "aten.addmm.default" and origin.module == "0"
    assert origin.source == line("batch")
    assert origin.cause_code == "nonfinite_input" and origin.count == 1
    assert origin.indices == ((2, 1),)


def test_a_nan_parameter_is_an_input_named_by_its_path():
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
    with torch.no_grad():
        model[2].weight[0, 1] = math.nan
    origin = traced(lambda: model(torch.ones(3, 2)))
    assert origin.phase == "input" and origin.tensor == "2.weight" and origin.module == "2"


class NanBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


class UsesNanBackward(nn.Module):
    def forward(self, x):
        return NanBackward.apply(x).sum()  # custom


def test_custom_function_whose_backward_returns_nan():
    x = torch.ones(3, requires_grad=True)
    model = nn.Sequential(UsesNanBackward())
    origin = traced(lambda: model(x).backward())
    assert (origin.phase, origin.op) == ("backward", "aten.mul.Tensor")
    assert origin.node == "NanBackwardBackward"  # torch names the node class <Function>Backward
    assert origin.module == "0" and origin.source == line("custom")
    assert origin.cause_code == "custom_backward"
    assert "custom autograd.Function NanBackward " in origin.cause


def _overflowing_adam(warm: int = 3):
    """A Linear layer and an Adam after ``warm`` steps; the fourth overflows in the
    optimizer."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    # Each step moves every weight by lr (beta1 = 0: the update is lr * g / |g|): the
    # fourth passes float32's largest value, 3.4e38, while the forward stays finite.
    opt = torch.optim.Adam(model.parameters(), lr=1e38, betas=(0.0, 0.999))

    def step():
        opt.zero_grad()
        model(torch.full((1, 3), 1e-3)).mean().backward()
        opt.step()  # optimizer

    for _ in range(warm):
        step()
    return model, opt, step


def test_adam_with_a_huge_learning_rate_overflows_in_the_optimizer_step():
    model, _, step = _overflowing_adam()
    assert torch.isfinite(model.weight).all()
    origin = traced(step)
    assert origin.phase == "optimizer" and origin.node is None
    assert origin.op == "aten.addcdiv_.default" and origin.tensor == "weight"
    assert origin.source == line("optimizer") and origin.module == ""
    assert origin.cause_code == "optimizer_overflow" and "learning rate" in origin.cause


def _values(model, opt) -> list[torch.Tensor]:
    """Parameters, gradients and the optimizer's state tensors, as bit patterns (NaN and
    Inf compare equal to themselves)."""
    tensors = [t for p in model.parameters() for t in (p, p.grad)]
    tensors += [v for p in model.parameters() for v in opt.state[p].values()]
    return [t.detach().clone().view(torch.int32) for t in tensors]


@pytest.mark.parametrize("copy_limit", [None, 0], ids=["replayed", "traced as it runs"])
def test_an_overflowing_optimizer_step_is_named_and_leaves_the_values_of_an_untraced_run(
    monkeypatch, copy_limit
):
    # A step of finite values runs untraced from copies and is replayed under the tracer
    # only where it made a parameter non-finite; a model too big to copy is traced as it
    # runs. Either way the op is named and the step's results are those of a plain run.
    from gradviz.core.origin import optimizer_replay

    if copy_limit is not None:
        monkeypatch.setattr(optimizer_replay, "COPY_LIMIT_BYTES", copy_limit)
    plain_model, plain_opt, plain_step = _overflowing_adam()
    plain_step()
    model, opt, step = _overflowing_adam()
    steps_seen = []
    hook = register_optimizer_step_post_hook(lambda *_: steps_seen.append(1))
    try:
        origin = traced(step)
    finally:
        hook.remove()
    assert (origin.phase, origin.op, origin.tensor) == (
        "optimizer",
        "aten.addcdiv_.default",
        "weight",
    )
    assert origin.source == line("optimizer")
    assert steps_seen == [1]  # the replay is not a step of the user's hooks
    assert not torch.isfinite(model.weight).all()
    for a, b in zip(_values(plain_model, plain_opt), _values(model, opt), strict=True):
        assert torch.equal(a, b)


def test_an_optimizer_state_that_cannot_be_copied_is_traced_as_it_runs(monkeypatch):
    # Copying before the step is an optimisation: where it fails, the step must neither
    # raise into the user's code nor go unseen.
    from gradviz.core.origin import optimizer_replay

    def cannot_copy(optimizer):
        raise RuntimeError("a state this copy does not know")

    monkeypatch.setattr(optimizer_replay.StepCheckpoint, "take", cannot_copy)
    _, _, step = _overflowing_adam()
    origin = traced(step)
    assert (origin.phase, origin.op, origin.tensor) == (
        "optimizer",
        "aten.addcdiv_.default",
        "weight",
    )


def test_a_clean_step_runs_the_optimizer_untraced_and_replays_nothing(monkeypatch):
    from gradviz.core.origin import optimizer_replay

    replays = []
    monkeypatch.setattr(optimizer_replay.StepCheckpoint, "replay", lambda *a: replays.append(a))
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with trace_nonfinite() as t:
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(4, 3)).square().mean().backward()
            opt.step()
    assert t.origin is None and replays == []


class NormPenalty(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(3))

    def forward(self, x):
        return (x * self.w).sum() + torch.sqrt((self.w * self.w).sum())  # penalty


def test_nan_that_starts_in_the_backward_and_shows_in_the_next_forward():
    model = NormPenalty()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.ones(3)
    losses = []

    def step():
        opt.zero_grad()
        loss = model(x)
        losses.append(float(loss.detach()))
        loss.backward()
        opt.step()

    with trace_nonfinite() as t:
        step()
        step()
    assert math.isfinite(losses[0]) and math.isnan(losses[1])  # it shows in step 2's forward
    origin = t.origin
    assert (origin.phase, origin.node, origin.module) == ("backward", "SqrtBackward0", "")
    assert origin.source == line("penalty") and origin.cause_code == "sqrt_at_zero"
    # Traced from step 2 only, the NaN came in with the parameter.
    later = traced(step)
    assert later.phase == "input" and later.tensor == "w"


def test_find_origin_runs_a_step_once_and_returns_its_origin():
    calls = []

    def step(p, scale=1.0):
        calls.append(1)
        return torch.log(p * scale)  # find

    origin = gradviz.find_origin(step, torch.tensor([0.0, 1.0]), scale=2.0)
    assert calls == [1] and origin.source == line("find")
    assert gradviz.find_origin(step, torch.tensor([1.0])) is None


# ---- clean runs -------------------------------------------------------------------------------
def _train(model, batch, mask=None, steps=2):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    outs = []
    for _ in range(steps):
        opt.zero_grad()
        out = model(batch, src_key_padding_mask=mask) if mask is not None else model(batch)
        out.square().mean().backward()
        opt.step()
        outs.append(out.detach().clone())
    return outs, [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("kind", ["mlp", "transformer"])
def test_clean_training_reports_none_and_is_bitwise_unchanged(kind):
    def build():
        torch.manual_seed(0)
        if kind == "mlp":
            return (
                nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)),
                torch.randn(6, 4),
                None,
            )
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        mask = torch.zeros(2, 5, dtype=torch.bool)
        mask[:, -2:] = True  # padding: attention masked with -inf on purpose
        return (
            nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),
            torch.randn(2, 5, 8),
            mask,
        )

    model, batch, mask = build()
    bare_out, bare_grads = _train(model, batch, mask)
    model, batch, mask = build()
    with trace_nonfinite() as t:
        traced_out, traced_grads = _train(model, batch, mask)
    assert t.origin is None and t.events == ()
    for a, b in zip(bare_out + bare_grads, traced_out + traced_grads, strict=True):
        assert torch.equal(a, b)


def test_a_softmax_over_a_fully_masked_row_is_named_though_the_mask_is_deliberate():
    scores = torch.randn(2, 3)

    def step():
        masked = scores.masked_fill(torch.tensor([[False] * 3, [True] * 3]), -math.inf)
        return torch.softmax(masked, -1)  # all masked

    origin = traced(step)
    assert (origin.phase, origin.op) == ("forward", "aten._softmax.default")
    assert origin.source == line("all masked") and origin.cause_code == "fully_masked"


def test_the_tracer_never_raises_and_leaves_no_hooks_behind():
    x = torch.ones(2)
    with pytest.raises(ValueError), trace_nonfinite():
        torch.log(x - 1)
        raise ValueError("the user's own error")
    seen = []
    handle = nn.modules.module.register_module_forward_hook(lambda *a: seen.append(1))
    try:
        nn.Linear(2, 2)(torch.ones(1, 2))
    finally:
        handle.remove()
    assert seen == [1]
    from torch.nn.modules import module as m

    assert not m._global_forward_hooks and not m._global_forward_pre_hooks


def test_a_nan_made_and_masked_away_inside_a_step_starts_nothing():
    # gradviz's exact distances divide 0 / 0 on the diagonal in their backward and replace
    # the NaN at once: every gradient is finite, so there is nothing to report.
    x = torch.randn(8, 3, requires_grad=True)

    def step():
        loss = gradviz.pairwise_distances(x).square().mean()
        loss.backward()
        return loss

    assert traced(step) is None and torch.isfinite(x.grad).all()


def test_another_threads_operations_and_modules_are_not_traced():
    import threading

    def elsewhere():
        LogLoss()(torch.zeros(2))  # -Inf, in a thread the trace does not follow

    x = torch.ones(2)
    with trace_nonfinite() as t:
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
        y = MeanOfSelected()(x, torch.zeros(2))  # divide
    assert t.origin.source == line("divide") and t.origin.module == ""
    del y


def _causal_attention(x, mask):
    scores = x @ x.transpose(-1, -2) + mask
    return torch.softmax(scores, -1) @ x  # masked softmax


def test_an_inf_mask_made_before_the_trace_is_deliberate_not_an_input_origin():
    # A causal mask of -Inf built once, outside the traced step: no row is all masked, so
    # nothing started; where a row is all masked, the softmax that made NaN of it did.
    torch.manual_seed(0)
    x = torch.randn(2, 4, 3, requires_grad=True)
    causal = torch.full((4, 4), -math.inf).triu(1)
    with trace_nonfinite() as t:
        out = _causal_attention(x, causal)
        out.sum().backward()
    assert t.origin is None
    blocked = causal.clone()
    blocked[2] = -math.inf
    origin = traced(lambda: _causal_attention(x, blocked))
    assert (origin.phase, origin.op) == ("forward", "aten._softmax.default")
    assert origin.source == line("masked softmax") and origin.cause_code == "fully_masked"


# ---- causes only as far as the values go --------------------------------------------------------
def test_acos_at_exactly_one_is_a_domain_edge_in_the_backward_not_an_overflow():
    u = torch.tensor([[1.0, 0.0], [0.6, 0.8]], requires_grad=True)
    ref = torch.tensor([[1.0, 0.0], [1.0, 0.0]])

    def step():
        angle = torch.acos((u * ref).sum(-1))  # angle
        angle.sum().backward()

    origin = traced(step)
    assert (origin.phase, origin.node) == ("backward", "AcosBackward0")
    assert origin.source == line("angle")
    assert origin.cause_code == "domain_edge" and origin.saved == (1.0,)
    assert "acos at 1" in origin.cause and "overflow" not in origin.cause.split("(")[0]
    assert torch.isinf(u.grad[0, 0]) and torch.isfinite(u.grad[1]).all()


def test_rsqrt_of_a_zero_variance_is_a_domain_edge():
    x = torch.ones(2, 4)

    def step():
        var = x.var(-1, keepdim=True, unbiased=False)
        return (x - x.mean(-1, keepdim=True)) * torch.rsqrt(var)  # rsqrt

    origin = traced(step)
    assert (origin.op, origin.source) == ("aten.rsqrt.default", line("rsqrt"))
    assert origin.cause_code == "domain_edge" and origin.spread_code == "zero_times_inf"


def test_an_overflow_to_minus_inf_is_told_as_minus_inf():
    origin = traced(lambda: torch.full((3,), -3e38) * 10)
    assert origin.cause_code == "float_overflow" and "-Inf" in origin.cause
    assert "+Inf" not in origin.cause


def test_nan_made_from_minus_inf_inputs_is_not_said_to_come_from_finite_ones():
    # log(0) = -Inf reaches a matrix product: its NaN came from -Inf, and which of Inf - Inf
    # or 0 x Inf made it inside the product is not known from the values kept.
    torch.manual_seed(0)
    w = torch.randn(4, 2)
    h = torch.randn(3, 4)
    origin = traced(lambda: torch.log(h - h) @ w)
    assert origin.cause_code == "log_of_zero" and origin.spread_code == "inf_in_product"
    assert "received -Inf" in origin.cause and "finite inputs" not in origin.cause
    assert "not known" in origin.cause


def test_a_softmax_over_a_row_holding_plus_inf_is_not_called_masked():
    q = torch.full((2, 3), 1e20)
    origin = traced(lambda: torch.softmax(q @ q.T, -1))  # overflowing scores
    assert (origin.op, origin.cause_code) == ("aten.mm.default", "float_overflow")
    assert origin.spread_code == "softmax_of_inf" and "masked" not in origin.cause


def test_an_operation_whose_inf_the_values_do_not_explain_says_not_known_and_why():
    origin = traced(lambda: torch.special.erfinv(torch.tensor([0.5, 1.0])))
    assert origin.op == "aten.erfinv.default" and origin.cause_code == "unknown"
    assert origin.cause.startswith("Not known why") and "overflow" in origin.cause


def test_a_loss_divided_by_an_integer_count_of_zero_is_a_division_by_zero():
    pred, labelled = torch.randn(4, 1), torch.zeros(4, 1, dtype=torch.bool)

    def step():
        return ((pred * labelled) ** 2).sum() / labelled.sum()  # count

    origin = traced(step)
    assert (origin.op, origin.source) == ("aten.div.Tensor", line("count"))
    assert origin.cause_code == "division_by_zero" and origin.inputs == ((0.0,), (0.0,))


def test_a_checkpoint_holding_nan_is_an_input_named_by_the_parameter_it_is_loaded_into(tmp_path):
    # The NaN comes from the file; a freed tensor's storage address, reused by the loaded
    # one, must not tie it to a value made earlier in the trace.
    with trace_nonfinite() as t:
        damaged = nn.Linear(2, 2)
        with torch.no_grad():
            damaged.weight[0, 0] = math.nan
        torch.save(damaged.state_dict(), tmp_path / "ckpt.pt")
        del damaged
        model = nn.Sequential(nn.Linear(2, 2))
        model[0].load_state_dict(torch.load(tmp_path / "ckpt.pt", weights_only=True))  # load
        out = model(torch.ones(1, 2))
    origin = t.origin
    assert (origin.phase, origin.op, origin.source) == ("input", "aten.copy_.default", line("load"))
    assert origin.tensor == "0.weight" and out.isnan().any()


def test_checkpoints_kept_from_step_to_step_replay_the_step_that_overflowed():
    # The copies a clean step's checkpoint takes are buffers the next step's refills: the
    # step that overflows (the fourth) must be replayed from its own values, and leave a
    # plain run's.
    plain_model, plain_opt, plain_step = _overflowing_adam(warm=1)
    model, opt, step = _overflowing_adam(warm=1)
    with trace_nonfinite() as t:
        for _ in range(3):
            step()
    for _ in range(3):
        plain_step()
    assert (t.origin.phase, t.origin.op) == ("optimizer", "aten.addcdiv_.default")
    assert not torch.isfinite(model.weight).all()
    for a, b in zip(_values(plain_model, plain_opt), _values(model, opt), strict=True):
        assert torch.equal(a, b)
