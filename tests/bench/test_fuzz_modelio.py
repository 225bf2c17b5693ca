"""Fuzz the format sniffing and the loaders with damaged copies of real model files: whatever
the bytes, the only exception that may escape is GradvizError (bounded: a few hundred
examples per format, about a minute in all)."""

import io
import itertools
import pickle

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import inspect_model, load_model
from gradviz.core.nets.networks import NetworkSpec, save_network

pytestmark = pytest.mark.bench

# torch deprecates TorchScript (2.13: DeprecationWarning, 2.14: FutureWarning); these tests
# still need to write such files, as people have them.
jit_deprecated = pytest.mark.filterwarnings(
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated:DeprecationWarning",
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated:FutureWarning",
)


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))


def _saved(obj, **kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer, **kwargs)
    return buffer.getvalue()


class Seeds(dict):
    """The seed files' bytes by format, shown by their names: a failing example's report
    prints its arguments, and the bytes (some 50 kB) would bury the mutation that failed."""

    def __repr__(self) -> str:
        return f"Seeds({', '.join(sorted(self))})"


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    net = _net()
    spec = NetworkSpec.parse("2-4-3:tanh")
    model_file = tmp_path_factory.mktemp("seed") / "model.safetensors"
    save_network(model_file, spec, spec.build(seed=1))
    programs = {}
    with pytest.warns(DeprecationWarning):
        buffer = io.BytesIO()
        torch.jit.save(torch.jit.script(net), buffer)
    programs["torchscript"] = buffer.getvalue()
    buffer = io.BytesIO()
    torch.export.save(torch.export.export(net, (torch.zeros(2, 2),)), buffer)
    programs["pt2"] = buffer.getvalue()
    return Seeds(
        {
            "state_dict": _saved(net.state_dict()),
            "checkpoint": _saved({"model_state_dict": net.state_dict(), "epoch": 1}),
            "whole_module": _saved(net),
            "legacy_pickle": _saved(net.state_dict(), _use_new_zipfile_serialization=False),
            "plain_pickle": pickle.dumps({"0.weight": [[1.0, 2.0]]}, protocol=2),
            "safetensors": save({k: v.contiguous() for k, v in net.state_dict().items()}),
            "gradviz": model_file.read_bytes(),
            **programs,
        }
    )


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


_counter = itertools.count()

mutations = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(
        st.just("flip"),
        st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), min_size=1, max_size=8),
    ),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("append"), st.binary(min_size=1, max_size=64)),
)


def mutate(data: bytes, mutation) -> bytes:
    kind = mutation[0]
    if kind == "truncate":
        return data[: int(len(data) * mutation[1])]
    if kind == "flip":
        out = bytearray(data)
        for where, value in mutation[1]:
            out[min(int(where * len(out)), len(out) - 1)] = value
        return bytes(out)
    if kind == "insert":
        cut = int(len(data) * mutation[1])
        return data[:cut] + mutation[2] + data[cut:]
    return data + mutation[1]


def only_gradviz_errors(path):
    for call in (inspect_model, load_model):
        try:
            call(path)
        except GradvizError as exc:
            assert str(exc).strip(), "an error needs a sentence"


FORMATS = [
    "state_dict",
    "checkpoint",
    "whole_module",
    "legacy_pickle",
    "plain_pickle",
    "safetensors",
    "gradviz",
    "torchscript",
    "pt2",
]


@jit_deprecated
@pytest.mark.parametrize("name", FORMATS)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutation=mutations)
def test_damaged_model_files_raise_only_gradviz_errors(seeds, scratch, name, mutation):
    path = scratch / f"{name}-{next(_counter)}.pt"
    path.write_bytes(mutate(seeds[name], mutation))
    only_gradviz_errors(path)
    path.unlink()


@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=256))
def test_arbitrary_short_bytes_raise_only_gradviz_errors(scratch, data):
    path = scratch / f"bytes-{next(_counter)}.bin"
    path.write_bytes(data)
    only_gradviz_errors(path)
    path.unlink()
