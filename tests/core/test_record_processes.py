"""Recordings across processes: a killed writer, a reader following a writer, two DDP ranks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from gloo_ranks import run_two_ranks

from gradviz.core.record.reader import Reader, is_recording

REPO = Path(__file__).resolve().parents[2]
#: Generous: the machine may be busy; the waits end as soon as the condition holds.
TIMEOUT_S = 300

WRITER = textwrap.dedent(
    """
    import sys, time, torch, gradviz
    path, steps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    w = torch.zeros(50, requires_grad=True)
    rec = gradviz.watch({"w": w}, path, every=1)
    for step in range(steps):
        w.grad = torch.full((50,), float(step))
        rec.log(loss=float(step))
        time.sleep(pause)
    rec.close()
    """
)


def start_writer(path, steps: int, pause: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(steps), str(pause)], env=env
    )


def wait_for_steps(path, at_least: int, reader: Reader | None = None) -> Reader:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if reader is None and is_recording(path):
            reader = Reader(path)
        if reader is not None:
            reader.refresh()
            if reader.ranks and reader.rank(0).steps >= at_least:
                return reader
        time.sleep(0.05)
    raise AssertionError(f"the recording did not reach {at_least} steps")


def test_a_writer_killed_with_sigkill_leaves_a_recording_readable_to_its_last_step(tmp_path):
    path = tmp_path / "run"
    writer = start_writer(path, steps=10**6, pause=0.0)
    try:
        wait_for_steps(path, 5)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(TIMEOUT_S)
    reader = Reader(path)
    stream = reader.rank(0)
    summary = reader.describe()
    assert summary["complete"] is False and summary["steps"] >= 5
    # Every counted step is fully there: its number, loss and statistics.
    steps = stream.step_numbers()
    assert list(steps) == list(range(stream.steps))
    np.testing.assert_array_equal(stream.losses(), steps)
    np.testing.assert_allclose(stream.tensor("w").max_abs, steps)


@pytest.mark.slow
def test_a_reader_in_another_process_follows_a_growing_recording(tmp_path):
    path = tmp_path / "run"
    writer = start_writer(path, steps=12, pause=0.1)
    try:
        reader = wait_for_steps(path, 1)
        seen = [reader.rank(0).steps]
        while seen[-1] < 12:
            reader = wait_for_steps(path, seen[-1] + 1, reader)
            seen.append(reader.rank(0).steps)
        assert writer.wait(TIMEOUT_S) == 0
    finally:
        writer.kill()
    assert len(seen) >= 3  # saw the recording grow in several stages
    reader.refresh()
    assert reader.rank(0).complete and list(reader.rank(0).losses()) == list(range(12))


# One pair of processes records a DDP run, then an FSDP run (``fully_shard``), each into its
# own path, so the torch imports and the rendezvous are paid once.
DISTRIBUTED_RANK = textwrap.dedent(
    """
    import sys, torch, torch.distributed as dist, gradviz
    from torch import nn
    from torch.distributed.fsdp import fully_shard
    rank, init, folder = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    for wrap in ("ddp", "fsdp"):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
        if wrap == "ddp":
            model = nn.parallel.DistributedDataParallel(model)
        else:
            fully_shard(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(8, 4) + rank
        with gradviz.watch(model, f"{folder}/{wrap}", every=1) as rec:
            for step in range(3):
                opt.zero_grad()
                loss = model(x).pow(2).mean()
                loss.backward()
                rec.log(loss=loss)
                opt.step()
    dist.destroy_process_group()
    """
)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> dict[str, Reader]:
    """The DDP and the FSDP recordings of the same two gloo ranks."""
    folder = tmp_path_factory.mktemp("ranks")
    run_two_ranks(DISTRIBUTED_RANK, f"file://{folder / 'init'}", str(folder))
    return {wrap: Reader(folder / wrap) for wrap in ("ddp", "fsdp")}


@pytest.mark.slow
def test_a_two_process_gloo_ddp_run_records_both_ranks(two_ranks):
    reader = two_ranks["ddp"]
    summary = reader.describe()
    assert summary["ranks"] == [0, 1] and summary["complete"] and summary["steps"] == 3
    assert summary["tensors"] == [
        "module.0.weight",
        "module.0.bias",
        "module.1.weight",
        "module.1.bias",
    ]
    r0, r1 = reader.rank(0), reader.rank(1)
    assert r0.meta["world_size"] == r1.meta["world_size"] == 2
    # DDP averages gradients across ranks: both streams saw the same gradients, but each
    # rank its own loss (its own data).
    weight = "module.0.weight"
    np.testing.assert_allclose(r0.tensor(weight).grad_norm, r1.tensor(weight).grad_norm)
    assert not np.allclose(r0.losses(), r1.losses())


@pytest.mark.slow
def test_a_two_process_fsdp_run_records_each_ranks_shard(two_ranks):
    reader = two_ranks["fsdp"]
    assert reader.ranks == [0, 1] and reader.describe()["complete"]
    # Each rank records its own shard of the (8, 4) weight: together every entry, once.
    entries = [reader.rank(r).tensor("0.weight").counts[0].sum() for r in (0, 1)]
    assert entries == [16, 16]


@pytest.mark.slow
def test_a_script_that_never_closes_its_recorder_still_writes_every_step(tmp_path):
    script = WRITER.replace("rec.close()", "")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "run"), "7", "0"],
        env=env,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0
    stream = Reader(tmp_path / "run").rank(0)
    assert stream.steps == 7 and stream.complete


ENDINGS = textwrap.dedent(
    """
    import sys, time, torch, gradviz
    path, ending = sys.argv[1], sys.argv[2]

    def train():  # the recorder is local: nothing closes it but gradviz itself
        model = torch.nn.Linear(3, 2)
        rec = gradviz.watch(model, path, every=1)
        for step in range(5):
            model.zero_grad()
            loss = model(torch.ones(4, 3)).pow(2).mean()
            loss.backward()
            rec.log(loss=loss, lr=0.1)
            with torch.no_grad():  # SGD by hand: a torch.optim optimizer imports dynamo (2-3 s)
                for p in model.parameters():
                    p -= 0.1 * p.grad
        rec.add_scalars(accuracy=0.75)  # a number no further step follows: it waits in memory
        return None if ending == "return" else rec

    kept = train()
    print("logged", flush=True)
    if ending == "raise":
        raise RuntimeError("the training script failed")
    if ending in ("wait", "sigterm", "sigint"):
        # Short sleeps, as a training loop runs Python between its steps: a signal can reach
        # any thread (torch's, zarr's), and only the main thread runs Python's handler, when
        # it next wakes. One long sleep would leave it unnoticed until the sleep ends.
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            time.sleep(0.05)
    """
).replace("TIMEOUT", str(TIMEOUT_S))


def start_ending(path, ending: str) -> subprocess.Popen:
    """A script that logs 5 steps of a local recorder (loss, lr, then one accuracy for the
    last step), prints 'logged', then ends so."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", ENDINGS, str(path), ending],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_signals_as_a_terminal_gives_them,
    )
    assert child.stdout.readline().strip() == "logged"
    return child


def _signals_as_a_terminal_gives_them() -> None:
    """In the child before it starts: SIGINT and SIGTERM with their default actions and
    unblocked. An ignored or blocked signal is inherited across exec: a test run started
    as a background job of a non-interactive shell (``pytest ... &``, as CI scripts do) has
    SIGINT ignored, and a Python started so never raises KeyboardInterrupt."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def ended_with(child: subprocess.Popen) -> int:
    """Wait for ``child`` (its pipes read and closed); its exit status. One that does not
    end is killed, and the failure says what it wrote."""
    try:
        _, child.stderr_text = child.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        _, err = child.communicate()
        message = f"the child did not end within {TIMEOUT_S} s; stderr: {err!r}"
        raise AssertionError(message) from None
    return child.returncode


def assert_every_step_kept(path, *ended: str) -> None:
    stream = Reader(path).rank(0)
    assert list(stream.step_numbers()) == [0, 1, 2, 3, 4]
    assert stream.complete and stream.meta["ended"] in ended
    assert np.isfinite(stream.losses()).all()
    assert_every_scalar_kept(stream)


def assert_every_scalar_kept(stream) -> None:
    """The scalars of every step, the last step's late one too (buffered, not yet handed
    to the writer, when the script ended)."""
    assert list(stream.scalar("lr").steps) == [0, 1, 2, 3, 4]
    assert list(stream.scalar("loss").steps) == [0, 1, 2, 3, 4]
    accuracy = stream.scalar("accuracy")
    assert list(accuracy.steps) == [4] and list(accuracy.values) == [0.75]


def test_a_recorder_left_open_by_a_returning_function_keeps_every_step(tmp_path):
    child = start_ending(tmp_path / "run", "return")
    assert ended_with(child) == 0
    # Closed when the collector drops the recorder, or at exit if it never does.
    assert_every_step_kept(tmp_path / "run", "exit", "collected")


@pytest.mark.slow  # fast case, in this process: test_record_scalars.py's "no further step"
def test_the_last_logged_step_reaches_the_disk_with_no_further_log_or_close(tmp_path):
    child = start_ending(tmp_path / "run", "wait")
    try:
        reader = wait_for_steps(tmp_path / "run", 5)
        deadline = time.monotonic() + TIMEOUT_S
        while "accuracy" not in reader.rank(0).scalar_names() and time.monotonic() < deadline:
            time.sleep(0.05)
            reader.refresh()
        assert child.poll() is None  # still running: nothing closed the recorder
        assert_every_scalar_kept(reader.rank(0))
    finally:
        child.kill()
        ended_with(child)


def test_an_uncaught_exception_closes_the_recording_with_every_step(tmp_path):
    child = start_ending(tmp_path / "run", "raise")
    assert ended_with(child) == 1
    assert "the training script failed" in child.stderr_text
    assert_every_step_kept(tmp_path / "run", "exception")


def test_sigterm_closes_the_recording_and_the_process_still_dies_of_sigterm(tmp_path):
    child = start_ending(tmp_path / "run", "sigterm")
    child.send_signal(signal.SIGTERM)
    assert ended_with(child) == -signal.SIGTERM
    assert_every_step_kept(tmp_path / "run", "SIGTERM")


@pytest.mark.slow
def test_ctrl_c_closes_the_recording_with_every_step(tmp_path):
    child = start_ending(tmp_path / "run", "sigint")
    child.send_signal(signal.SIGINT)
    # KeyboardInterrupt unwinds, exit hooks run, then Python dies of SIGINT as it should.
    assert ended_with(child) == -signal.SIGINT
    assert_every_step_kept(tmp_path / "run", "exception")
