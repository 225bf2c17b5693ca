"""A zoo of small models, each saved every way people save one: `inspect --json` describes
every file, and `jacobian --json` either gives the live module's Jacobians (compared with
torch.func.jacrev on the live module) or exits 2 with one sentence naming the next step.
Never a wrong answer with exit 0. gradviz's own file (safetensors with its network spec)
holds the networks a spec describes: here net_x, a 2-20-20-4 tanh chain.

The zoo is built by ``build_zoo`` (also used by the app's zoo test, tests/gui)."""

import importlib.util
import json
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from gradviz.cli import main
from gradviz.core.nets.networks import NetworkSpec, save_network

ZOO_PY = textwrap.dedent(
    """
    import torch
    from torch import nn

    class net_x(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(2, 20)
            self.fc2 = nn.Linear(20, 20)
            self.out = nn.Linear(20, 4)

        def forward(self, x):
            return self.out(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))

    class small_cnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3, padding=1)
            self.head = nn.Linear(2 * 4 * 4, 3)

        def forward(self, x):
            return self.head(torch.tanh(self.conv(x)).flatten(1))

    def batchnorm_sequential():
        return nn.Sequential(
            nn.Linear(3, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Dropout(0.2), nn.Linear(6, 2)
        )

    def tanh_sequential():
        return nn.Sequential(nn.Linear(2, 5), nn.Tanh(), nn.Linear(5, 3))

    def cnn_sequential():
        return nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(),
                             nn.Linear(2 * 4 * 4, 3))

    def nested_sequential():
        return nn.Sequential(nn.Sequential(nn.Linear(3, 4), nn.Tanh()),
                             nn.Sequential(nn.Sequential(nn.Linear(4, 2))))
    """
)
SAMPLE_SHAPES = {
    "net_x": (2,),
    "small_cnn": (1, 4, 4),
    "batchnorm_sequential": (3,),
    "tanh_sequential": (2,),
    "cnn_sequential": (1, 4, 4),
    "nested_sequential": (3,),
}
# Whole pickles made of torch.nn classes alone: rebuilt from them, without a question.
TORCH_NN_ONLY = ("batchnorm_sequential", "tanh_sequential", "cnn_sequential", "nested_sequential")
WAYS = (
    "whole",
    "state_dict",
    "legacy",
    "script",
    "trace",
    "pt2_fixed",
    "pt2_dynamic",
    "safetensors",
)
PROGRAMS = ("script", "trace", "pt2_fixed", "pt2_dynamic")
#: gradviz's own file holds a network its spec describes: {model: spec}.
GRADVIZ_SPECS = {"net_x": "2-20-20-4:tanh"}
#: Every (model, way) of the zoo.
CASES = [(name, way) for name in sorted(SAMPLE_SHAPES) for way in WAYS] + [
    (name, "gradviz") for name in sorted(GRADVIZ_SPECS)
]
#: The models the zoo must cover every way in the default run; the others' programs (each
#: opened in a process of its own, about 2 s apiece) run with the cases marked slow.
CORE_MODELS = ("net_x", "small_cnn", "batchnorm_sequential")


def zoo_params(everyway: tuple[str, ...] = CORE_MODELS) -> list:
    """CASES as pytest parameters: a program of a model outside ``everyway`` is ``slow``."""
    slow = pytest.mark.slow
    return [
        pytest.param(name, way, marks=[slow] if way in PROGRAMS and name not in everyway else [])
        for name, way in CASES
    ]


SUFFIXES = {"pt2_fixed": "pt2", "pt2_dynamic": "pt2", "gradviz": "safetensors"}
# What a refusal must name: the option or the way of saving that would open the file.
NEXT_STEPS = (
    "--assume-sequential",
    "--model-class",
    "--trust",
    "--activation",
    "TorchScript or .pt2",
    "save",
)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """{(model, way): (path, live module)} for every model saved every way."""
    return build_zoo(tmp_path_factory.mktemp("zoo"))


def build_zoo(folder) -> "ModelZoo":
    """The zoo's files, written in ``folder`` as each case asks for its own."""
    return ModelZoo(folder)


class ModelZoo:
    """``zoo[model, way]`` is (path, live module): the model saved that way, written the
    first time a case asks (exporting a program takes seconds: only the cases run pay)."""

    def __init__(self, folder) -> None:
        self.folder = folder
        source = folder / "zoo_models.py"
        source.write_text(ZOO_PY)
        spec = importlib.util.spec_from_file_location("zoo_models_private", source)
        self._module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self._module)
        self._nets: dict = {}
        self._files: dict = {}

    def __getitem__(self, case: tuple[str, str]):
        if case not in self._files:
            name, way = case
            net = self._net(name)
            path = self.folder / f"{name}_{way}.{SUFFIXES.get(way, 'pt')}"
            # A whole pickle names the module its class is in: importable while it is saved.
            sys.modules[self._module.__name__] = self._module
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _save(net, way, path, SAMPLE_SHAPES[name], GRADVIZ_SPECS.get(name))
            finally:
                del sys.modules[self._module.__name__]
            self._files[case] = (path, net)
        return self._files[case]

    def _net(self, name: str):
        if name not in self._nets:
            torch.manual_seed(0)
            net = getattr(self._module, name)().double()
            if name == "batchnorm_sequential":  # running statistics that are not (0, 1)
                net.train()(torch.randn(16, 3, dtype=torch.float64) * 3 + 1)
            self._nets[name] = net.eval()
        return self._nets[name]


def _save(net, way, path, shape, spec_text=None):
    example = torch.randn(3, *shape, dtype=torch.float64)
    if way == "gradviz":  # the spec's network, given the live module's weights in order
        spec = NetworkSpec.parse(spec_text)
        network = spec.build(dtype=torch.float64)
        weights = [t.detach() for t in net.state_dict().values()]
        network.load_state_dict(dict(zip(network.state_dict(), weights, strict=True)))
        save_network(path, spec, network)
    elif way == "whole":
        torch.save(net, path)
    elif way == "state_dict":
        torch.save(net.state_dict(), path)
    elif way == "legacy":
        torch.save(net, path, _use_new_zipfile_serialization=False)
    elif way == "script":
        torch.jit.save(torch.jit.script(net), path)
    elif way == "trace":
        torch.jit.save(torch.jit.trace(net, example), path)
    elif way == "pt2_fixed":
        torch.export.save(torch.export.export(net, (example,)), path)
    elif way == "pt2_dynamic":
        batch = torch.export.Dim("batch", min=2, max=64)
        program = torch.export.export(net, (example,), dynamic_shapes=[{0: batch}])
        torch.export.save(program, path)
    else:
        save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(path))


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
@pytest.mark.parametrize(("name", "way"), zoo_params())
def test_every_way_of_saving_gives_the_live_jacobians_or_one_refusal_naming_a_next_step(
    capsys, tmp_path, zoo, name, way
):
    path, net = zoo[name, way]
    trust = ("--trust",) if way in PROGRAMS else ()
    code, out, err = run(capsys, "inspect", path, "--json", *trust)
    if code != 0:  # a whole module in torch's legacy format: refused, naming what to do
        assert_one_refusal_naming_a_next_step(code, err)
        assert run(capsys, "jacobian", "--model", path, "--batch", "2")[2] == err.replace(
            "inspect", "jacobian", 1
        )
        return
    described = json.loads(out)
    assert described["parameters"] > 0 or not described["runnable"]
    rebuilt = name in TORCH_NN_ONLY and way == "whole"
    if rebuilt:
        assert described["runnable"] and not described["needs_trust"]
        assert "no code from the file" in described["runs_as"]

    x = torch.randn(5, *SAMPLE_SHAPES[name], dtype=torch.float64)
    np.save(tmp_path / "x.npy", x.numpy())
    code, out, err = run(
        capsys, "jacobian", "--model", path, "--inputs", f"file:{tmp_path / 'x.npy'}",
        "--dtype", "float64", "--out", tmp_path / "j.npy", "--json", *trust,
    )  # fmt: skip
    if code == 0:
        expected = torch.func.vmap(torch.func.jacrev(lambda v: net(v[None])[0]))(x).detach()
        np.testing.assert_allclose(np.load(tmp_path / "j.npy"), expected.numpy(), atol=1e-9)
        summary = json.loads(out.strip().splitlines()[-1])
        # Where the file does not say the input's shape, the run adds where it took it from.
        shape = tuple(SAMPLE_SHAPES[name])
        undeclared = described["in_dim"] is None and described["in_shape"] is None
        taken = [f"The input shape {shape} was taken from the inputs (--inputs)."] * undeclared
        assert summary["assumptions"] == described["assumptions"] + taken or way in PROGRAMS
        assert summary.get("runs_as") == described.get("runs_as") or way in PROGRAMS
    else:
        assert not rebuilt, err
        assert_one_refusal_naming_a_next_step(code, err)


def assert_one_refusal_naming_a_next_step(code, err):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert any(step in lines[0] for step in NEXT_STEPS), lines[0]
