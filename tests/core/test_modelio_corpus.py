"""Files from a corpus of hostile and unusual model files that once got a traceback, a
wrong answer or more memory than promised: each is read, or refused in one sentence."""

import json
import subprocess
import sys

import hostile_files as hostile
import pytest
import torch
from safetensors.torch import save_file
from test_modelio_limits import refused_by_the_cli

from gradviz.cli import main
from gradviz.core.modelio import inspect_model


def test_v1_rebuilt_tensor_named_by_many_keys_is_counted_once_per_key(capsys, tmp_path):
    """torch._utils._rebuild_tensor (v1) is counted as v2 and v3 are: 12,000 keys naming one
    tensor are 12,000 tensors to whoever builds them."""
    message = refused_by_the_cli(capsys, hostile.v1_memo_shared(tmp_path))
    assert "declares 12,000 tensors" in message and "once for each name" in message


def test_v1_rebuilt_stride_zero_layer_counts_at_full_size(capsys, tmp_path):
    message = refused_by_the_cli(capsys, hostile.v1_stride_zero(tmp_path))
    assert "at full size" in message and "stride of 0" in message


@pytest.mark.parametrize("writer", ["torch.save", "safetensors"])
def test_an_empty_floating_tensor_first_in_the_file_is_read(capsys, tmp_path, writer):
    tensors = {"a_empty": torch.zeros(0), "b.weight": torch.ones(3, 2)}
    path = tmp_path / f"empty_first.{'pt' if writer == 'torch.save' else 'safetensors'}"
    if writer == "torch.save":
        torch.save(tensors, path)
    else:
        save_file(tensors, str(path))
    info = inspect_model(path)
    assert [(layer.name, layer.shapes) for layer in info.layers] == [
        ("(top)", {"a_empty": (0,)}),
        ("b", {"weight": (3, 2)}),
    ]
    assert main(["inspect", str(path)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("where", ["size", "stride"])
def test_sizes_or_strides_past_int64_get_one_sentence(capsys, tmp_path, where):
    message = refused_by_the_cli(capsys, hostile.past_int64(tmp_path, where))
    assert "damaged sizes or strides" in message


def test_a_zip_with_a_second_zip_appended_is_refused(capsys, tmp_path):
    path = hostile.appended_zip(tmp_path)
    message = refused_by_the_cli(capsys, path)
    assert "second zip archive" in message and "different models" in message


MEASURE = """
import resource, sys
import torch
from gradviz.core.modelio import load_model
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
loaded = load_model(sys.argv[1], activation="identity")
assert loaded.info.in_dim == 2
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


@pytest.mark.slow
def test_a_small_deflated_file_takes_what_it_inflates_to_not_a_multiple(tmp_path):
    """768 MiB deflated into under 1 MB: the peak memory above the process's baseline after
    ``import torch``, in a fresh process, stays under the 1 GiB promise (it was 2.3 GB:
    the entry inflated, joined and copied, isfinite's temporaries, the network's copy)."""
    path = hostile.deflated_under_limit(tmp_path)
    assert path.stat().st_size < 1 << 20
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    above = int(result.stdout.split()[-1])
    assert above < (1 << 30), f"{above / 2**20:,.0f} MiB above the baseline"


def doubled(module, inputs, output):  # a forward hook: the layer's output, doubled
    return output * 2


def shifted(module, inputs):  # a forward pre-hook: the layer's input, shifted
    return (inputs[0] + 1,)


@pytest.mark.parametrize("kind", ["forward hook", "forward pre-hook"])
def test_a_whole_sequential_whose_layer_carries_a_hook_is_refused_naming_it(capsys, tmp_path, kind):
    """The hook changes what the layer computes and the file holds only its name: running
    the layers without it gave a Jacobian 0.67 off, with no word said."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    if kind == "forward hook":
        net[0].register_forward_hook(doubled)
    else:
        net[2].register_forward_pre_hook(shifted)
    path = tmp_path / "hooked.pt"
    torch.save(net, path)
    info = inspect_model(path)
    assert not info.runnable
    hook = "doubled" if kind == "forward hook" else "shifted"
    assert f"carries a {kind} ('{__name__}.{hook}')" in info.not_runnable_reason
    code = main(["jacobian", "--model", str(path), "--batch", "2", "--assume-sequential"])
    err = capsys.readouterr().err
    assert code == 2 and f"a {kind}" in err and len(err.strip().splitlines()) == 1


def test_a_model_saved_in_training_mode_says_it_runs_in_eval_mode(capsys, tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(2, 3), torch.nn.Dropout(0.5), torch.nn.Tanh(), torch.nn.Linear(3, 1)
    )
    path = tmp_path / "trained.pt"
    torch.save(net, path)  # training mode, as a freshly built module is
    assert main(["jacobian", "--model", str(path), "--batch", "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert any("saved in training mode" in s and "eval mode" in s for s in summary["assumptions"])
    torch.save(net.eval(), path)
    assert not any("training mode" in s for s in inspect_model(path).assumptions)


def test_a_state_dicts_widths_are_read_from_its_first_and_last_weights(capsys, tmp_path):
    """fc1 (20, 2) ... out (4, 20): "2 inputs -> 4 outputs", labelled as read from the
    weights (the file declares no forward), in inspect's text, its JSON and the panel's line."""
    torch.manual_seed(0)
    path = tmp_path / "net_x.pt"
    layers = {"fc1": torch.nn.Linear(2, 20), "fc2": torch.nn.Linear(20, 20)}
    layers["out"] = torch.nn.Linear(20, 4)
    torch.save(torch.nn.ModuleDict(layers).state_dict(), path)
    info = inspect_model(path)
    assert (info.in_dim, info.out_dim) == (None, None)
    assert info.widths_line() == "2 inputs → 4 outputs (from the weights)"
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "input width: 2 (from the weights), output width: 4 (from the weights)" in out
    assert main(["inspect", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["in_from_weights"], data["out_from_weights"]) == (2, 4)


def test_an_embedding_first_says_no_input_width():
    from gradviz.core.modelio.info import LayerInfo, ModelInfo

    info = ModelInfo("f", "state_dict", 1, False, False, layers=(
        LayerInfo("emb", "tensors", {"weight": (100, 8), "extra": (1,)}),
        LayerInfo("head", "linear", {"weight": (3, 8)}),
    ))  # fmt: skip
    assert info.widths_line() == "? inputs → 3 outputs (from the weights)"


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
def test_a_pt2_convolution_is_typed_by_its_module_and_its_channels_are_read(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(144, 5)
    ).eval()
    path = tmp_path / "cnn.pt2"
    torch.export.save(torch.export.export(net, (torch.randn(2, 3, 8, 8),)), path)
    untrusted = inspect_model(path)  # from the weights' shapes: lower case, a guess
    assert [(layer.name, layer.kind) for layer in untrusted.layers] == [
        ("0", "conv2d"),
        ("3", "linear"),
    ]
    assert untrusted.widths_line() == "3 input channels → 5 outputs (from the weights)"
    trusted = inspect_model(path, trust=True)  # from the module the graph records
    assert [(layer.name, layer.kind) for layer in trusted.layers] == [
        ("0", "Conv2d"),
        ("3", "Linear"),
    ]


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("exported_batch", [1, 3])
def test_a_pt2_exported_for_one_batch_size_gives_exact_jacobians_at_any_batch(
    capsys, tmp_path, exported_batch
):
    import numpy as np

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    net = net.double().eval()
    example = torch.randn(exported_batch, 2, dtype=torch.float64)
    path = tmp_path / "fixed.pt2"
    torch.export.save(torch.export.export(net, (example,)), path)
    x = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    np.save(tmp_path / "x.npy", x.numpy())
    argv = ["jacobian", "--model", str(path), "--trust", "--inputs", f"file:{tmp_path / 'x.npy'}"]
    argv += ["--dtype", "float64", "--out", str(tmp_path / "j.npy"), "--json"]
    assert main(argv) == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert any(f"{exported_batch} samples at a time" in s for s in summary["assumptions"])
    expected = torch.func.vmap(torch.func.jacrev(lambda v: net(v[None])[0]))(x).detach()
    np.testing.assert_allclose(np.load(tmp_path / "j.npy"), expected.numpy(), atol=1e-6)
