"""A corpus of small training scripts, each with a known first non-finite value: its phase,
module, operation, source line, cause and step, as the full tracer (``gradviz diagnose``)
must name it and as ``watch(origin=True)`` must name it (the module-level origin: the
same module, or the step replayed under the tracer).

Each case is a training loop ``train(path)`` that watches its model into ``path`` and logs
every step, the way a user's script does; the line that makes the value ends in a comment
``# <case name>`` (``line_of``). ``composed(...)`` builds further cases of the same kinds
from parts (the fault, where it sits in the module tree, the step, the loop's order) for
the property over generated cases.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

import gradviz

HERE = os.path.abspath(__file__)


@dataclass(frozen=True)
class Known:
    """Where a case's first non-finite value started, as one path must name it.

    ``phases``: the phase (or phases, where the path may rightly see either: the module
    boundaries see a forward's Inf that a ``where`` hid only as its backward's NaN);
    ``op``/``marker``/``causes``: the operation, the marked line and the cause codes a
    right answer may give (None: the path does not give it); ``tensor``: a parameter's
    name, for an input or optimizer origin.
    """

    phases: tuple[str, ...]
    module: str
    step: int
    op: str | None = None
    marker: str | None = None
    causes: tuple[str, ...] = ()
    tensor: str | None = None
    spread: str | None = None


@dataclass(frozen=True)
class Case:
    name: str
    train: Callable[[str], None]
    traced: Known
    watched: Known
    tags: tuple[str, ...] = field(default=())


def line_of(marker: str) -> int:
    """The line of this file that ends in ``# <marker>``."""
    with open(HERE, encoding="utf-8") as f:
        for number, text in enumerate(f, start=1):
            if text.rstrip().endswith(f"# {marker}"):
                return number
    raise KeyError(marker)


def fit(model, batches, loss_of, path, *, opt=None, log_first=True, autocast=None) -> None:
    """Train ``model`` on ``batches`` (each a tuple of the model's arguments and a target),
    watched into ``path``, logging every step (before the optimizer's step, or after it)."""
    opt = opt or torch.optim.SGD(model.parameters(), lr=1e-3)
    with gradviz.watch(model, path, every=1) as rec:
        for *args, target in batches:
            opt.zero_grad()
            with torch.autocast("cpu", dtype=autocast or torch.float32, enabled=bool(autocast)):
                out = model(*args)
            loss = loss_of(out, target)
            loss.backward()
            if log_first:
                rec.log(loss=loss)
            opt.step()  # the optimizer's step
            if not log_first:
                rec.log(loss=loss)


# ---- 1. a log of 0 in a hand-written binary cross-entropy -------------------------------------
def bce_log_zero(path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    batches = []
    for step in range(4):
        x = torch.randn(16, 4)
        y = (x[:, 0] > 0).float()
        if step == 2:
            x = x * 1e4  # a batch that was not scaled: the sigmoid saturates to exactly 0 or 1
        batches.append((x, y))

    def loss_of(logits, y):
        p = torch.sigmoid(logits).squeeze(1)
        return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()  # bce_log_zero

    fit(model, batches, loss_of, path)


# ---- 2. sqrt of a zero distance, in the backward of a parameter-free module -------------------
class PairDistance(nn.Module):
    def forward(self, a, b):
        return torch.sqrt(((a - b) ** 2).sum(-1))  # siamese_sqrt


class Siamese(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.dist = PairDistance()

    def forward(self, x1, x2):
        return self.dist(self.enc(x1), self.enc(x2))


def siamese_sqrt(path):
    torch.manual_seed(0)
    batches = []
    for step in range(4):
        x1, x2 = torch.randn(8, 4), torch.randn(8, 4)
        if step == 2:
            x2[3] = x1[3]  # a pair of the same item: distance exactly 0
        batches.append((x1, x2, torch.ones(8)))
    fit(Siamese(), batches, lambda d, t: (d - t).square().mean(), path)


# ---- 3. a hand-written LayerNorm over a row of zero spread (a padding row) ----------------------
class ScratchLayerNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.gain, self.bias = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))

    def forward(self, x):
        mu, sigma = x.mean(-1, keepdim=True), x.std(-1, keepdim=True)
        return self.gain * (x - mu) / sigma + self.bias  # layernorm_zero_std


def layernorm_zero_std(path):
    torch.manual_seed(0)
    model = nn.Sequential(ScratchLayerNorm(6), nn.Linear(6, 1))
    batches = [(torch.randn(8, 6), torch.randn(8, 1)) for _ in range(4)]
    batches[1][0][5] = 0.0  # a padding row: every feature 0, spread 0
    fit(model, batches, F.mse_loss, path)


# ---- 4. exp overflow in a hand-written softmax -------------------------------------------------
class NaiveSoftmax(nn.Module):
    def forward(self, z):
        e = torch.exp(z)  # naive_softmax_exp
        return e / e.sum(-1, keepdim=True)


def naive_softmax_exp(path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3), NaiveSoftmax())
    batches = [(torch.randn(16, 4), torch.randint(0, 3, (16,))) for _ in range(4)]
    batches[2] = (batches[2][0] * 1000, batches[2][1])  # logits far past 88: exp overflows

    def loss_of(p, y):
        return F.nll_loss(torch.log(p + 1e-9), y)

    fit(model, batches, loss_of, path)


# ---- 5. a fully masked attention row ----------------------------------------------------------
class TinyAttention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv, self.out, self.d = nn.Linear(d, 3 * d), nn.Linear(d, d), d

    def forward(self, x, pad):
        q, k, v = self.qkv(x).chunk(3, -1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d)
        scores = scores.masked_fill(pad[:, None, :], float("-inf"))
        attn = torch.softmax(scores, -1)  # masked_attention_row
        return self.out(attn @ v)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn, self.head = TinyAttention(8), nn.Linear(8, 1)

    def forward(self, x, pad):
        return self.head(self.attn(x, pad)).squeeze(-1).mean(-1)


def masked_attention_row(path):
    torch.manual_seed(0)
    batches = []
    for step in range(3):
        pad = torch.zeros(4, 5, dtype=torch.bool)
        pad[:, 4] = True
        if step == 1:
            pad[2] = True  # an empty sequence: every position is padding
        batches.append((torch.randn(4, 5, 8), pad, torch.randn(4)))
    fit(Tagger(), batches, F.mse_loss, path)


# ---- 6. acos at exactly 1 (an angle between identical unit vectors) ---------------------------
class Angle(nn.Module):
    def forward(self, a, b):
        cosine = (F.normalize(a, dim=-1) * F.normalize(b, dim=-1)).sum(-1)
        return torch.acos(cosine)  # acos_at_one


class AngularEmbedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.angle = nn.Embedding(4, 4), Angle()
        with torch.no_grad():
            self.emb.weight.copy_(torch.eye(4))  # one-hot rows: a row with itself has cosine 1

    def forward(self, i, j):
        return self.angle(self.emb(i), self.emb(j))


def acos_at_one(path):
    i, j = torch.tensor([0, 1, 2]), torch.tensor([1, 1, 3])  # the pair (1, 1) at step 0
    fit(AngularEmbedding(), [(i, j, torch.ones(3))], F.mse_loss, path)


# ---- 7. the where trap: 1 / d where d = 0, hidden by where, then 0 x Inf in the backward -------
class Distances(nn.Module):
    def __init__(self, k, d):
        super().__init__()
        self.centres = nn.Parameter(torch.randn(k, d))

    def forward(self, x):
        return ((x[:, None] - self.centres[None]) ** 2).sum(-1)


class InverseDistanceWeights(nn.Module):
    def forward(self, d):
        w = torch.where(d > 0, 1 / d, torch.zeros_like(d))  # where_trap
        return w / (w.sum(-1, keepdim=True) + 1e-6)


def where_trap(path):
    torch.manual_seed(0)
    model = nn.Sequential(Distances(3, 2), InverseDistanceWeights(), nn.Linear(3, 1))
    batches = [(torch.randn(6, 2), torch.randn(6, 1)) for _ in range(3)]
    with torch.no_grad():
        batches[0][0][4] = model[0].centres[1]  # a point on a centre: distance 0
    fit(model, batches, F.mse_loss, path)


# ---- 8. a loss divided by a count of 0 (a batch with no labelled entries) ---------------------
def zero_count_division(path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    batches = []
    for step in range(4):
        labelled = torch.rand(10, 1) > 0.3
        if step == 3:
            labelled[:] = False  # no labelled entry in this batch
        batches.append((torch.randn(10, 3), (torch.randn(10, 1), labelled)))

    def loss_of(pred, target):
        y, labelled = target
        err = (pred - y) ** 2 * labelled
        return err.sum() / labelled.sum()  # zero_count_division

    fit(model, batches, loss_of, path)


# ---- 9. a NaN in the batch ---------------------------------------------------------------------
def nan_in_batch(path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
    batches = [(torch.randn(8, 5), torch.randn(8, 1)) for _ in range(4)]
    batches[2][0][6, 3] = float("nan")  # a missing value read as NaN
    fit(model, batches, F.mse_loss, path)


# ---- 10. a learning rate that overflows the weights in the optimizer's step --------------------
def lr_overflow(path, log_first=True):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 1, bias=False), nn.Linear(1, 1, bias=False))
    # Adam with beta1 = 0 moves each first-layer weight by lr a step: its fourth step
    # (step 3) passes float32's largest value while every forward before stays finite.
    groups = [{"params": model[0].parameters(), "lr": 1e38}, {"params": model[1].parameters()}]
    opt = torch.optim.Adam(groups, lr=1e-3, betas=(0.0, 0.999))
    batches = [(torch.full((2, 3), 1e-3), None) for _ in range(6)]
    fit(model, batches, lambda out, _: out.mean(), path, opt=opt, log_first=log_first)


# ---- 11. float16 CPU autocast overflow in a layer ----------------------------------------------
def fp16_autocast_overflow(path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 1))
    batches = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(4)]
    batches[2] = (torch.full((4, 8), 3000.0), batches[2][1])  # raw units: 8 x 3000 x |w| > 65504
    with torch.no_grad():
        model[0].weight.abs_().add_(3.0)
    fit(model, batches, lambda o, y: F.mse_loss(o.float(), y), path, autocast=torch.float16)


# ---- 12. bfloat16 CPU autocast overflow -------------------------------------------------------
def bf16_autocast_overflow(path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 1))
    batches = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(4)]
    batches[1] = (torch.full((4, 8), 1e38), batches[1][1])  # finite, but 8 of them summed
    with torch.no_grad():
        model[0].weight.abs_().add_(1.0)
    fit(model, batches, lambda o, y: F.mse_loss(o.float(), y), path, autocast=torch.bfloat16)


# ---- 13. a custom autograd.Function whose backward divides by 0 --------------------------------
class ClampedLog(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp_min(1e-12).log()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / x  # the clamp forgotten: 1 / 0 where x was clamped


class LogCounts(nn.Module):
    """log(scale x) of count features (0 where an item was never seen)."""

    def __init__(self, d):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(d))

    def forward(self, counts):
        return ClampedLog.apply(self.scale * counts)  # custom_function


def custom_function(path):
    torch.manual_seed(0)
    model = nn.Sequential(LogCounts(5), nn.Linear(5, 1))
    batches = [(torch.randint(1, 9, (8, 5)).float(), torch.randn(8, 1)) for _ in range(3)]
    batches[1][0][3, 2] = 0.0  # an item never seen
    fit(model, batches, F.mse_loss, path)


# ---- 14. an activation that overflows (a hand-written softplus) -------------------------------
class Softplus(nn.Module):
    def forward(self, x):
        return torch.log(1 + torch.exp(x))  # activation_overflow


def activation_overflow(path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), Softplus(), nn.Linear(8, 1))
    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
    batches[2] = (batches[2][0] * 500, batches[2][1])
    fit(model, batches, F.mse_loss, path)


# ---- 15. NaN made in a parent's own code, between its children ---------------------------------
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        with torch.no_grad():
            self.a.weight.abs_()
            self.a.bias.zero_()

    def forward(self, x):
        h = torch.relu(self.a(x))
        h = h / h.sum(-1, keepdim=True)  # parent_code
        return self.b(h)


def parent_code(path, log_first=True):
    torch.manual_seed(0)
    model = nn.Sequential(Block(), nn.Linear(4, 1))
    batches = [(torch.rand(6, 4), torch.randn(6, 1)) for _ in range(4)]
    batches[2][0][1] = -1.0  # every unit of a dead: 0 / 0 in the block's own code
    fit(model, batches, F.mse_loss, path, log_first=log_first)


# ---- 16. a parameter loaded as NaN (a damaged checkpoint) --------------------------------------
def damaged_checkpoint(folder: str) -> str:
    """A checkpoint of the model below whose ``2.weight`` holds a NaN (written to disk, as a
    run that went bad leaves one)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    with torch.no_grad():
        model[2].weight[0, 1] = float("nan")
    file = os.path.join(folder, "checkpoint.pt")
    torch.save(model.state_dict(), file)
    return file


def nan_parameter(path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    saved = torch.load(damaged_checkpoint(os.path.dirname(path)), weights_only=True)
    model.load_state_dict(saved)  # nan_parameter
    fit(model, [(torch.randn(5, 3), torch.randn(5, 1))] * 2, F.mse_loss, path)


# ---- 17. a distance as a power of 0.5, at 0 -----------------------------------------------------
class PowDistance(nn.Module):
    def forward(self, a, b):
        return ((a - b) ** 2).sum(-1) ** 0.5  # pow_half_distance


class Matcher(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj, self.dist = nn.Linear(3, 3), PowDistance()

    def forward(self, x, y):
        return self.dist(self.proj(x), self.proj(y))


def pow_half_distance(path):
    torch.manual_seed(0)
    batches = [(torch.randn(5, 3), torch.randn(5, 3), torch.ones(5)) for _ in range(4)]
    batches[1][1][2] = batches[1][0][2]
    fit(Matcher(), batches, F.mse_loss, path)


# ---- 18. attention scores that overflow to +Inf, then a softmax of +Inf ------------------------
class RawAttention(nn.Module):
    def forward(self, x):
        scores = x @ x.transpose(-1, -2)  # scores_overflow
        return torch.softmax(scores, -1) @ x


def scores_overflow(path):
    torch.manual_seed(0)
    model = nn.Sequential(RawAttention(), nn.Linear(4, 1))
    batches = [(torch.rand(2, 3, 4), torch.randn(2, 3, 1)) for _ in range(4)]
    batches[2] = (batches[2][0] * 1e20, batches[2][1])  # features of 1e20: products of 1e40
    fit(model, batches, F.mse_loss, path)


# ---- 19. NaN made in the model's own code between its submodules -------------------------------
class Normalised(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        self.head = nn.Linear(4, 1)
        with torch.no_grad():
            self.enc[0].weight.abs_()
            self.enc[0].bias.zero_()

    def forward(self, x):
        h = self.enc(x)
        h = h / h.norm(dim=-1, keepdim=True)  # root_code
        return self.head(h)


def root_code(path):
    torch.manual_seed(0)
    batches = [(torch.rand(6, 3), torch.randn(6, 1)) for _ in range(3)]
    batches[1][0][4] = -1.0  # every unit dead: 0 / 0
    fit(Normalised(), batches, F.mse_loss, path)


# ---- 20. log(0) in a submodule's forward, whose NaN first shows in the backward ----------------
class GaussianHead(nn.Module):
    """Predicts a mean and the log of the features' spread (0 for a constant row)."""

    def __init__(self, d):
        super().__init__()
        self.mu = nn.Linear(d, 1)

    def forward(self, x):
        spread = (x - x.mean(-1, keepdim=True)).square().mean(-1, keepdim=True)
        return self.mu(x), torch.log(spread)  # log_in_submodule


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(4, 4), GaussianHead(4)

    def forward(self, x):
        return self.head(self.body(x))


def log_in_submodule(path):
    torch.manual_seed(0)
    model = Regressor()
    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
    with torch.no_grad():
        model.body.weight[:, 1:] = 0.0  # the body reads feature 0 only, scaled per unit
        model.body.weight[:, 0] = 1.0  # ... by 1: every unit equal, the spread exactly 0
        model.body.bias.zero_()

    def loss_of(out, y):
        mu, log_spread = out
        return (mu - y).square().mean() + 1e-3 * log_spread.mean()  # reduced to one -Inf

    fit(model, batches, loss_of, path)


# ---- 21. a "safe" log whose log(0) a where hides in the forward, not in the backward ----------
class SafeLog(nn.Module):
    """log p, with log 0 taken as 0 by a where (its backward still divides by p)."""

    def forward(self, p):
        return torch.where(p > 0, torch.log(p), torch.zeros_like(p))  # safe_log


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.logits, self.log = nn.Linear(4, 3), SafeLog()

    def forward(self, x):
        return self.log(torch.softmax(self.logits(x), -1))


def safe_log(path):
    torch.manual_seed(0)
    batches = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(3)]
    batches[1][0][2] = torch.tensor([1e4, -1e4, 0.0, 0.0])  # a certain choice: a p of exactly 0
    fit(Policy(), batches, F.nll_loss, path)


def _k(phase, module, step, op=None, marker=None, causes=(), **kw):
    phases = phase if isinstance(phase, tuple) else (phase,)
    return Known(phases, module, step, op, marker, tuple(causes), **kw)


DIV, LOG = "aten.div.Tensor", "aten.log.default"
CASES = {
    c.name: c
    for c in [
        Case(
            "bce_log_zero",
            bce_log_zero,
            _k("forward", "", 2, LOG, "bce_log_zero", ["log_of_zero"]),
            _k("forward", "", 2),
        ),
        Case(
            "siamese_sqrt",
            siamese_sqrt,
            _k("backward", "dist", 2, DIV, "siamese_sqrt", ["sqrt_at_zero"]),
            _k("backward", "dist", 2, DIV, "siamese_sqrt"),
        ),
        Case(
            "layernorm_zero_std",
            layernorm_zero_std,
            _k("forward", "0", 1, DIV, "layernorm_zero_std", ["division_by_zero"]),
            _k("forward", "0", 1, DIV, "layernorm_zero_std"),
        ),
        Case(
            "naive_softmax_exp",
            naive_softmax_exp,
            _k("forward", "3", 2, "aten.exp.default", "naive_softmax_exp", ["exp_overflow"]),
            _k("forward", "3", 2, "aten.exp.default", "naive_softmax_exp"),
        ),
        Case(
            "masked_attention_row",
            masked_attention_row,
            _k(
                "forward",
                "attn",
                1,
                "aten._softmax.default",
                "masked_attention_row",
                ["fully_masked"],
            ),
            _k("forward", "attn", 1, "aten._softmax.default", "masked_attention_row"),
        ),
        Case(
            "acos_at_one",
            acos_at_one,
            _k("backward", "angle", 0, "aten.rsqrt.default", "acos_at_one", ["domain_edge"]),
            _k("backward", "angle", 0, "aten.rsqrt.default", "acos_at_one"),
        ),
        Case(
            "where_trap",
            where_trap,
            _k(
                "forward",
                "1",
                0,
                "aten.reciprocal.default",
                "where_trap",
                ["division_by_zero"],
                spread="zero_times_inf",
            ),
            # The module boundaries see only the NaN the trap's backward made.
            _k(("forward", "backward"), "1", 0),
        ),
        Case(
            "zero_count_division",
            zero_count_division,
            _k("forward", "", 3, DIV, "zero_count_division", ["division_by_zero"]),
            _k("forward", "", 3),
        ),
        Case(
            "nan_in_batch",
            nan_in_batch,
            _k("input", "0", 2, "aten.addmm.default", None, ["nonfinite_input"], tensor=""),
            _k("input", "", 2),
        ),
        Case(
            "lr_overflow",
            lr_overflow,
            _k(
                "optimizer",
                "",
                3,
                "aten.addcdiv_.default",
                "the optimizer's step",
                ["optimizer_overflow"],
                tensor="0.weight",
            ),
            _k("optimizer", "", 3, tensor="0.weight"),
            tags=("optimizer",),
        ),
        Case(
            "fp16_autocast_overflow",
            fp16_autocast_overflow,
            _k("forward", "0", 2, "aten.addmm.default", None, ["low_precision_overflow"]),
            _k("forward", "0", 2, "aten.addmm.default"),
        ),
        Case(
            "bf16_autocast_overflow",
            bf16_autocast_overflow,
            _k("forward", "0", 1, "aten.addmm.default", None, ["low_precision_overflow"]),
            _k("forward", "0", 1, "aten.addmm.default"),
        ),
        Case(
            "custom_function",
            custom_function,
            _k("backward", "0", 1, DIV, "custom_function", ["custom_backward"]),
            _k("backward", "0", 1, DIV, "custom_function"),
        ),
        Case(
            "activation_overflow",
            activation_overflow,
            _k("forward", "1", 2, "aten.exp.default", "activation_overflow", ["exp_overflow"]),
            _k("forward", "1", 2, "aten.exp.default", "activation_overflow"),
        ),
        Case(
            "parent_code",
            parent_code,
            _k("forward", "0", 2, DIV, "parent_code", ["division_by_zero"]),
            _k("forward", "0", 2, DIV, "parent_code"),
        ),
        Case(
            "nan_parameter",
            nan_parameter,
            _k(
                "input",
                "",
                0,
                "aten.copy_.default",
                "nan_parameter",
                ["nonfinite_input"],
                tensor="2.weight",
            ),
            _k("input", "2", 0, tensor="2.weight"),
        ),
        Case(
            "pow_half_distance",
            pow_half_distance,
            _k("backward", "dist", 1, None, "pow_half_distance", ["sqrt_at_zero"]),
            _k("backward", "dist", 1, None, "pow_half_distance"),
        ),
        Case(
            "scores_overflow",
            scores_overflow,
            _k(
                "forward",
                "0",
                2,
                "aten.bmm.default",
                "scores_overflow",
                ["float_overflow"],
                spread="softmax_of_inf",
            ),
            _k("forward", "0", 2, "aten.bmm.default", "scores_overflow"),
        ),
        Case(
            "log_in_submodule",
            log_in_submodule,
            _k("forward", "head", 0, LOG, "log_in_submodule", ["log_of_zero"]),
            _k("forward", "head", 0, LOG, "log_in_submodule"),
        ),
        Case(
            "safe_log",
            safe_log,
            _k("forward", "log", 1, LOG, "safe_log", ["log_of_zero"], spread="log_of_zero"),
            # The module boundaries see only the NaN its backward made.
            _k(("forward", "backward"), "log", 1, LOG, "safe_log"),
        ),
        Case(
            "root_code",
            root_code,
            _k("forward", "", 1, DIV, "root_code", ["division_by_zero"]),
            _k("forward", "", 1, DIV, "root_code"),
        ),
    ]
}


# ---- cases composed from parts (for the property over generated cases) --------------------------
#: A fault: (phase, operation, cause codes) of the value it makes where it is switched on.
FAULTS = {
    "log_of_zero": ("forward", LOG, ("log_of_zero",)),
    "division_by_zero": ("forward", DIV, ("division_by_zero",)),
    "exp_overflow": ("forward", "aten.exp.default", ("exp_overflow",)),
    "sqrt_at_zero": ("backward", DIV, ("sqrt_at_zero",)),
}
#: Where a fault's code runs: in a leaf module of its own, in the own code of that leaf's
#: parent (between its children), or in the model's own code.
PLACES = ("leaf", "parent", "model")


def apply_fault(kind: str, h: torch.Tensor) -> torch.Tensor:
    """``h`` with the fault ``kind`` applied (same shape)."""
    if kind == "log_of_zero":
        return h + torch.log(h - h)  # composed log_of_zero
    if kind == "division_by_zero":
        return h / (h - h).sum(-1, keepdim=True)  # composed division_by_zero
    if kind == "exp_overflow":
        return torch.exp(h * 1e4 + 200)  # composed exp_overflow
    return h + torch.sqrt((h - h.detach()) ** 2)  # composed sqrt_at_zero


class Fault(nn.Module):
    """The fault where switched on (``on``), the identity before."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind, self.on = kind, False

    def forward(self, h):
        return apply_fault(self.kind, h) if self.on else h


class Parent(nn.Module):
    """a, then (in its own code) the fault where it sits here and is on, then b."""

    def __init__(self, kind: str, here: bool, leaf: bool):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.fault = Fault(kind) if leaf else None
        self.kind, self.here, self.on = kind, here, False

    def forward(self, x):
        h = torch.tanh(self.a(x))
        if self.fault is not None:
            h = self.fault(h)
        if self.here and self.on:
            h = apply_fault(self.kind, h)
        return self.b(h)


class Composed(nn.Module):
    """``depth`` containers around a Parent, then a head; the fault in its ``place``."""

    def __init__(self, kind: str, place: str, depth: int):
        super().__init__()
        inner = Parent(kind, here=place == "parent", leaf=place == "leaf")
        self._inner = [inner]  # (not a second name for it: a list is no submodule)
        body: nn.Module = inner
        for _ in range(depth):
            body = nn.Sequential(nn.Identity(), body)
        self.body, self.head = body, nn.Linear(4, 1)
        self.kind, self.here, self.on = kind, place == "model", False
        self._path = "body" + ".1" * depth

    def switch(self, on: bool) -> None:
        inner = self._inner[0]
        self.on = inner.on = on
        if inner.fault is not None:
            inner.fault.on = on

    def forward(self, x):
        h = self.body(x)
        if self.here and self.on:
            h = apply_fault(self.kind, h)
        return self.head(h)

    def module_of(self, place: str) -> str:
        """The dotted name of the module whose own code the fault runs in."""
        return {"leaf": f"{self._path}.fault", "parent": self._path, "model": ""}[place]


def composed(path: str, kind: str, place: str, depth: int, at: int, log_first: bool) -> None:
    """Train ``Composed`` for ``at + 2`` steps, the fault on at step ``at`` only."""
    torch.manual_seed(0)
    model = Composed(kind, place, depth)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with gradviz.watch(model, path, every=1) as rec:
        for step in range(at + 2):
            model.switch(step == at)
            opt.zero_grad()
            loss = model(torch.randn(6, 4)).square().mean()
            loss.backward()
            if log_first:
                rec.log(loss=loss)
            opt.step()
            if not log_first:
                rec.log(loss=loss)


def composed_known(kind: str, place: str, depth: int, at: int) -> Known:
    """Where ``composed``'s value starts, as the tracer names it."""
    phase, op, causes = FAULTS[kind]
    module = Composed(kind, place, depth).module_of(place)
    return Known((phase,), module, at, op, f"composed {kind}", causes)
