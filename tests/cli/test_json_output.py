"""Every ``--json``: exactly one compact JSON document on one line of stdout, nothing else."""

from __future__ import annotations

import json

import pytest
import torch

from gradviz.cli import main


def json_only(capsys, *argv: str) -> dict:
    """Run ``gradviz argv``; stdout must be one line holding one JSON object."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.endswith("\n") and out.count("\n") == 1, out  # one line, nothing else
    document = json.loads(out)
    assert json.loads(out.strip().splitlines()[-1]) == document
    assert isinstance(document, dict)
    # Compact: no space after separators in the standard encoding of the same object.
    assert out.strip() == json.dumps(document, separators=(",", ":"))
    return document


@pytest.fixture
def nan_weights(tmp_path):
    """A state dict whose first weight holds a NaN (the command says so in words)."""
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 2))
    with torch.no_grad():
        net[0].weight[0, 0] = float("nan")
    path = tmp_path / "nan.pth"
    torch.save(net.state_dict(), path)
    return path


def test_fit_json_is_one_line(capsys):
    summary = json_only(capsys, "fit", "--steps", "3", "--n", "8", "--json")
    assert summary["steps"] == 3


def test_inspect_json_of_a_model_file_is_the_document_alone(capsys, nan_weights):
    info = json_only(capsys, "inspect", str(nan_weights), "--activation", "tanh", "--json")
    assert info["nonfinite_weights"] == ["0.weight"]


def test_inspect_json_of_a_recording_is_the_document_alone(capsys, tmp_path):
    run = tmp_path / "RUN"
    assert main(["fit", "--steps", "3", "--n", "8", "--record", str(run)]) == 0
    capsys.readouterr()
    assert json_only(capsys, "inspect", str(run), "--json")["kind"] == "recording"


def test_jacobian_json_of_nan_weights_is_standard_json_without_the_warning_line(
    capsys, nan_weights
):
    args = ["jacobian", "--model", str(nan_weights), "--activation", "tanh", "--batch", "4"]
    summary = json_only(capsys, *args, "--json")
    assert summary["nonfinite_weights"] == ["0.weight"]
    # The per-sample norms of a Jacobian through a NaN weight are NaN: null in JSON.
    summary = json_only(capsys, *args, "--output", "0", "--json")
    assert None in summary["norms"]
