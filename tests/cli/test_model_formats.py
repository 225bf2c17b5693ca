"""Every format in the FORMATS table, from a small file of it written by torch (or gradviz):
recognised from its bytes, named in ``gradviz inspect --json`` with the table's name, trust
asked exactly where the table says it runs code, and offered by the app's Open dialogs."""

import fnmatch
import json

import pytest
import torch
from cli_runner import run_cli
from safetensors.torch import save_file

from gradviz.core.modelio import detect_format
from gradviz.core.modelio.formats import BY_NAME, FORMATS
from gradviz.core.nets.networks import NetworkSpec, save_network
from gradviz.gui.pages.models.model_class_dialog import WEIGHTS_FILTER
from gradviz.gui.pages.models.open_model import MODEL_FILTER

jit_deprecated = pytest.mark.filterwarnings(
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated:DeprecationWarning",
    r"ignore:`torch\.jit\.(script|trace|trace_method|save)` is deprecated:FutureWarning",
)


def _chain() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))


def _gradviz(path):
    spec = NetworkSpec.parse("2-3-1:tanh")
    save_network(path, spec, spec.build(seed=0))


def _safetensors(path):
    save_file({k: v.contiguous() for k, v in _chain().state_dict().items()}, str(path))


def _state_dict(path):
    torch.save(_chain().state_dict(), path)


def _pickled_module(path):
    torch.save(_chain(), path)


def _torchscript(path):
    torch.jit.save(torch.jit.script(_chain()), str(path))


def _pt2(path):
    torch.export.save(torch.export.export(_chain(), (torch.zeros(2, 2),)), str(path))


#: A writer of a small file per format; a format added to the table without one fails below.
WRITERS = {
    "gradviz": _gradviz,
    "safetensors": _safetensors,
    "state_dict": _state_dict,
    "pickled_module": _pickled_module,
    "torchscript": _torchscript,
    "pt2": _pt2,
}


def _offered(name: str, dialog_filter: str) -> bool:
    """Whether the dialog's first filter (not "All files") lists a pattern matching ``name``."""
    first = dialog_filter.split(";;")[0]
    patterns = first[first.index("(") + 1 : first.index(")")].split()
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)


def test_every_format_in_the_table_has_a_file_written_here():
    assert [entry.name for entry in FORMATS] == list(BY_NAME)
    assert set(WRITERS) == set(BY_NAME)


@jit_deprecated
@pytest.mark.parametrize("entry", FORMATS, ids=lambda entry: entry.name)
def test_a_file_of_each_format_is_recognised_named_and_offered(tmp_path, entry):
    path = tmp_path / f"model{entry.extensions[0]}"
    WRITERS[entry.name](path)
    assert detect_format(path.read_bytes()) in entry.containers

    result = run_cli("inspect", str(path), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["format"] == entry.name
    assert data["needs_trust"] == entry.runs_code

    for extension in entry.extensions:
        assert _offered(f"model{extension}", MODEL_FILTER), (extension, MODEL_FILTER)
        if entry.weights is not None:
            assert _offered(f"model{extension}", WEIGHTS_FILTER), (extension, WEIGHTS_FILTER)
    assert not _offered("model.npy", MODEL_FILTER)
