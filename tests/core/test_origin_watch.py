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
    assert origin["phase"] == "forward" and origin["module"] == "0.1" and origin["op"] is None
    assert "0.1" in origin["cause"] and origin["step"] == 3


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


def test_a_clean_run_leaves_no_hooks_and_no_origin(tmp_path):
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    assert _train(model, tmp_path / "run", [torch.randn(3, 2)] * 3) is None
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


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
