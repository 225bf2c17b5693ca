"""``gradviz inspect``: a readable summary, ``--json`` as the last line, exit 2 for bad files."""

import json
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_runner import run_cli

ROOT = Path(__file__).resolve().parents[2]


def run_gradviz(*args, env=None):
    """In this process, unless the test sets the environment (then a real process, so the
    variable reaches torch as a user's shell would pass it)."""
    if env is None:
        return run_cli(*args)
    return subprocess.run(
        [sys.executable, "-m", "gradviz", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, **env},
    )


@pytest.fixture
def net_x_state_dict(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(2, 20), torch.nn.Linear(20, 20), torch.nn.Linear(20, 4)
    )
    path = tmp_path / "net_x.pth"
    torch.save({"model_state_dict": net.state_dict(), "epoch": 9}, path)
    return path


def test_inspect_json_is_one_object_on_the_last_line(net_x_state_dict):
    result = run_gradviz("inspect", str(net_x_state_dict), "--json", "--activation", "tanh")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["format"] == "state_dict"
    assert data["runnable"] is True and data["needs_trust"] is False
    assert (data["in_dim"], data["out_dim"], data["parameters"]) == (2, 4, 564)
    assert data["classes"] == [] and data["nonfinite_weights"] == []
    assert data["spec"] == "2-20-20-4:tanh"
    assert [layer["shapes"]["weight"] for layer in data["layers"]] == [[20, 2], [20, 20], [4, 20]]
    assert any("'tanh'" in sentence for sentence in data["assumptions"])


def test_inspect_summary_is_readable(net_x_state_dict):
    result = run_gradviz("inspect", str(net_x_state_dict))
    assert result.returncode == 0
    assert "input width: 2, output width: 4" in result.stdout
    assert "network: 2-20-20-4" in result.stdout


# Seeded noise, not os.urandom: one file in 256 has "{" as its ninth byte and reads as a
# safetensors header (the second case), one in 16,000 starts like a pickle.
@pytest.mark.parametrize(
    ("brace", "said"),
    [(False, "not a model file"), (True, "not a valid safetensors file")],
)
def test_inspect_of_an_unreadable_file_exits_2_with_one_sentence(tmp_path, brace, said):
    noise = bytearray(random.Random(0).randbytes(4096))
    assert noise[:1] not in (b"P", b"\x80", b"\x93") and noise[8:9] != b"{"
    if brace:
        noise[8] = ord("{")
    path = tmp_path / "random.pt"
    path.write_bytes(bytes(noise))
    result = run_gradviz("inspect", str(path), "--json")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and said in result.stderr


class RunsCommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_inspect_never_runs_a_pickle_payload_even_when_the_environment_asks(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps(RunsCommand(marker), protocol=2))
    result = run_gradviz("inspect", str(path), env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert not marker.exists()


def test_inspect_of_a_program_without_trust_says_it_needs_trust(tmp_path):
    path = tmp_path / "program.pt2"
    torch.export.save(torch.export.export(torch.nn.Linear(2, 3), (torch.zeros(2, 2),)), path)
    result = run_gradviz("inspect", str(path), "--json")
    assert result.returncode == 0
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["format"] == "pt2" and data["needs_trust"] is True
    assert "--trust" in run_gradviz("inspect", str(path)).stdout  # the words: without --json
    trusted = run_gradviz("inspect", str(path), "--json", "--trust")
    data = json.loads(trusted.stdout.strip().splitlines()[-1])
    assert (data["in_dim"], data["out_dim"], data["parameters"]) == (2, 3, 9)


def run_in_process(capsys, *argv):
    from gradviz.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_jacobian_reads_a_whole_pickled_module_without_trust(capsys, tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    path = tmp_path / "whole.pt"
    torch.save(net, path)
    code, out, err = run_in_process(
        capsys, "jacobian", "--model", str(path), "--batch", "4", "--json"
    )
    assert code == 0, err
    data = json.loads(out.strip().splitlines()[-1])
    assert (data["batch"], data["in_dim"], data["out_dim"]) == (4, 3, 2)
    assert data["constant_across_batch"] is False  # tanh: J changes with the input


@pytest.mark.filterwarnings(
    r"ignore:`torch\.jit\.(script|save)` is deprecated:DeprecationWarning",
    r"ignore:`torch\.jit\.(script|save)` is deprecated:FutureWarning",
)
def test_jacobian_runs_torchscript_only_with_trust_and_a_known_width(capsys, tmp_path):
    path = tmp_path / "script.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 3)), path)
    code, out, err = run_in_process(capsys, "jacobian", "--model", str(path), "--batch", "4")
    assert code == 2 and "--trust" in err and len(err.strip().splitlines()) == 1
    code, out, err = run_in_process(
        capsys, "jacobian", "--model", str(path), "--batch", "4", "--trust"
    )
    assert code == 2 and "--in-dim" in err
    code, out, err = run_in_process(
        capsys,
        "jacobian",
        "--model",
        str(path),
        "--batch",
        "4",
        "--trust",
        "--in-dim",
        "2",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out.strip().splitlines()[-1])
    assert (data["in_dim"], data["out_dim"], data["constant_across_batch"]) == (2, 3, True)
    code, out, err = run_in_process(
        capsys, "jacobian", "--model", str(path), "--batch", "4", "--trust", "--in-dim", "5"
    )
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
