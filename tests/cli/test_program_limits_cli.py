"""`jacobian --trust` within --time-limit and --memory-limit: past either, one sentence on
stderr and exit 2 (the program itself is stopped in its own process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_runner import run_cli

import gradviz.core.common.devices as devices
from gradviz.cli import main

ROOT = Path(__file__).resolve().parents[2]


class Forever(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = 1
        while steps > 0:  # 2**63 steps: never ends (the result is used: not dropped)
            steps = steps + 1
        return self.fc(x) * steps


class Greedy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + torch.ones([402653184]).sum()  # 1.5 GiB of float32


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("programs")
    with warnings.catch_warnings():  # torch.jit.script says it is deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)  # newer torch says FutureWarning
        torch.jit.script(Forever()).save(str(folder / "forever.pt"))
        torch.jit.script(Greedy()).save(str(folder / "greedy.pt"))
    return folder


RUN = ("--trust", "--in-dim", "2", "--batch", "2")


def test_jacobian_past_the_time_limit_says_so_and_exits_2(programs):
    done = run_cli("jacobian", "--model", str(programs / "forever.pt"), *RUN, "--time-limit", "2")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "gradviz jacobian: error: The program in forever.pt ran past the 2 s limit and was "
        "stopped (--time-limit).\n"
    )


def test_jacobian_past_the_memory_limit_says_so_and_exits_2(programs):
    done = run_cli("jacobian", "--model", str(programs / "greedy.pt"), *RUN, "--memory-limit", "1")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "gradviz jacobian: error: The program in greedy.pt asked for more than 1 GiB and was "
        "stopped (--memory-limit).\n"
    )


@pytest.mark.slow
def test_the_real_command_stops_the_program_without_a_traceback(programs):
    done = subprocess.run(
        [sys.executable, "-m", "gradviz", "jacobian", "--model", str(programs / "forever.pt")]
        + [*RUN, "--time-limit", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip().endswith("was stopped (--time-limit).")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_trusted_program_asked_onto_another_device_runs_on_the_cpu_and_says_so(
    tmp_path, monkeypatch, capsys
):
    """The program's process runs on the CPU: the summary names the CPU, never the device
    asked for, and says why."""
    path = tmp_path / "linear.pt"
    torch.manual_seed(0)
    net = torch.nn.Linear(2, 3).double()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)  # newer torch says FutureWarning
        torch.jit.script(net).save(str(path))
    # A machine with an accelerator, as the device resolver sees it.
    monkeypatch.setattr(devices, "resolve_device", lambda name: torch.device("meta"))
    out = tmp_path / "j.npy"
    code = main(["jacobian", "--model", str(path), *RUN, "--device", "cuda", "--dtype",
                 "float64", "--out", str(out), "--json"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and summary["device"] == "cpu"
    assert any("ran on the CPU" in s and "--device cuda" in s for s in summary["assumptions"])
    expected = net.weight.detach().numpy()
    assert np.allclose(np.load(out), np.broadcast_to(expected, (2, 3, 2)), atol=1e-12)
