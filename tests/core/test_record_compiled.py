"""gradviz.watch on a torch.compile'd module: the same statistics as the uncompiled model."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import gradviz
from gradviz.core.record.reader import Reader


def _train(model, path, steps: int = 4, nan_at: int = 2, **watch) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    with gradviz.watch(model, path, every=1, **watch) as rec:
        for step in range(steps):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            if step == nan_at:
                loss = loss * float("nan")
            loss.backward()
            rec.log(loss=loss)
            opt.step()


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def test_a_compiled_module_records_what_the_uncompiled_one_does(tmp_path):
    # aot_eager: the backward graph AOTAutograd builds, as inductor's, without generating
    # C++ (which takes about a minute here); parameters and their .grad are the same tensors.
    _train(torch.compile(_net(), backend="aot_eager"), tmp_path / "compiled")
    _train(_net(), tmp_path / "eager", origin=False)
    compiled, eager = Reader(tmp_path / "compiled"), Reader(tmp_path / "eager")
    # Named as the model is, without torch.compile's "_orig_mod." prefix.
    assert (
        compiled.rank(0).tensors
        == eager.rank(0).tensors
        == ["0.weight", "0.bias", "2.weight", "2.bias"]
    )
    # No module-level origin: its forward hooks would be traced into the compiled graph.
    assert compiled.first_nonfinite() == eager.first_nonfinite()
    assert "origin" not in compiled.first_nonfinite()
    assert compiled.first_nonfinite()["step"] == 2
    for name in eager.rank(0).tensors:
        a, b = compiled.rank(0).tensor(name), eager.rank(0).tensor(name)
        np.testing.assert_allclose(a.grad_norm, b.grad_norm, rtol=1e-5)
        np.testing.assert_array_equal(a.counts, b.counts)
