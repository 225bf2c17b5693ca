"""Whole pickled modules rebuilt from the classes the environment provides: torch.nn's at
once, another installed package's only with --trust, each made as unpickling makes it
(``cls.__new__`` plus the saved state, never ``__init__``), nothing from the file run.
Through ``gradviz inspect --json`` and ``gradviz jacobian --json``, against the live
module's Jacobian in float64."""

import io
import json
import os
import pickle
import sys
import textwrap

import numpy as np
import pytest
import torch
from hostile_files import torch_zip

from gradviz.cli import main
from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import inspect_model, load_model

RUNS_AS = "Rebuilt from torch.nn classes"


def tanh_mlp():
    return torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))


def batchnorm_dropout():
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 6), torch.nn.BatchNorm1d(6), torch.nn.Tanh(), torch.nn.Dropout(0.3),
        torch.nn.Linear(6, 2),
    )  # fmt: skip
    net.double().train()(torch.randn(32, 3, dtype=torch.float64) * 2 + 1)  # running stats
    return net  # saved in training mode: run in eval mode, saying so


def small_cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(2 * 4 * 4, 3),
    )  # fmt: skip


def nested():
    return torch.nn.Sequential(
        torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4)), torch.nn.GELU(),
        torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sequential(torch.nn.Softplus(2.0))),
        torch.nn.Linear(4, 2),
    )  # fmt: skip


MODELS = {
    "tanh_mlp": (tanh_mlp, (3,)),
    "batchnorm_dropout": (batchnorm_dropout, (3,)),
    "small_cnn": (small_cnn, (1, 4, 4)),
    "nested": (nested, (3,)),
}


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def live_jacobian(net, x):
    """(B, m, *in_shape) by torch.func on the live module, float64."""
    return torch.func.vmap(torch.func.jacrev(lambda v: net(v[None])[0]))(x).detach()


def saved(tmp_path, make, name="whole.pt"):
    torch.manual_seed(0)
    net = make().double()
    path = tmp_path / name
    torch.save(net, path)
    return path, net.eval()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_whole_torch_nn_module_runs_without_a_question_with_the_live_jacobian(
    capsys, tmp_path, name
):
    make, shape = MODELS[name]
    path, net = saved(tmp_path, make)
    code, out, err = run(capsys, "inspect", path, "--json")
    assert code == 0, err
    described = json.loads(out)
    assert described["runnable"] and not described["needs_trust"]
    assert (
        described["runs_as"].startswith(RUNS_AS) and "no code from the file" in described["runs_as"]
    )
    # The module tree with the classes torch.nn defines, as the live module has them.
    assert [(m["name"], m["class"]) for m in described["modules"]] == [
        (path_ or "(top)", f"{type(m).__module__}.{type(m).__qualname__}")
        for path_, m in net.named_modules()
    ]
    x = torch.randn(4, *shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    np.save(tmp_path / "x.npy", x.numpy())
    code, out, err = run(
        capsys, "jacobian", "--model", path, "--inputs", f"file:{tmp_path / 'x.npy'}",
        "--dtype", "float64", "--out", tmp_path / "j.npy", "--json",
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    np.testing.assert_allclose(np.load(tmp_path / "j.npy"), live_jacobian(net, x), atol=1e-6)
    # Where the file does not say the input's shape, the run adds where it took it from.
    shape_from_inputs = [f"The input shape {tuple(shape)} was taken from the inputs (--inputs)."]
    undeclared = described["in_dim"] is None and described["in_shape"] is None
    assert summary["assumptions"] == described["assumptions"] + (shape_from_inputs * undeclared)
    assert summary["runs_as"] == described["runs_as"]
    # Built in training mode, as modules are: run in eval mode, saying so.
    assert sum("saved in training mode" in s for s in summary["assumptions"]) == 1


def test_the_rebuild_never_calls_a_layers_init(tmp_path, monkeypatch):
    """Made with cls.__new__ and the saved state: __init__ (whose arguments the file does
    not hold) is never called with guessed ones."""
    path, net = saved(tmp_path, batchnorm_dropout)
    called = []
    for cls in (torch.nn.Sequential, torch.nn.Linear, torch.nn.BatchNorm1d, torch.nn.Dropout):
        monkeypatch.setattr(cls, "__init__", lambda self, *a, **k: called.append(a))
    loaded = load_model(path)
    assert called == []
    x = torch.randn(5, 3, dtype=torch.float64)
    torch.testing.assert_close(loaded.module(x), net(x), rtol=0, atol=0)
    assert type(loaded.module.inner[1]) is torch.nn.BatchNorm1d


class _CallsLinear:
    """A pickle that calls torch.nn.Linear(2, 3) through REDUCE instead of NEWOBJ."""

    def __reduce__(self):
        return (torch.nn.Linear, (2, 3))


def test_a_torch_nn_class_called_through_reduce_is_refused_and_never_called(tmp_path, monkeypatch):
    path = torch_zip(tmp_path / "reduce.pt", {"model": _CallsLinear()}, {})
    called = []
    monkeypatch.setattr(torch.nn.Linear, "__init__", lambda self, *a: called.append(a))
    with pytest.raises(
        GradvizError, match=r"names 'torch\.nn\.modules\.linear\.Linear', which is code"
    ):
        inspect_model(path)
    with pytest.raises(GradvizError, match="which is code the file would run"):
        load_model(path)
    assert called == []


def _hooked(kind):
    net = batchnorm_dropout()
    if kind == "forward hook":
        net[1].register_forward_hook(_doubled)
    elif kind == "forward pre-hook":
        net[1].register_forward_pre_hook(_shifted)
    else:
        net[1].register_full_backward_hook(_ignored)
    return net


def _doubled(module, inputs, output):
    return 2 * output


def _shifted(module, inputs):
    return (inputs[0] + 1,)


def _ignored(module, grad_in, grad_out):
    return None


@pytest.mark.parametrize("kind", ["forward hook", "forward pre-hook", "backward hook"])
def test_a_hook_on_a_torch_nn_layer_is_refused_naming_it(capsys, tmp_path, kind):
    path, _ = saved(tmp_path, lambda: _hooked(kind))
    info = inspect_model(path)
    assert not info.runnable
    assert f"layer 1 carries a {kind}" in info.not_runnable_reason
    code, out, err = run(capsys, "jacobian", "--model", path, "--batch", "2")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"carries a {kind}" in err


def test_a_function_in_the_state_is_refused_not_dropped(tmp_path):
    """TransformerEncoderLayer keeps its activation function as an attribute: the file holds
    it only by name, so the layer is refused, naming it."""
    layer = torch.nn.TransformerEncoderLayer(4, 2, 8, batch_first=True)
    path = tmp_path / "encoder.pt"
    torch.save(torch.nn.Sequential(layer), path)
    info = inspect_model(path)
    assert not info.runnable
    assert "'activation' holds 'torch.nn.functional.relu', which is not a plain value" in (
        info.not_runnable_reason
    )


def test_state_that_replaces_a_method_is_refused(tmp_path):
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    net[1].__dict__["forward"] = "identity"  # a plain value where torch's method is
    path = tmp_path / "forward.pt"
    torch.save(net, path)
    with pytest.raises(GradvizError, match="layer 1's state replaces its method 'forward'"):
        load_model(path)


def test_a_top_level_module_list_is_not_run(tmp_path):
    path = tmp_path / "list.pt"
    torch.save(torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2)]), path)
    info = inspect_model(path)
    assert not info.runnable and "ModuleList, which has no forward" in info.not_runnable_reason


def test_a_module_of_two_inputs_is_refused(tmp_path):
    path = tmp_path / "bilinear.pt"
    torch.save(torch.nn.Bilinear(2, 3, 4), path)
    assert not inspect_model(path).runnable
    with pytest.raises(GradvizError, match=r"forward takes 2 inputs \(input1, input2\)"):
        load_model(path)


def test_modules_shared_through_the_memo_are_checked_once_and_rebuilt_once(tmp_path):
    """A tree that uses one module twice at each of 40 levels has 2**40 paths: it is read
    and rebuilt in a moment (not run: its forward would make 2**40 calls), sharing the
    module as the saved one did."""
    inner = torch.nn.Sequential(torch.nn.Tanh())
    for _ in range(40):
        inner = torch.nn.Sequential(inner, inner)
    path = tmp_path / "shared.pt"
    torch.save(torch.nn.Sequential(inner, torch.nn.Linear(2, 2)), path)
    info = inspect_model(path)
    assert info.runnable and info.in_dim is None
    rebuilt = load_model(path).module.inner
    assert rebuilt[0][0] is rebuilt[0][1] and rebuilt[0][0][0] is rebuilt[0][1][1]


PACKAGE = textwrap.dedent(
    """
    import os
    import torch

    # Importing this package leaves a mark: gradviz imports it only when trusted.
    with open(os.environ["GRADVIZ_TEST_MARK"], "a") as mark:
        mark.write("imported\\n")

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
            self.scale = 2.5

        def forward(self, x):
            return self.scale * torch.sin(self.body(x))

    class Chain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(3, 4)
            self.fc2 = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc2(torch.sin(self.fc1(x)))
    """
)


@pytest.fixture
def installed_package(tmp_path, monkeypatch):
    """A package ``gv_installed_nets`` on sys.path, with a model saved from it; the
    package is then dropped from sys.modules (a fresh process has not imported it)."""
    root = tmp_path / "site"
    (root / "gv_installed_nets").mkdir(parents=True)
    (root / "gv_installed_nets" / "__init__.py").write_text(PACKAGE)
    mark = tmp_path / "imported.txt"
    monkeypatch.setenv("GRADVIZ_TEST_MARK", str(mark))
    monkeypatch.syspath_prepend(str(root))
    import gv_installed_nets

    torch.manual_seed(0)
    net = gv_installed_nets.Scaled().double()
    net.train()(torch.randn(8, 3, dtype=torch.float64))
    path = tmp_path / "scaled.pt"
    torch.save(net, path)
    chain = gv_installed_nets.Chain().double().eval()
    torch.save(chain, tmp_path / "chain.pt")
    del sys.modules["gv_installed_nets"]  # not restored: each test imports its own
    mark.unlink()
    yield path, net.eval(), mark, root / "gv_installed_nets", chain
    sys.modules.pop("gv_installed_nets", None)


def test_an_installed_class_outside_torch_nn_is_named_and_used_only_with_trust(
    capsys, tmp_path, installed_package
):
    path, net, mark, folder, _ = installed_package
    code, out, err = run(capsys, "inspect", path, "--json")
    assert code == 0, err
    described = json.loads(out)
    assert described["runnable"] and described["needs_trust"]
    assert f"'gv_installed_nets.Scaled' (from {folder})" in described["runs_as"]
    assert described["modules"][0] == {"name": "(top)", "class": "gv_installed_nets.Scaled"}
    x = torch.randn(3, 3, dtype=torch.float64)
    np.save(tmp_path / "x.npy", x.numpy())
    argv = ["jacobian", "--model", path, "--inputs", f"file:{tmp_path / 'x.npy'}", "--json",
            "--dtype", "float64", "--out", tmp_path / "j.npy"]  # fmt: skip
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "installed class 'gv_installed_nets.Scaled'" in err and "--trust" in err
    assert not mark.exists()  # described and refused without importing it
    code, out, err = run(capsys, *argv, "--trust")
    assert code == 0, err
    assert mark.read_text() == "imported\n"
    np.testing.assert_allclose(np.load(tmp_path / "j.npy"), live_jacobian(net, x), atol=1e-6)
    summary = json.loads(out.strip().splitlines()[-1])
    assert any("runs its own forward" in s for s in summary["assumptions"])
    assert any("saved in training mode" in s for s in summary["assumptions"])


def test_a_chain_of_an_installed_class_runs_in_its_listed_order_or_its_own_forward(
    capsys, tmp_path, installed_package
):
    """Layers that could run in their listed order: refused naming both ways; confirmed, the
    order (tanh-free: the sin of its forward is not in the file, and said so); trusted, the
    installed class's own forward."""
    *_, mark, _, chain = installed_package
    x = torch.randn(3, 3, dtype=torch.float64)
    np.save(tmp_path / "x.npy", x.numpy())
    argv = ["jacobian", "--model", tmp_path / "chain.pt", "--inputs", f"file:{tmp_path / 'x.npy'}",
            "--json", "--dtype", "float64", "--out", tmp_path / "j.npy"]  # fmt: skip
    code, out, err = run(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--assume-sequential" in err and "'gv_installed_nets.Chain' with --trust" in err
    code, out, err = run(capsys, *argv, "--assume-sequential", "--activation", "identity")
    assert code == 0 and not mark.exists(), err
    fc1, fc2 = chain.fc1, chain.fc2
    np.testing.assert_allclose(
        np.load(tmp_path / "j.npy"), live_jacobian(lambda v: fc2(fc1(v)), x), atol=1e-9
    )
    code, out, err = run(capsys, *argv, "--trust")
    assert code == 0 and mark.exists(), err
    np.testing.assert_allclose(np.load(tmp_path / "j.npy"), live_jacobian(chain, x), atol=1e-9)


def test_a_torchvision_resnet_names_its_installed_class_and_asks_for_trust(tmp_path):
    models = pytest.importorskip("torchvision.models")
    path = tmp_path / "resnet.pt"
    net = models.resnet18(num_classes=3).eval()
    torch.save(net, path)
    info = inspect_model(path)
    assert info.runnable and info.needs_trust
    assert "'torchvision.models.resnet.ResNet'" in info.runs_as
    with pytest.raises(GradvizError, match="torchvision.models.resnet.ResNet.*--trust"):
        load_model(path)
    loaded = load_model(path, trust=True)
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(loaded.module(x), net(x))


def test_a_hostile_name_beside_torch_nn_classes_is_refused_as_before(tmp_path):
    """A module whose state names os.system is refused by the pickle check, exactly as any
    file naming it, before any class is looked up."""

    class RunsCommand:
        def __reduce__(self):
            return (os.system, ("true",))

    net = torch.nn.Sequential(torch.nn.Linear(2, 2))
    net[0].payload = RunsCommand()
    buffer = io.BytesIO()
    torch.save(net, buffer, pickle_module=pickle)
    path = tmp_path / "hostile.pt"
    path.write_bytes(buffer.getvalue())
    with pytest.raises(
        GradvizError, match=r"is hostile: its pickle names 'posix\.system'|'os\.system'"
    ):
        inspect_model(path)
