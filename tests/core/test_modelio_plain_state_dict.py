"""A plain state_dict is built from its declarations without torch's unpickler: the tensors
are those torch.load gives (values, dtypes, views, shared storages), anything else goes
through torch's reader as before, and weights holding NaN or Inf are still named."""

import io

import pytest
import torch

from gradviz.core.modelio import load_model
from gradviz.core.modelio.plain_state_dict import read_plain_state_dict
from gradviz.core.modelio.tensors import nonfinite_names


def saved(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def torch_loaded(data: bytes):
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def assert_same_tensors(ours, theirs):
    assert list(ours) == list(theirs)
    for key in theirs:
        a, b = ours[key], theirs[key]
        assert (a.dtype, a.shape, a.stride(), a.storage_offset()) == (
            b.dtype,
            b.shape,
            b.stride(),
            b.storage_offset(),
        ), key
        assert a.requires_grad == b.requires_grad, key
        assert torch.equal(a, b), key


def test_a_state_dict_reads_as_torch_load_reads_it():
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2, bias=False)
    )
    state = net.state_dict()
    state["half"] = torch.randn(4, 3).half()
    state["bfloat"] = torch.randn(2, 2).bfloat16()
    state["double"] = torch.randn(3).double()
    state["steps"] = torch.tensor(7)  # BatchNorm's num_batches_tracked: int64, 0-d
    state["flag"] = torch.tensor([True, False])
    state["empty"] = torch.empty(0, 3)
    data = saved(state)
    assert_same_tensors(read_plain_state_dict(data, "m.pt"), torch_loaded(data))


def test_views_and_shared_storages_stay_views_of_one_storage():
    base = torch.arange(24.0).reshape(4, 6)
    state = {
        "base": base,
        "transposed": base.t(),  # strides (1, 6)
        "slice": base[1:3, 2:5],  # offset 8, not contiguous
        "again": base,  # the same tensor under two names (the pickle's memo)
        "expanded": torch.tensor([1.5]).expand(3, 4),  # stride 0
    }
    data = saved(state)
    ours, theirs = read_plain_state_dict(data, "m.pt"), torch_loaded(data)
    assert_same_tensors(ours, theirs)
    assert ours["again"] is ours["base"]
    assert ours["transposed"].untyped_storage().data_ptr() == ours["base"].data_ptr()
    ours["base"][0, 0] = -1.0  # one storage, as torch.load gives it
    assert ours["transposed"][0, 0] == -1.0 and ours["again"][0, 0] == -1.0


@pytest.mark.parametrize(
    "obj",
    [
        {"epoch": 3, "state_dict": {"w": torch.ones(2)}},  # a checkpoint
        {"w": torch.ones(2), "step": 5},  # not tensors only
        [torch.ones(2)],
        torch.nn.Linear(2, 2),  # a whole module
        {"p": torch.nn.Parameter(torch.ones(2))},  # torch's parameter rebuilder
    ],
    ids=["checkpoint", "mixed", "list", "module", "parameter"],
)
def test_anything_but_a_plain_state_dict_is_left_to_torchs_reader(obj):
    assert read_plain_state_dict(saved(obj), "m.pt") is None


def test_a_storage_entry_that_does_not_match_its_declaration_is_left_to_torch():
    data = bytearray(saved({"w": torch.arange(4.0)}))
    stored = torch.arange(4.0).numpy().tobytes()
    start = bytes(data).index(stored)
    data[start : start + 4] = b"\x00\x00\xc0\x7f"  # NaN: same size, still read as stored
    assert torch.isnan(read_plain_state_dict(bytes(data), "m.pt")["w"][0])
    assert (
        read_plain_state_dict(bytes(data[: start + 8]), "m.pt") is None
    )  # cut: not a zip any more


def test_a_long_chain_read_this_way_computes_what_the_saved_network_computes(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        *[torch.nn.Linear(2, 2) if k % 2 == 0 else torch.nn.Tanh() for k in range(399)]
    ).double()
    path = tmp_path / "chain.pt"
    torch.save(net.state_dict(), path)
    loaded = load_model(path, activation="tanh")
    x = torch.randn(3, 2, dtype=torch.float64)
    torch.testing.assert_close(loaded.module(x), net(x), rtol=0, atol=0)


def test_nan_and_inf_weights_are_named_among_thousands_of_finite_ones():
    tensors = {f"{k}.weight": torch.randn(3, 2) for k in range(3000)}
    tensors["1234.weight"][1, 0] = float("nan")
    tensors["2999.weight"][0, 1] = float("-inf")
    tensors["7.weight"] = tensors["7.weight"].half()
    tensors["7.weight"][0, 0] = float("inf")  # float16 overflow, judged in float16
    tensors["big"] = torch.zeros(1 << 21)  # over a group's size: judged alone
    tensors["big"][-1] = float("nan")
    tensors["steps"] = torch.tensor(3)  # not floating point: never named
    assert nonfinite_names(tensors) == ("7.weight", "1234.weight", "2999.weight", "big")
