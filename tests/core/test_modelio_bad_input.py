"""Bad model files: each one is a GradvizError with one sentence, and nothing in a file runs."""

import json
import os
import pickle
import struct
import subprocess

import pytest
import torch
from safetensors.torch import save

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import MAX_MODEL_BYTES, inspect_model, load_model
from gradviz.core.nets.jacobians import compute_jacobians

# torch deprecates TorchScript (2.13: DeprecationWarning, 2.14: FutureWarning); these tests
# still need to write such files, as people have them.
jit_deprecated = pytest.mark.filterwarnings(
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated:DeprecationWarning",
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated:FutureWarning",
)


def small_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(2, 6), torch.nn.Linear(6, 3))


def one_sentence(exc_info):
    text = str(exc_info.value)
    assert "\n" not in text and text.endswith(".")
    return text


class RunsCommand:
    """A pickle payload whose reduce would create ``marker`` (via os.system)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class RunsSubprocess(RunsCommand):
    """The same through subprocess.call, a module torch does not block by name."""

    def __reduce__(self):
        return (subprocess.call, (["touch", str(self.marker)],))


@pytest.fixture
def no_weights_only_default(monkeypatch):
    # The environment variable that flips torch.load's default to full unpickling.
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")


@pytest.mark.parametrize("payload", [RunsCommand, RunsSubprocess])
@pytest.mark.parametrize("writer", ["pickle", "torch.save"])
def test_pickle_whose_reduce_runs_a_command_never_runs(
    tmp_path, no_weights_only_default, payload, writer
):
    marker = tmp_path / "marker"
    path = tmp_path / "evil.pt"
    if writer == "pickle":
        path.write_bytes(pickle.dumps(payload(marker), protocol=2))
    else:
        torch.save({"w": payload(marker)}, path)
    for call in (inspect_model, load_model):
        with pytest.raises(GradvizError) as exc_info:
            call(path)
        one_sentence(exc_info)
    assert not marker.exists()


def test_empty_file_is_refused(tmp_path):
    path = tmp_path / "empty.pt"
    path.write_bytes(b"")
    with pytest.raises(GradvizError, match="empty") as exc_info:
        inspect_model(path)
    one_sentence(exc_info)


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9, 0.99])
def test_truncated_state_dict_is_refused(tmp_path, fraction):
    path = tmp_path / "net.pt"
    torch.save(small_net().state_dict(), path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(GradvizError) as exc_info:
        load_model(path)
    one_sentence(exc_info)


def test_random_bytes_named_pt_are_refused(tmp_path):
    path = tmp_path / "random.pt"
    path.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(GradvizError, match="not a model file") as exc_info:
        inspect_model(path)
    one_sentence(exc_info)


def test_numpy_array_file_is_refused_as_not_a_model(tmp_path):
    import numpy as np

    path = tmp_path / "array.pt"
    np.save(path.with_suffix(".npy"), np.zeros((3, 2)))
    path.with_suffix(".npy").rename(path)
    with pytest.raises(GradvizError, match="NumPy"):
        inspect_model(path)


def test_state_dict_with_mismatched_shapes_names_the_tensors(tmp_path):
    state = small_net().state_dict()
    state["1.weight"] = torch.zeros(3, 7)
    path = tmp_path / "mismatch.pt"
    torch.save(state, path)
    info = inspect_model(path)
    assert not info.runnable and "0.weight" in info.not_runnable_reason
    with pytest.raises(GradvizError, match=r"0\.weight.*1\.weight") as exc_info:
        load_model(path)
    one_sentence(exc_info)


def test_state_dict_with_a_bias_of_the_wrong_length_names_it(tmp_path):
    state = small_net().state_dict()
    state["0.bias"] = torch.zeros(5)
    path = tmp_path / "bias.pt"
    torch.save(state, path)
    with pytest.raises(GradvizError, match=r"0\.bias has shape \(5,\)"):
        load_model(path)


def test_state_dict_with_a_missing_weight_names_it(tmp_path):
    state = small_net().state_dict()
    del state["1.weight"]
    path = tmp_path / "missing.pt"
    torch.save(state, path)
    with pytest.raises(GradvizError, match=r"1\.bias has no matching 1\.weight") as exc_info:
        load_model(path)
    one_sentence(exc_info)


def safetensors_bytes(header, data):
    blob = json.dumps(header).encode()
    return struct.pack("<Q", len(blob)) + blob + data


def test_safetensors_with_absurd_header_length_is_refused(tmp_path):
    path = tmp_path / "absurd.safetensors"
    path.write_bytes(struct.pack("<Q", 2**60) + b'{"a": 1}')
    with pytest.raises(GradvizError, match="header claims") as exc_info:
        inspect_model(path)
    one_sentence(exc_info)


def test_safetensors_with_overlapping_offsets_is_refused(tmp_path):
    entry = {"dtype": "F32", "shape": [2, 2]}
    header = {
        "0.weight": {**entry, "data_offsets": [0, 16]},
        "1.weight": {**entry, "data_offsets": [8, 24]},
    }
    path = tmp_path / "overlap.safetensors"
    path.write_bytes(safetensors_bytes(header, bytes(24)))
    with pytest.raises(GradvizError, match="overlap") as exc_info:
        inspect_model(path)
    one_sentence(exc_info)


def test_safetensors_with_trailing_bytes_is_refused(tmp_path):
    path = tmp_path / "trailing.safetensors"
    path.write_bytes(save({"0.weight": torch.zeros(3, 2)}) + b"extra")
    with pytest.raises(GradvizError, match="trailing bytes") as exc_info:
        inspect_model(path)
    one_sentence(exc_info)


def test_truncated_safetensors_is_refused(tmp_path):
    path = tmp_path / "short.safetensors"
    path.write_bytes(save({"0.weight": torch.zeros(3, 2)})[:-4])
    with pytest.raises(GradvizError, match="truncated"):
        inspect_model(path)


def test_invalid_sparse_tensor_is_refused(tmp_path):
    bad = torch.sparse_coo_tensor(
        torch.tensor([[0, 9]]), torch.tensor([1.0, 2.0]), (3,), check_invariants=False
    )
    path = tmp_path / "sparse.pt"
    torch.save({"0.weight": bad}, path)
    with pytest.raises(GradvizError, match="sparse") as exc_info:
        inspect_model(path)
    one_sentence(exc_info)


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_valid_sparse_tensor_is_refused_as_not_dense(tmp_path, zip_format):
    path = tmp_path / "sparse_ok.pt"
    weights = {"0.weight": torch.eye(3).to_sparse()}
    torch.save(weights, path, _use_new_zipfile_serialization=zip_format)
    with pytest.raises(GradvizError, match="dense tensors only") as exc_info:
        inspect_model(path)
    assert "torch.sparse_coo" in str(exc_info.value)
    one_sentence(exc_info)


@jit_deprecated
def test_torchscript_fed_the_wrong_input_width_is_refused(tmp_path):
    path = tmp_path / "script.pt"
    torch.jit.save(torch.jit.script(small_net()), path)
    with pytest.raises(GradvizError, match=r"\(2, 3\)") as exc_info:
        load_model(path, trust=True, in_dim=3)
    one_sentence(exc_info)
    loaded = load_model(path, trust=True)  # width unknown until asked: checked when run
    with pytest.raises(GradvizError, match="failed on inputs of shape"):
        loaded.module(torch.zeros(4, 5))


class ReturnsTuple(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x), x


@jit_deprecated
def test_model_whose_output_is_not_a_tensor_is_refused(tmp_path):
    path = tmp_path / "tuple.pt"
    torch.jit.save(torch.jit.script(ReturnsTuple()), path)
    with pytest.raises(GradvizError, match="not a tensor") as exc_info:
        load_model(path, trust=True, in_dim=2)
    one_sentence(exc_info)


def test_rebuilt_model_rejects_the_wrong_input_width(tmp_path):
    path = tmp_path / "net.pt"
    torch.save(small_net().state_dict(), path)
    with pytest.raises(GradvizError, match="width 2, not 5"):
        load_model(path, in_dim=5)
    with pytest.raises(GradvizError, match=r"could not run on inputs of shape \(3, 5\)"):
        compute_jacobians(load_model(path).module, torch.zeros(3, 5))


def test_directory_is_refused(tmp_path):
    with pytest.raises(GradvizError, match="directory") as exc_info:
        inspect_model(tmp_path)
    one_sentence(exc_info)


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(GradvizError, match="does not exist"):
        inspect_model(tmp_path / "nope.pt")


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() == 0,
    reason="root reads files whatever their permission bits say",
)
def test_file_without_read_permission_is_refused(tmp_path):
    path = tmp_path / "locked.pt"
    torch.save(small_net().state_dict(), path)
    path.chmod(0)
    with pytest.raises(GradvizError, match="no read permission"):
        inspect_model(path)


def test_file_the_os_says_is_unreadable_is_refused(tmp_path, monkeypatch):
    # Runs as root too (where chmod 000 does not stop reads): the check asks os.access.
    path = tmp_path / "locked.pt"
    torch.save(small_net().state_dict(), path)
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
    with pytest.raises(GradvizError, match="no read permission"):
        inspect_model(path)


def test_file_over_the_size_limit_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.pt"
    with open(path, "wb") as file:
        file.truncate(MAX_MODEL_BYTES + 1)  # sparse: no disk used
    with pytest.raises(GradvizError, match="size limit of 1,024 MiB") as exc_info:
        inspect_model(path)
    one_sentence(exc_info)


def test_unknown_activation_is_refused(tmp_path):
    path = tmp_path / "net.pt"
    torch.save(small_net().state_dict(), path)
    with pytest.raises(GradvizError, match="Unknown activation 'swish'"):
        load_model(path, activation="swish")
