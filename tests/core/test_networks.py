"""NetworkSpec parsing and gradviz's model file (safetensors + spec metadata)."""

from __future__ import annotations

import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from gradviz.core.common.errors import GradvizError
from gradviz.core.nets.networks import (
    MAX_WIDTH,
    SPEC_METADATA_KEY,
    NetworkSpec,
    load_network,
    save_network,
)


# ---- parsing ---------------------------------------------------------------------------------
def test_text_form_builds_linear_layers_with_activation_after_each_hidden_layer():
    spec = NetworkSpec.parse("2-20-20-4:sigmoid")
    module = spec.build(seed=0)
    kinds = [type(layer).__name__ for layer in module]
    assert kinds == ["Linear", "Sigmoid", "Linear", "Sigmoid", "Linear"]
    assert (spec.in_dim, spec.out_dim) == (2, 4)
    assert spec.to_text() == "2-20-20-4:sigmoid"


def test_same_spec_and_seed_give_same_weights_and_other_seed_differs():
    spec = NetworkSpec.parse("2-20-4:tanh")
    a, b, c = spec.build(seed=3), spec.build(seed=3), spec.build(seed=4)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a[0].weight, c[0].weight)


def test_json_form_round_trips_and_allows_per_layer_activations():
    text = json.dumps(
        {
            "version": 1,
            "layers": [
                {"type": "linear", "in": 3, "out": 5},
                {"type": "relu"},
                {"type": "linear", "in": 5, "out": 5, "bias": False},
                {"type": "gelu"},
                {"type": "linear", "in": 5, "out": 1},
            ],
        }
    )
    spec = NetworkSpec.parse(text)
    assert spec.to_text() is None  # mixed activations and a bias-free layer have no text form
    assert NetworkSpec.parse(spec.to_json()) == spec
    assert spec.build()[2].bias is None


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("2-x-4", "'x'"),
        ("2-20-0", "'0'"),
        ("2-20-4:swish", "'swish'"),
        ("7", "'7'"),
        (
            '{"version": 1, "layers": [{"type": "linear", "in": 2, "out": 3}, {"type": "conv"}]}',
            "Layer 1 has unknown type 'conv'",
        ),
        ('{"version": 1, "layers": [{"type": "linear", "in": 2.5, "out": 3}]}', "Layer 0"),
        ('{"version": 1, "layers": [{"type": "linear", "in": 2, "out": 3, "bias": "no"}]}', "'no'"),
        ('{"version": 2, "layers": []}', "version 2"),
        ('{"version": 1, "layers": [', "not valid JSON"),
    ],
)
def test_parse_errors_name_the_offending_part(text, named):
    with pytest.raises(GradvizError, match=None) as info:
        NetworkSpec.parse(text)
    assert named in str(info.value)


# ---- per-layer activations in the text form ----------------------------------------------
def _kinds(spec: NetworkSpec) -> list[str]:
    return [type(layer).__name__ for layer in spec.build(seed=0)]


def test_an_activation_after_a_hidden_width_applies_to_that_layer_only():
    spec = NetworkSpec.parse("2-20:tanh-20:relu-4")
    assert _kinds(spec) == ["Linear", "Tanh", "Linear", "ReLU", "Linear"]
    assert spec.chain_activations() == ["tanh", "relu"]
    assert spec.to_text() == "2-20:tanh-20:relu-4"
    assert NetworkSpec.parse(spec.to_json()) == spec  # the JSON form holds the same network
    unnamed = NetworkSpec.parse("2-20:relu-20-4")  # the second hidden layer has none
    assert _kinds(unnamed) == ["Linear", "ReLU", "Linear", "Linear"]
    assert unnamed.to_text() == "2-20:relu-20-4"


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("2-20-20-4:sigmoid", ["Linear", "Sigmoid", "Linear", "Sigmoid", "Linear"]),
        ("8-64-3:tanh", ["Linear", "Tanh", "Linear"]),
        ("2-20-20-4", ["Linear", "Linear", "Linear"]),
        ("2-4:tanh", ["Linear"]),  # no hidden layer: nothing for the activation to follow
    ],
)
def test_a_trailing_activation_still_follows_every_hidden_layer(text, kinds):
    spec = NetworkSpec.parse(text)
    assert _kinds(spec) == kinds
    # Built by hand the old way: Linear layers with the activation between each pair.
    widths = [int(w) for w in text.partition(":")[0].split("-")]
    activation = text.partition(":")[2] or "identity"
    assert spec == NetworkSpec.from_widths(widths, activation)


def test_a_trailing_activation_fills_only_the_hidden_layers_that_name_none():
    spec = NetworkSpec.parse("2-20:relu-20-4:tanh")
    assert spec.chain_activations() == ["relu", "tanh"]
    assert spec.to_text() == "2-20:relu-20:tanh-4"  # written out where they differ
    assert NetworkSpec.parse("2-20:tanh-20:tanh-4").to_text() == "2-20-20-4:tanh"


def test_the_bundled_experiment_files_networks_parse_as_before():
    from pathlib import Path

    from gradviz.core.settings.experiment import load_experiment

    root = Path(__file__).resolve().parents[2] / "resources" / "experiments"
    nets = [load_experiment(path)[0].net for path in sorted(root.glob("*.json"))]
    assert "8-64-3:tanh" in nets
    spec = NetworkSpec.parse("8-64-3:tanh")
    assert _kinds(spec) == ["Linear", "Tanh", "Linear"] and spec.to_text() == "8-64-3:tanh"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("2:tanh-20-4", "after the input width 2"),
        ("2-20:swish-4", "'swish'"),
        ("2-x:tanh-4", "'x'"),
        ("2-20:-4", "''"),
    ],
)
def test_per_layer_activation_errors_name_the_offending_part(text, named):
    with pytest.raises(GradvizError) as info:
        NetworkSpec.parse(text)
    assert named in str(info.value)


def test_specs_that_are_not_one_activation_per_hidden_layer_have_no_chain():
    stacked = NetworkSpec.parse(
        json.dumps(
            {
                "version": 1,
                "layers": [
                    {"type": "linear", "in": 2, "out": 3},
                    {"type": "relu"},
                    {"type": "tanh"},
                    {"type": "linear", "in": 3, "out": 1},
                ],
            }
        )
    )
    assert stacked.chain_activations() is None and stacked.to_text() is None
    last = NetworkSpec.parse(
        '{"version": 1, "layers": [{"type": "linear", "in": 2, "out": 3}, {"type": "tanh"}]}'
    )
    assert last.chain_activations() is None and last.to_text() is None


def test_widths_that_do_not_chain_are_named():
    text = json.dumps(
        {
            "version": 1,
            "layers": [
                {"type": "linear", "in": 2, "out": 3},
                {"type": "linear", "in": 4, "out": 1},
            ],
        }
    )
    with pytest.raises(GradvizError, match="output width 3 .* input width 4"):
        NetworkSpec.parse(text)


# ---- model file ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_model_file_round_trips_spec_and_weights_exactly(tmp_path, dtype):
    spec = NetworkSpec.parse("3-16-16-2:softplus")
    module = spec.build(seed=11, dtype=dtype)
    with torch.no_grad():  # weights unlike any fresh initialisation
        module[0].weight.mul_(1.2345)
    path = tmp_path / "net.safetensors"
    save_network(path, spec, module)

    loaded_spec, loaded = load_network(path)
    assert loaded_spec == spec
    original, restored = module.state_dict(), loaded.state_dict()
    assert list(original) == list(restored)
    for name, tensor in original.items():
        assert restored[name].dtype == dtype
        assert torch.equal(restored[name], tensor), name
    x = torch.randn(5, 3, dtype=dtype)
    assert torch.equal(loaded(x), module(x))


def test_model_file_is_a_json_header_and_raw_tensor_bytes_with_no_pickle(tmp_path):
    spec = NetworkSpec.parse("2-20-20-4:tanh")
    path = tmp_path / "net.safetensors"
    save_network(path, spec, spec.build(seed=1))
    raw = path.read_bytes()

    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])  # the whole header is JSON
    assert json.loads(header.pop("__metadata__")[SPEC_METADATA_KEY]) == spec.to_dict()
    # Every other byte belongs to exactly one tensor's raw data: there is no room for a pickle.
    spans = sorted(tuple(entry["data_offsets"]) for entry in header.values())
    assert spans[0][0] == 0
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert 8 + header_len + spans[-1][1] == len(raw)
    assert set(header) == set(spec.state_shapes())
    assert not raw.startswith(b"PK\x03\x04")  # not a zip archive, as torch.save writes
    assert b".pkl" not in raw and b"\x80\x02" not in raw[: 8 + header_len]


def test_load_names_missing_extra_and_misshapen_tensors(tmp_path):
    spec = NetworkSpec.parse("2-3-1")
    meta = {SPEC_METADATA_KEY: spec.to_json()}
    good = {k: v.contiguous() for k, v in spec.build().state_dict().items()}

    missing = dict(good)
    del missing["1.bias"]
    save_file(missing, tmp_path / "missing.safetensors", metadata=meta)
    with pytest.raises(GradvizError, match=r"missing 1\.bias"):
        load_network(tmp_path / "missing.safetensors")

    extra = dict(good, stray=torch.zeros(2))
    save_file(extra, tmp_path / "extra.safetensors", metadata=meta)
    with pytest.raises(GradvizError, match="unexpected stray"):
        load_network(tmp_path / "extra.safetensors")

    misshapen = dict(good)
    misshapen["0.weight"] = torch.zeros(3, 5)
    save_file(misshapen, tmp_path / "shape.safetensors", metadata=meta)
    with pytest.raises(GradvizError, match=r"'0\.weight' has shape \[3, 5\] .* needs \[3, 2\]"):
        load_network(tmp_path / "shape.safetensors")


def test_load_rejects_integer_weights(tmp_path):
    spec = NetworkSpec.parse("2-1")
    tensors = {"0.weight": torch.zeros(1, 2, dtype=torch.int32), "0.bias": torch.zeros(1)}
    save_file(tensors, tmp_path / "int.safetensors", metadata={SPEC_METADATA_KEY: spec.to_json()})
    with pytest.raises(GradvizError, match="'0.weight' is int32"):
        load_network(tmp_path / "int.safetensors")


def test_load_rejects_absent_and_bad_spec_metadata(tmp_path):
    tensors = {"0.weight": torch.zeros(1, 2), "0.bias": torch.zeros(1)}
    save_file(tensors, tmp_path / "plain.safetensors")
    with pytest.raises(GradvizError, match="no 'gradviz.spec' metadata"):
        load_network(tmp_path / "plain.safetensors")

    save_file(tensors, tmp_path / "bad.safetensors", metadata={SPEC_METADATA_KEY: "{oops"})
    with pytest.raises(GradvizError, match="bad network spec .* not valid JSON"):
        load_network(tmp_path / "bad.safetensors")


def test_load_rejects_unreadable_and_missing_files(tmp_path):
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x80\x04\x95 this is not a safetensors file")
    with pytest.raises(GradvizError, match="Could not read .* as a safetensors model file"):
        load_network(junk)
    with pytest.raises(GradvizError, match="does not exist"):
        load_network(tmp_path / "absent.safetensors")


def test_save_refuses_a_module_that_does_not_match_its_spec(tmp_path):
    spec = NetworkSpec.parse("2-3-1")
    other = NetworkSpec.parse("2-4-1").build()
    with pytest.raises(GradvizError, match="has shape"):
        save_network(tmp_path / "x.safetensors", spec, other)
    assert not (tmp_path / "x.safetensors").exists()


def test_a_network_wider_than_a_typed_spec_takes_is_named_in_its_json_form():
    """A file's weights may be wider than the text form accepts (it catches typos): such a
    network is still described, as JSON, not refused while it is being named."""
    wide = NetworkSpec.from_widths([2, MAX_WIDTH + 1])
    assert json.loads(str(wide))["layers"][0] == {
        "type": "linear",
        "in": 2,
        "out": MAX_WIDTH + 1,
        "bias": True,
    }
    with pytest.raises(GradvizError, match="widths must be whole numbers"):
        NetworkSpec.parse(f"2-{MAX_WIDTH + 1}")
