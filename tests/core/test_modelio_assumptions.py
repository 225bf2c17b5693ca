"""Weights without their activations are run only with the activation the user names, and
every assumption gradviz makes is printed with the result and listed in --json, in the words
``gradviz inspect`` uses: a Jacobian is correct or refused, never silently wrong."""

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from gradviz.cli import main
from gradviz.core.modelio import inspect_model
from gradviz.core.nets.networks import NetworkSpec, save_network

ACTIVATION_MODULES = {"relu": torch.nn.ReLU, "gelu": torch.nn.GELU, "tanh": torch.nn.Tanh}


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def live_jacobian(model, x):
    """(B, m, n) float64 reference, autograd on the live module one sample at a time
    (compared with --out's float32 at rtol 1e-6)."""
    rows = [torch.autograd.functional.jacobian(lambda v: model(v[None])[0], s) for s in x]
    return torch.stack(rows).numpy()


def cli_jacobian(capsys, tmp_path, path, x, *extra):
    """J by `gradviz jacobian --model path` in float64, its stdout lines (the words, printed
    without --json) and its JSON (with --json, stdout holds the document alone)."""
    inputs, out = tmp_path / "x.npy", tmp_path / "j.npy"
    np.save(inputs, x.numpy())
    argv = ("jacobian", "--model", path, "--inputs", f"file:{inputs}", "--out", out,
            "--dtype", "float64", *extra)  # fmt: skip
    code, stdout, err = run(capsys, *argv)
    assert code == 0, err
    lines = stdout.strip().splitlines()
    code, stdout, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return np.load(out), lines, json.loads(stdout)


def refused(capsys, *argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "", (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def sequential(activation, seed=0):
    torch.manual_seed(seed)
    act = ACTIVATION_MODULES[activation]
    return torch.nn.Sequential(
        torch.nn.Linear(3, 8), act(), torch.nn.Linear(8, 8), act(), torch.nn.Linear(8, 2)
    ).double()


def x_batch(n=3, batch=4):
    return torch.randn(batch, n, dtype=torch.float64, generator=torch.Generator().manual_seed(5))


def save_weights(net, path):
    if path.suffix == ".safetensors":
        save_file(net.state_dict(), str(path))
    else:
        torch.save(net.state_dict(), path)
    return path


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_weights_without_activations_are_refused_then_exact_with_activation(
    capsys, tmp_path, activation, suffix
):
    net = sequential(activation)
    path = save_weights(net, tmp_path / f"weights{suffix}")
    message = refused(capsys, "jacobian", "--model", path, "--batch", "2")
    assert "--activation" in message and "between its Linear layers" in message

    x = x_batch()
    jac, lines, summary = cli_jacobian(capsys, tmp_path, path, x, "--activation", activation)
    # Between the Linear layers, not after the last, as nn.Sequential applies it.
    np.testing.assert_allclose(jac, live_jacobian(net, x), rtol=1e-6, atol=1e-7)
    expected = list(inspect_model(path, activation=activation).assumptions)
    assert summary["assumptions"] == expected
    assert any(f"{activation!r}" in sentence for sentence in expected)
    for sentence in expected:
        assert f"assumed: {sentence}" in lines


def test_gradviz_model_file_runs_without_activation_and_assumes_nothing(capsys, tmp_path):
    spec = NetworkSpec.parse("3-6-2:tanh")
    module = spec.build(seed=1, dtype=torch.float64)
    path = tmp_path / "net.safetensors"
    save_network(path, spec, module)
    x = x_batch()
    jac, lines, summary = cli_jacobian(capsys, tmp_path, path, x)
    np.testing.assert_allclose(jac, live_jacobian(module, x), rtol=1e-6, atol=1e-7)
    assert summary["assumptions"] == [] and not any(line.startswith("assumed:") for line in lines)


class SharedActivation(torch.nn.Module):
    """One GELU module applied after every hidden layer: the file keeps it once, last."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 8)
        self.fc2 = torch.nn.Linear(8, 8)
        self.out = torch.nn.Linear(8, 2)
        self.act = torch.nn.GELU()

    def forward(self, x):
        return self.out(self.act(self.fc2(self.act(self.fc1(x)))))


class Residual(torch.nn.Module):
    """h + tanh(block(h)): a skip connection the file does not record."""

    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(3, 5)
        self.block = torch.nn.Linear(5, 5)
        self.out = torch.nn.Linear(5, 2)

    def forward(self, x):
        h = torch.tanh(self.inp(x))
        return self.out(h + torch.tanh(self.block(h)))


def test_shared_activation_module_is_honoured_with_activation_or_refused(capsys, tmp_path):
    torch.manual_seed(0)
    net = SharedActivation().double().eval()
    path = tmp_path / "shared.pt"
    torch.save(net, path)
    message = refused(capsys, "jacobian", "--model", path, "--batch", "2", "--assume-sequential")
    assert "--activation" in message

    x = x_batch()
    jac, lines, summary = cli_jacobian(
        capsys, tmp_path, path, x, "--assume-sequential", "--activation", "gelu"
    )
    np.testing.assert_allclose(jac, live_jacobian(net, x), rtol=1e-6, atol=1e-7)
    said = " ".join(summary["assumptions"])
    assert "'act (GELU)'" in said or "act (GELU)" in said
    assert "set aside" in said and "'gelu'" in said


def test_assume_sequential_on_a_residual_block_says_the_skip_is_dropped(capsys, tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "residual.pt"
    torch.save(Residual().double().eval(), path)
    _, lines, summary = cli_jacobian(
        capsys, tmp_path, path, x_batch(), "--assume-sequential", "--activation", "tanh"
    )
    skip = [s for s in summary["assumptions"] if "skip connection" in s]
    assert len(skip) == 1 and "'block'" in skip[0] and "dropped" in skip[0]
    assert f"assumed: {skip[0]}" in lines
