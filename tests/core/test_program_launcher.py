"""The program launcher: trusted programs' processes are forked from one interpreter that
has imported torch, each within its own data limit, none holding another program's pipes;
how a process ended is still told, a launcher that died is replaced, and where there is no
launcher each program gets an interpreter of its own that answers the same."""

from __future__ import annotations

import os
import signal
import threading
import warnings

import numpy as np
import pytest
import torch

from gradviz.core.common.errors import GradvizError
from gradviz.core.modelio import inspect_model, program_launcher, program_process
from gradviz.core.modelio.program_launcher import Launcher
from gradviz.core.modelio.program_process import ProgramCancelled, ProgramProcess
from gradviz.core.settings.program_limits import GIB, ProgramLimits

pytestmark = pytest.mark.skipif(not Launcher.supported(), reason="the launcher needs Linux")


@pytest.fixture
def program_file(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    path = tmp_path / "net.pt"
    with warnings.catch_warnings():  # torch.jit's deprecation (Deprecation- or FutureWarning)
        warnings.simplefilter("ignore")
        torch.jit.trace(net, torch.zeros(1, 2)).save(str(path))
    return net, path


@pytest.fixture
def opened(program_file):
    """``opened(limits)``: a program's process with the test's file loaded, closed after."""
    made = []

    def open_with(limits: ProgramLimits) -> ProgramProcess:
        _, path = program_file
        process = ProgramProcess(limits, path.name)
        made.append(process)
        process.request("open", "torchscript", path.read_bytes(), inspect_model(str(path)))
        return process

    yield open_with
    for process in made:
        process.close()


def _answers_like_the_module(process: ProgramProcess, net, rows: int) -> None:
    x = np.random.default_rng(rows).standard_normal((rows, 2)).astype(np.float32)
    expected = net(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(process.request("forward", x), expected, rtol=1e-6)


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def _data_limit(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as limits:
        line = next(line for line in limits if line.startswith("Max data size"))
    return int(line.split()[3])


def _pipes(pid: int) -> set[str]:
    """The pipes a process holds open, as the kernel names them (``pipe:[inode]``)."""
    names = (os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
    return {name for name in names if name.startswith("pipe:")}


def test_programs_are_forked_by_one_launcher_each_with_its_own_limit(program_file, opened):
    net, _ = program_file
    first = opened(ProgramLimits(memory_limit=1.0))
    second = opened(ProgramLimits(memory_limit=2.5))
    launcher = Launcher.shared()
    assert first._child.pid != second._child.pid
    assert _parent(first._child.pid) == _parent(second._child.pid) == launcher._process.pid
    assert _data_limit(first._child.pid) == 1 * GIB
    assert _data_limit(second._child.pid) == int(2.5 * GIB)
    _answers_like_the_module(first, net, 4)
    _answers_like_the_module(second, net, 4)


def test_a_program_holds_no_pipe_of_another_program(opened):
    first, second = opened(ProgramLimits()), opened(ProgramLimits())
    theirs = _pipes(first._child.pid)
    assert len(theirs) == 2  # its own request and reply ends, nothing else
    assert not theirs & _pipes(second._child.pid)


def test_a_program_killed_from_outside_is_told_with_its_signal(opened):
    process = opened(ProgramLimits())
    os.kill(process._child.pid, signal.SIGKILL)
    with pytest.raises(GradvizError) as caught:
        process.request("forward", np.zeros((1, 2), np.float32))
    assert str(caught.value) == (
        "The process running the program in net.pt ended by signal 9 before it answered."
    )


def test_a_launcher_that_died_is_replaced_by_the_next_open(program_file, opened):
    net, _ = program_file
    before = Launcher.shared()
    before._process.kill()
    before._process.wait()
    cancel = threading.Event()
    cancel.set()  # Cancel while the new launcher starts: seen without waiting for it
    with pytest.raises(ProgramCancelled, match="cancelled before its process started"):
        opened(ProgramLimits(cancel=cancel))
    assert Launcher.shared() is not before and not Launcher.shared()._ready
    process = opened(ProgramLimits())  # the same new launcher serves the next open
    _answers_like_the_module(process, net, 2)


def test_without_a_launcher_a_program_gets_an_interpreter_that_answers_the_same(
    program_file, opened, monkeypatch
):
    net, _ = program_file
    monkeypatch.setattr(program_launcher.Launcher, "supported", staticmethod(lambda: False))
    process = opened(ProgramLimits(memory_limit=1.0))
    assert isinstance(process._child, program_process._Interpreter)
    assert _parent(process._child.process.pid) == os.getpid()
    assert _data_limit(process._child.process.pid) == 1 * GIB
    _answers_like_the_module(process, net, 3)
