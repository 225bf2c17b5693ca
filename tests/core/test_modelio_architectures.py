"""Real architectures, built here, saved the ways people save them: gradviz gives exact
gradients or refuses with exit 2; never a wrong answer with exit 0."""

import importlib.util
import json
import sys
import textwrap

import numpy as np
import pytest
import torch
from safetensors.torch import save_file, save_model

from gradviz.cli import main
from gradviz.core.modelio import inspect_model

# torch 2.13 warns with DeprecationWarning, 2.14 with FutureWarning: filter by message only.
jit_deprecated = pytest.mark.filterwarnings(
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated"
)

MODELS_PY = textwrap.dedent(
    """
    import torch
    from torch import nn

    class CustomMLP(nn.Module):
        # A ModuleDict/ModuleList MLP with one shared GELU: not a chain in declaration order.
        def __init__(self, width=6):
            super().__init__()
            self.blocks = nn.ModuleDict({"inp": nn.Linear(3, width)})
            self.hidden = nn.ModuleList([nn.Linear(width, width) for _ in range(2)])
            self.out = nn.Linear(width, 2)
            self.act = nn.GELU()

        def forward(self, x):
            x = self.act(self.blocks["inp"](x))
            for layer in self.hidden:
                x = self.act(layer(x))
            return self.out(x)

    class ResidualMLP(nn.Module):
        def __init__(self, width=5):
            super().__init__()
            self.inp = nn.Linear(3, width)
            self.block = nn.Linear(width, width)
            self.out = nn.Linear(width, 2)

        def forward(self, x):
            h = torch.tanh(self.inp(x))
            h = h + torch.tanh(self.block(h))
            return self.out(h)

    class SmallCNN(nn.Module):
        def __init__(self, classes=10):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.head = nn.Linear(4 * 4 * 4, classes)

        def forward(self, x):
            return self.head(torch.relu(nn.functional.max_pool2d(self.conv(x), 2)).flatten(1))

    class SmallLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 5, batch_first=True)
            self.head = nn.Linear(5, 2)

        def forward(self, x):
            return self.head(self.lstm(x)[0][:, -1])
    """
)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The classes above, importable from a file (as --model-class would import them)."""
    folder = tmp_path_factory.mktemp("models")
    path = folder / "user_models.py"
    path.write_text(MODELS_PY)
    spec = importlib.util.spec_from_file_location("user_models_fixture", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # torch.save pickles classes by module name
    spec.loader.exec_module(module)
    yield path, vars(module)
    del sys.modules[spec.name]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def live_jacobian(model, x):
    """The reference: torch.func.vmap(torch.func.jacrev(model)) of the live module."""
    one = lambda v: model(v[None])[0]  # noqa: E731
    return torch.func.vmap(torch.func.jacrev(one))(x).detach()


def jacobian_by_cli(capsys, tmp_path, path, x, *extra):
    inputs, out = tmp_path / "x.npy", tmp_path / "j.npy"
    np.save(inputs, x.numpy())
    code, stdout, err = run(
        capsys, "jacobian", "--model", path, "--inputs", f"file:{inputs}", "--out", out,
        "--dtype", "float64", "--json", *extra,
    )  # fmt: skip
    assert code == 0, err
    return np.load(out), json.loads(stdout.strip().splitlines()[-1])


def inputs(*shape, seed=1):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", ["CustomMLP", "ResidualMLP"])
def test_custom_and_residual_modules_are_refused_then_exact_with_their_class(
    capsys, tmp_path, models, name
):
    path, namespace = models
    torch.manual_seed(0)
    net = namespace[name]().double().eval()
    whole = tmp_path / "whole.pt"
    torch.save(net, whole)
    code, out, err = run(capsys, "jacobian", "--model", whole, "--batch", "3")
    assert code == 2 and out == ""
    assert "--assume-sequential" in err and "--model-class" in err and "(Linear) ->" in err

    weights = tmp_path / "weights.pt"
    torch.save(net.state_dict(), weights)
    # Weights alone do not say how the class runs its layers: refused, never a wrong answer.
    code, out, err = run(capsys, "jacobian", "--model", weights, "--batch", "3")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "--assume-sequential" in err and "--model-class" in err
    klass = f"{path}:{name}"
    code, _, err = run(
        capsys, "jacobian", "--model", weights, "--batch", "3", "--model-class", klass
    )
    assert code == 2 and "--trust" in err

    x = inputs(4, 3)
    jac, summary = jacobian_by_cli(capsys, tmp_path, weights, x, "--model-class", klass, "--trust")
    assert summary["kind"] == "jacobian" and summary["shape"] == [4, 2, 3]
    np.testing.assert_allclose(jac, live_jacobian(net, x).numpy().astype(np.float32), rtol=1e-6)


def test_model_class_with_arguments_and_wrong_arguments(capsys, tmp_path, models):
    path, namespace = models
    torch.manual_seed(0)
    net = namespace["CustomMLP"](width=4).double().eval()
    weights = tmp_path / "w4.safetensors"
    save_file(net.state_dict(), str(weights))
    klass = f"{path}:CustomMLP"
    code, _, err = run(
        capsys, "inspect", weights
    )  # a safetensors file of a custom class still opens under inspect
    assert code == 0
    code, _, err = run(
        capsys, "jacobian", "--model", weights, "--batch", "2", "--model-class", klass, "--trust"
    )
    assert code == 2 and "do not fit CustomMLP" in err and len(err.splitlines()) == 1
    x = inputs(3, 3)
    jac, _ = jacobian_by_cli(
        capsys, tmp_path, weights, x, "--model-class", klass, "--trust", "--model-args",
        '{"width": 4}',
    )  # fmt: skip
    np.testing.assert_allclose(jac, live_jacobian(net, x).numpy().astype(np.float32), rtol=1e-6)


def test_dropout_and_identity_chain_pickle_runs_exactly(capsys, tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 7), torch.nn.Dropout(0.3), torch.nn.ReLU(),
        torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.Identity(), torch.nn.Dropout1d()),
        torch.nn.Tanh(), torch.nn.Linear(5, 2),
    ).double().eval()  # fmt: skip
    path = tmp_path / "dropout.pt"
    torch.save(net, path)
    x = inputs(5, 3)
    jac, summary = jacobian_by_cli(capsys, tmp_path, path, x)
    assert summary["nonfinite_weights"] == []
    np.testing.assert_allclose(jac, live_jacobian(net, x).numpy().astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("writer", ["save_file", "save_model"])
def test_numbered_safetensors_run_in_numeric_order(capsys, tmp_path, writer):
    torch.manual_seed(0)
    layers = []
    widths = [3, 4, 5, 6, 7, 8, 2]
    for k in range(len(widths) - 1):
        layers += [torch.nn.Linear(widths[k], widths[k + 1]), torch.nn.Tanh()]
    net = torch.nn.Sequential(*layers[:-1]).double().eval()  # keys 0 .. 10
    path = tmp_path / f"{writer}.safetensors"
    if writer == "save_file":
        save_file(net.state_dict(), str(path))
    else:
        save_model(net, str(path))
    x = inputs(4, 3)
    jac, _ = jacobian_by_cli(capsys, tmp_path, path, x, "--activation", "tanh")
    np.testing.assert_allclose(jac, live_jacobian(net, x).numpy().astype(np.float32), rtol=1e-6)


def test_nan_weights_are_reported_before_the_jacobian(capsys, tmp_path):
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    with torch.no_grad():
        net[2].weight[0, 1] = float("nan")
    path = tmp_path / "nan.pt"
    torch.save(net, path)
    code, out, err = run(capsys, "jacobian", "--model", path, "--batch", "2")
    assert code == 0, err
    assert out.splitlines()[0] == "NaN or Inf in weights: 2.weight"
    code, out, err = run(capsys, "jacobian", "--model", path, "--batch", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["nonfinite_weights"] == ["2.weight"]  # --json: the document alone


class TinyViT(torch.nn.Module):
    """A module with tensors of its own and submodules (a class token and an encoder)."""

    def __init__(self):
        super().__init__()
        self.cls_token = torch.nn.Parameter(torch.zeros(1, 1, 8))
        self.embed = torch.nn.Linear(4, 8)
        layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        h = self.embed(x)
        h = torch.cat([self.cls_token.expand(len(h), -1, -1), h], dim=1)
        return self.head(self.encoder(h)[:, 0])


def test_inspect_counts_every_parameter_of_a_pickled_module(tmp_path):
    torch.manual_seed(0)
    for net in (TinyViT(), torch.nn.Transformer(8, 2, 1, 1, 16, batch_first=True)):
        path = tmp_path / "model.pt"
        torch.save(net, path)
        info = inspect_model(path)
        expected = sum(t.numel() for t in list(net.parameters()) + list(net.buffers()))
        assert info.parameters == expected and not info.runnable


class SmallCNN(torch.nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.Tanh(),
        )  # fmt: skip
        self.pool = torch.nn.AdaptiveAvgPool2d(2)
        self.head = torch.nn.Linear(16, classes)

    def forward(self, x):
        return self.head(self.pool(self.features(x)).flatten(1))


class SmallLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(3, 5, batch_first=True)
        self.head = torch.nn.Linear(5, 2)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


@jit_deprecated
@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")  # tracing the fixture itself
@pytest.mark.parametrize("name", ["cnn", "lstm", "transformer"])
def test_torchscript_models_with_natural_input_shapes_give_exact_jacobians(capsys, tmp_path, name):
    torch.manual_seed(0)
    net, x = {
        "cnn": (SmallCNN(), inputs(2, 3, 8, 8)),
        "lstm": (SmallLSTM(), inputs(3, 6, 3)),
        "transformer": (TinyViT(), inputs(2, 5, 4)),
    }[name]
    net = net.double().eval()
    path = tmp_path / f"{name}.pt"
    # The transformer's class token expands to the batch: tracing would fix the batch size.
    program = torch.jit.script(net) if name == "transformer" else torch.jit.trace(net, x[:1])
    torch.jit.save(program, path)
    jac, summary = jacobian_by_cli(capsys, tmp_path, path, x, "--trust")
    assert summary["kind"] == "jacobian" and summary["shape"][0] == len(x)
    expected = torch.stack(  # LSTM does not vmap: autograd per sample is the reference
        [torch.autograd.functional.jacobian(lambda v: net(v[None])[0], xb) for xb in x]
    )
    expected = expected.numpy().astype(np.float32)
    np.testing.assert_allclose(jac, expected, rtol=1e-5, atol=1e-6)


def test_exported_cnn_over_the_jacobian_limit_gives_saliency(capsys, tmp_path):
    torch.manual_seed(0)
    net = SmallCNN(classes=300).double().eval()  # 300 x 3*32*32 = 921,600 ... x 2 below
    x = inputs(2, 3, 40, 40)  # 300 x 4800 = 1.44 million entries: saliency
    path = tmp_path / "cnn.pt2"
    torch.export.save(torch.export.export(net, (x,)), path)
    sal, summary = jacobian_by_cli(capsys, tmp_path, path, x, "--trust")
    assert summary["kind"] == "saliency" and summary["shape"] == [2, 3, 40, 40]
    assert summary["output_explained"] == "each sample's largest output"
    xr = x.clone().requires_grad_(True)
    y = net(xr)
    k = y.argmax(dim=1)
    assert summary["output"] == k.tolist()
    (grad,) = torch.autograd.grad(y[torch.arange(2), k].sum(), xr)
    np.testing.assert_allclose(sal, grad.numpy().astype(np.float32), rtol=1e-5, atol=1e-7)

    assert inspect_model(path, trust=True).in_shape == (3, 40, 40)  # declared by the program
    code, out, err = run(capsys, "jacobian", "--model", path, "--trust", "--batch", "2",
                         "--output", "7", "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["output"] == [7, 7]


def reference_gradients(net, x, output=None):
    """Per-sample Jacobians by autograd (or, with ``output``, that output's gradient)."""
    if output is None:
        rows = [torch.autograd.functional.jacobian(lambda v: net(v[None])[0], xb) for xb in x]
        return torch.stack(rows).numpy().astype(np.float32)
    xr = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(net(xr)[:, output].sum(), xr)
    return grad.numpy().astype(np.float32)


@pytest.mark.parametrize(
    ("name", "shape", "extra"),
    [
        ("SmallCNN", (2, 3, 8, 8), ()),  # 10 x 192 entries: the Jacobian
        ("SmallCNN", (2, 3, 8, 8), ("--output", "3")),  # saliency of output 3
        ("SmallLSTM", (3, 6, 3), ()),
    ],
)
def test_cnn_and_lstm_state_dicts_run_in_their_class(capsys, tmp_path, models, name, shape, extra):
    path, namespace = models
    torch.manual_seed(0)
    net = namespace[name]().double().eval()
    weights = tmp_path / "weights.pt"
    torch.save(net.state_dict(), weights)
    x = inputs(*shape)
    klass = f"{path}:{name}"
    got, summary = jacobian_by_cli(
        capsys, tmp_path, weights, x, "--model-class", klass, "--trust", *extra
    )
    output = int(extra[1]) if extra else None
    assert summary["kind"] == ("saliency" if extra else "jacobian")
    np.testing.assert_allclose(got, reference_gradients(net, x, output), rtol=1e-5, atol=1e-7)


@pytest.mark.filterwarnings(  # torch.export's own notice while exporting the fixture
    r"ignore:The tensor attributes self\.lstm\._flat_weights"
)
def test_exported_lstm_with_a_dynamic_batch_gives_exact_jacobians(capsys, tmp_path):
    torch.manual_seed(0)
    net = SmallLSTM().eval()
    x = inputs(3, 6, 3).float()
    path = tmp_path / "lstm.pt2"
    batch = torch.export.Dim("batch")
    torch.export.save(torch.export.export(net, (x,), dynamic_shapes=({0: batch},)), path)
    np.save(tmp_path / "x.npy", x.numpy())
    given = f"file:{tmp_path / 'x.npy'}"
    code, out, err = run(capsys, "jacobian", "--model", path, "--trust", "--inputs", given,
                         "--out", tmp_path / "j.npy", "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["shape"] == [3, 2, 6, 3]
    expected = reference_gradients(net, x)
    np.testing.assert_allclose(np.load(tmp_path / "j.npy"), expected, rtol=1e-4, atol=1e-6)


@jit_deprecated
def test_torchscript_with_nan_weights_reports_them_not_sample_mixing(capsys, tmp_path):
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    with torch.no_grad():
        net[0].weight[1, 0] = float("nan")
    path = tmp_path / "nan_script.pt"
    torch.jit.save(torch.jit.script(net), path)
    argv = ("jacobian", "--model", path, "--trust", "--in-dim", "2", "--batch", "3")
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert out.splitlines()[0] == "NaN or Inf in weights: 0.weight"
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    summary = json.loads(out)  # --json: the document alone
    assert summary["nonfinite_weights"] == ["0.weight"]
    assert "mixes samples" not in summary["reason"] and "NaN" in summary["reason"]


class OverAHundred(torch.nn.Module):
    """Asserts, when run, that every input is over 100 (zeros and random inputs fail)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 3)

    def forward(self, x):
        torch._assert_async(torch.all(x > 100), "inputs must be over 100")
        return self.fc(x)


def test_exported_program_failing_when_run_says_code_from_the_file_ran(capsys, tmp_path):
    # (A batch outside an exported range no longer fails: it runs in chunks within it.)
    path = tmp_path / "over_100.pt2"
    program = torch.export.export(OverAHundred().eval(), (torch.full((2, 2), 200.0),))
    torch.export.save(program, path)
    code, out, err = run(capsys, "jacobian", "--model", path, "--trust", "--batch", "8")
    assert code == 2 and "after running code from the file" in err and "damaged" not in err


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (("--batch", "2", "--input-shape", "3,x"), "--input-shape takes positive sizes"),
        (("--batch", "2", "--input-shape", "3,8,8", "--output", "10"), "--output 10 does not"),
        (("--batch", "2", "--input-shape", "3,5,5"), "failed on inputs of shape (2, 3, 5, 5)"),
        (("--batch", "2"), "does not declare its input shape"),
        (("--inputs", "nan"), "holds NaN or Inf"),
    ],
    ids=["bad shape", "no such output", "wrong shape", "no shape", "NaN inputs"],
)
def test_bad_input_shapes_and_outputs_exit_2_with_one_sentence(
    capsys, tmp_path, models, extra, said
):
    path, namespace = models
    weights = tmp_path / "cnn.pt"
    torch.save(namespace["SmallCNN"]().state_dict(), weights)
    if extra[0] == "--inputs":
        bad = np.zeros((2, 3, 8, 8))
        bad[1, 0, 0, 0] = np.nan
        np.save(tmp_path / "bad.npy", bad)
        extra = ("--inputs", f"file:{tmp_path / 'bad.npy'}")
    klass = f"{path}:SmallCNN"
    code, out, err = run(capsys, "jacobian", "--model", weights, "--model-class", klass, "--trust",
                         *extra)  # fmt: skip
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
