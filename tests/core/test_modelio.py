"""Every model format gradviz reads, written here by torch itself, gives the live module's
outputs and Jacobians; whole pickles open without trust and without importing their class."""

import os
import subprocess
import sys
import tempfile
import types

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import detect_format, inspect_model, load_model
from gradviz.core.nets.jacobians import compute_jacobians
from gradviz.core.nets.networks import Linear, NetworkSpec, save_network

# torch deprecates TorchScript (2.13: DeprecationWarning, 2.14: FutureWarning); these tests
# still need to write such files, as people have them.
jit_deprecated = pytest.mark.filterwarnings(
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated:DeprecationWarning",
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated:FutureWarning",
)


class NetX(torch.nn.Module):
    """The classic purely linear net_x: fc1, fc2, out and no activation."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(2, 20)
        self.fc2 = torch.nn.Linear(20, 20)
        self.out = torch.nn.Linear(20, 4)

    def forward(self, x):
        return self.out(self.fc2(self.fc1(x)))


def make_net_x():
    torch.manual_seed(3)
    return NetX().double().eval()


def inputs(n_in=2, batch=5):
    return torch.randn(batch, n_in, dtype=torch.float64, generator=torch.Generator().manual_seed(7))


def per_sample_jacobian(model, x):
    """(B, m, n) by autograd, one sample at a time: the reference."""
    rows = [
        torch.autograd.functional.jacobian(lambda v: model(v[None])[0], x[b]) for b in range(len(x))
    ]
    return torch.stack(rows)


def assert_same_function(loaded, original, x):
    """Same outputs, and gradviz's Jacobian engine on the loaded model matches autograd on
    the original, sample by sample."""
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), original(x), rtol=0, atol=1e-12)
    expected = per_sample_jacobian(original, x)
    torch.testing.assert_close(per_sample_jacobian(loaded, x), expected, rtol=0, atol=1e-12)
    result = compute_jacobians(loaded, x)
    torch.testing.assert_close(result.jacobians, expected, rtol=0, atol=1e-12)
    return result


def test_net_x_state_dict_gives_the_live_modules_jacobians(tmp_path):
    net = make_net_x()
    path = tmp_path / "net_x.pt"
    torch.save(net.state_dict(), path)
    # fc1, fc2, out: a class's own names, so the order is the user's call, as for a pickle.
    refused = inspect_model(path)
    assert not refused.runnable and "'fc1' -> 'fc2' -> 'out'" in refused.not_runnable_reason
    assert "--assume-sequential" in refused.not_runnable_reason
    loaded = load_model(path, assume_sequential=True)
    assert loaded.info.format == "state_dict" and not loaded.info.needs_trust
    assert loaded.spec is not None and str(loaded.spec) == "2-20-20-4"
    assert any("'identity'" in s for s in loaded.info.assumptions)
    result = assert_same_function(loaded.module, net, inputs())
    assert result.method == "batchsum"  # a rebuilt chain is per-sample by construction


NET_X_SCRIPT = """
import sys
import torch
sys.path.insert(0, {tmp!r})
from {module} import NetX

torch.manual_seed(3)
net = NetX().double().eval()
torch.save(net, {model!r})
x = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
rows = [torch.autograd.functional.jacobian(lambda v: net(v[None])[0], x[b]) for b in range(5)]
torch.save({{"x": x, "y": net(x).detach(), "j": torch.stack(rows)}}, {reference!r})
"""

NET_X_MODULE = """
import torch

class NetX(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(2, 20)
        self.fc2 = torch.nn.Linear(20, 20)
        self.out = torch.nn.Linear(20, 4)

    def forward(self, x):
        return self.out(self.fc2(self.fc1(x)))
"""


@pytest.mark.slow
def test_net_x_whole_pickle_from_another_process_runs_only_when_its_order_is_confirmed(
    tmp_path,
):
    module_name = "netx_private_model_module"
    (tmp_path / f"{module_name}.py").write_text(NET_X_MODULE)
    model_path, reference_path = tmp_path / "whole.pt", tmp_path / "reference.pt"
    script = NET_X_SCRIPT.format(
        tmp=str(tmp_path), module=module_name, model=str(model_path), reference=str(reference_path)
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)

    refused = inspect_model(model_path)  # a class of its own: its order is a guess
    assert not refused.runnable
    assert "fc1 (Linear) -> fc2 (Linear) -> out (Linear)" in refused.not_runnable_reason
    for way in ("--assume-sequential", "--model-class", "TorchScript or .pt2"):
        assert way in refused.not_runnable_reason
    with pytest.raises(GradvizError, match="--assume-sequential"):
        load_model(model_path)

    loaded = load_model(model_path, assume_sequential=True)  # no trust

    assert module_name not in sys.modules
    assert f"{module_name}.NetX" in loaded.info.classes
    assert loaded.info.format == "pickled_module"
    assert "The forward order was assumed from the order of the submodules." in (
        loaded.info.assumptions
    )
    ref = torch.load(reference_path, map_location="cpu", weights_only=True)
    with torch.no_grad():
        torch.testing.assert_close(loaded.module(ref["x"]), ref["y"], rtol=0, atol=1e-12)
    torch.testing.assert_close(
        compute_jacobians(loaded.module, ref["x"]).jacobians, ref["j"], rtol=0, atol=1e-12
    )


@jit_deprecated
def test_net_x_torchscript_runs_with_trust_and_gives_the_live_modules_jacobians(tmp_path):
    net = make_net_x()
    path = tmp_path / "net_x_script.pt"
    torch.jit.save(torch.jit.script(net), path)
    untrusted = inspect_model(path)
    assert untrusted.needs_trust and f"__torch__.{__name__}.NetX" in untrusted.classes
    loaded = load_model(path, trust=True, in_dim=2)
    assert loaded.info.format == "torchscript" and loaded.info.needs_trust
    assert (loaded.info.in_dim, loaded.info.out_dim) == (2, 4)
    assert loaded.spec is None
    assert_same_function(loaded.module, net, inputs())


@jit_deprecated
def test_traced_torchscript_of_a_conv_net_runs_with_trust(tmp_path):
    torch.manual_seed(0)
    net = (
        torch.nn.Sequential(
            torch.nn.Unflatten(1, (1, 6)),
            torch.nn.Conv1d(1, 2, 3),
            torch.nn.Flatten(),
            torch.nn.Tanh(),
            torch.nn.Linear(8, 3),
        )
        .double()
        .eval()
    )
    path = tmp_path / "conv_traced.pt"
    torch.jit.save(torch.jit.trace(net, torch.zeros(2, 6, dtype=torch.float64)), path)
    loaded = load_model(path, trust=True, in_dim=6)
    assert "Conv1d" in {layer.kind for layer in loaded.info.layers}
    assert_same_function(loaded.module, net, inputs(6))


def test_exported_program_declares_its_widths_and_runs_with_trust(tmp_path):
    net = (
        torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Sigmoid(), torch.nn.Linear(8, 2))
        .double()
        .eval()
    )
    batch = torch.export.Dim("batch")
    program = torch.export.export(
        net, (torch.zeros(4, 3, dtype=torch.float64),), dynamic_shapes=({0: batch},)
    )
    path = tmp_path / "program.pt2"
    torch.export.save(program, path)
    info = inspect_model(path, trust=True)
    assert (info.format, info.in_dim, info.out_dim) == ("pt2", 3, 2)
    loaded = load_model(path, trust=True)
    assert_same_function(loaded.module, net, inputs(3))


def test_whole_pickled_sequential_uses_the_activation_modules_it_holds(tmp_path):
    torch.manual_seed(1)
    net = (
        torch.nn.Sequential(
            torch.nn.Linear(2, 16),
            torch.nn.Tanh(),
            torch.nn.Linear(16, 16),
            torch.nn.Softplus(),
            torch.nn.Linear(16, 3),
        )
        .double()
        .eval()
    )
    path = tmp_path / "seq.pt"
    torch.save(net, path)
    loaded = load_model(path, activation="relu")  # the file says tanh and softplus
    assert loaded.info.assumptions == ()  # a Sequential's order is its forward order
    assert_same_function(loaded.module, net, inputs())


def test_state_dict_activation_comes_from_the_argument(tmp_path):
    torch.manual_seed(2)
    net = (
        torch.nn.Sequential(
            torch.nn.Linear(2, 10),
            torch.nn.GELU(),
            torch.nn.Linear(10, 10),
            torch.nn.GELU(),
            torch.nn.Linear(10, 1),
        )
        .double()
        .eval()
    )
    path = tmp_path / "gelu.pth"
    torch.save(net.state_dict(), path)
    loaded = load_model(path, activation="gelu")
    assert str(loaded.spec) == "2-10-10-1:gelu"
    assert any("'gelu'" in s for s in loaded.info.assumptions)
    assert_same_function(loaded.module, net, inputs())


@pytest.mark.parametrize("key", ["state_dict", "model_state_dict", "model"])
def test_checkpoint_with_nested_state_dict_loads_its_weights(tmp_path, key):
    net = make_net_x()
    path = tmp_path / "checkpoint.pt"
    torch.save({"epoch": 3, "optimizer": {"lr": 0.1}, key: net.state_dict()}, path)
    loaded = load_model(path, assume_sequential=True)
    assert any(repr(key) in s for s in loaded.info.assumptions)
    assert_same_function(loaded.module, net, inputs())


def test_prefixed_state_dict_keys_are_recognised_in_order(tmp_path):
    torch.manual_seed(4)
    layers = torch.nn.ModuleList(
        [torch.nn.Linear(2, 5), torch.nn.Linear(5, 7), torch.nn.Linear(7, 3)]
    ).double()
    state = {
        f"net.layers.{k}.{leaf}": t
        for k, layer in enumerate(layers)
        for leaf, t in layer.state_dict().items()
    }
    path = tmp_path / "prefixed.pt"
    torch.save(state, path)
    info = inspect_model(path)
    assert (info.spec, info.in_dim, info.out_dim) == ("2-5-7-3", 2, 3)


def test_safetensors_without_gradviz_metadata_rebuilds_in_name_order(tmp_path):
    torch.manual_seed(5)
    net = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(11)]).double().eval()
    path = tmp_path / "weights.safetensors"
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, path)
    loaded = load_model(path)  # layers 0..10: natural order, not 0, 1, 10, 2, ...
    assert loaded.info.format == "safetensors"
    assert_same_function(loaded.module, net, inputs(4))


def test_format_is_decided_by_bytes_not_by_extension(tmp_path):
    net = make_net_x()
    path = tmp_path / "looks_like.safetensors"
    torch.save(net.state_dict(), path)
    assert detect_format(path.read_bytes()) == "torch_zip"
    assert inspect_model(path).format == "state_dict"


def test_conv_state_dict_is_described_but_not_runnable_and_its_whole_pickle_is_rebuilt(
    tmp_path,
):
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten())
    for name, obj in (("conv_sd.pt", net.state_dict()), ("conv_whole.pt", net)):
        path = tmp_path / name
        torch.save(obj, path)
        info = inspect_model(path)
        assert info.parameters == 4 * 9 + 4
        assert info.layers[0].shapes["weight"] == (4, 1, 3, 3)
        if name == "conv_sd.pt":  # weights alone do not say what runs between them
            assert not info.runnable
            assert "trusted TorchScript or .pt2" in info.not_runnable_reason
            with pytest.raises(GradvizError, match="trusted TorchScript or .pt2"):
                load_model(path)
            continue
        # The whole module names torch.nn's classes: made from them and the saved state.
        assert info.runnable and not info.needs_trust
        assert info.runs_as == "Rebuilt from torch.nn classes, no code from the file."
        x = torch.randn(2, 1, 5, 5)
        torch.testing.assert_close(load_model(path).module(x), net(x), rtol=0, atol=0)


def test_untrusted_programs_are_described_and_refused_naming_trust(tmp_path):
    net = torch.nn.Linear(2, 3)
    path = tmp_path / "program.pt2"
    torch.export.save(torch.export.export(net, (torch.zeros(2, 2),)), path)
    info = inspect_model(path)
    assert info.needs_trust
    assert [layer.shapes for layer in info.layers] == [{"weight": (3, 2), "bias": (3,)}]
    with pytest.raises(GradvizError, match="--trust"):
        load_model(path)


def test_nan_weights_load_and_are_flagged(tmp_path):
    net = make_net_x()
    with torch.no_grad():
        net.fc2.weight[3, 4] = float("nan")
        net.out.bias[0] = float("inf")
    path = tmp_path / "nan.pt"
    torch.save(net.state_dict(), path)
    assert inspect_model(path).nonfinite_weights == ("fc2.weight", "out.bias")  # also refused
    loaded = load_model(path, assume_sequential=True)
    assert loaded.info.nonfinite_weights == ("fc2.weight", "out.bias")
    assert loaded.module(inputs()).isnan().any()


def test_model_info_json_has_the_documented_fields(tmp_path):
    path = tmp_path / "net.pt"
    torch.save(make_net_x().state_dict(), path)
    data = inspect_model(path).to_dict()
    for key in (
        "format",
        "runnable",
        "needs_trust",
        "classes",
        "layers",
        "parameters",
        "in_dim",
        "out_dim",
        "nonfinite_weights",
        "assumptions",
    ):
        assert key in data
    assert data["parameters"] == 2 * 20 + 20 + 20 * 20 + 20 + 20 * 4 + 4
    assert data["layers"][0] == {
        "name": "fc1",
        "type": "linear",
        "shapes": {"weight": [20, 2], "bias": [20]},
    }


def test_importing_the_model_loader_does_not_import_torch():
    # The desktop app imports it on the GUI path, before torch has finished importing.
    code = "import sys, gradviz.core.modelio; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "False"


class Swish(torch.nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


def test_whole_pickle_with_a_custom_layer_is_described_but_not_runnable(tmp_path, monkeypatch):
    # The saving script's own module is not installed where the file is read.
    gone = types.ModuleType("saving_script_gone")
    gone.Swish = type("Swish", (Swish,), {"__module__": "saving_script_gone"})
    monkeypatch.setitem(sys.modules, "saving_script_gone", gone)
    net = torch.nn.Sequential(torch.nn.Linear(2, 4), gone.Swish(), torch.nn.Linear(4, 1))
    path = tmp_path / "swish.pt"
    torch.save(net, path)
    monkeypatch.delitem(sys.modules, "saving_script_gone")
    info = inspect_model(path)
    assert not info.runnable and info.parameters == 2 * 4 + 4 + 4 + 1
    assert "saving_script_gone.Swish" in info.classes
    assert "forward code is not in the file" in info.not_runnable_reason


def test_whole_pickle_with_an_installed_custom_layer_needs_trust_then_runs_it(tmp_path):
    """This test module is importable here: its Swish is an installed class outside
    torch.nn, used only with trust (importing a package runs its code)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 4), Swish(), torch.nn.Linear(4, 1)).double()
    path = tmp_path / "swish.pt"
    torch.save(net, path)
    info = inspect_model(path)
    assert info.runnable and info.needs_trust
    assert f"'{__name__}.Swish'" in info.runs_as
    with pytest.raises(GradvizError, match=rf"installed class '{__name__}.Swish'.*--trust"):
        load_model(path)
    x = inputs()
    torch.testing.assert_close(load_model(path, trust=True).module(x), net(x))


def test_checkpoint_holding_a_whole_module_rebuilds_it(tmp_path):
    net = make_net_x()
    path = tmp_path / "checkpoint_module.pt"
    torch.save({"model": net, "epoch": 2}, path)
    loaded = load_model(path, assume_sequential=True)
    assert loaded.info.format == "pickled_module"
    assert_same_function(loaded.module, net, inputs())


@settings(max_examples=15, deadline=None)
@given(
    widths=st.lists(st.integers(1, 9), min_size=2, max_size=5),
    activation=st.sampled_from(["identity", "relu", "tanh", "sigmoid", "gelu", "softplus"]),
    bias=st.booleans(),
)
def test_any_linear_chain_state_dict_rebuilds_the_same_function(widths, activation, bias):
    layers = NetworkSpec.from_widths(widths, activation).layers
    if not bias:
        layers = tuple(
            Linear(layer.in_features, layer.out_features, bias=False)
            if isinstance(layer, Linear)
            else layer
            for layer in layers
        )
    net = NetworkSpec(layers).build(seed=len(widths), dtype=torch.float64).eval()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "chain.pt")
        torch.save(net.state_dict(), path)
        loaded = load_model(path, activation=activation)
    assert loaded.spec == NetworkSpec(layers)
    assert_same_function(loaded.module, net, inputs(widths[0]))


def test_gradviz_model_file_is_read_with_its_spec_and_no_assumptions(tmp_path):
    spec = NetworkSpec.parse("2-20-20-4:sigmoid")
    net = spec.build(seed=11, dtype=torch.float64).eval()
    path = tmp_path / "saved.safetensors"
    save_network(path, spec, net)
    info = inspect_model(path)
    assert (info.format, info.spec, info.assumptions) == ("gradviz", "2-20-20-4:sigmoid", ())
    loaded = load_model(path, activation="relu")  # the file says sigmoid: no assumption
    assert loaded.spec == spec
    assert_same_function(loaded.module, net, inputs())
