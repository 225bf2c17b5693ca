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

from gradviz.core.record.reader import Reader, is_recording

REPO = Path(__file__).resolve().parents[2]
#: Generous: the machine may be busy; the waits end as soon as the condition holds.
TIMEOUT_S = 90

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


DISTRIBUTED_RANK = textwrap.dedent(
    """
    import sys, torch, torch.distributed as dist, gradviz
    from torch import nn
    rank, init, path, wrap = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    if wrap == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
    else:
        from torch.distributed.fsdp import fully_shard
        fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4) + rank
    with gradviz.watch(model, path, every=1) as rec:
        for step in range(3):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            rec.log(loss=loss)
            opt.step()
    dist.destroy_process_group()
    """
)


def record_two_ranks(tmp_path, wrap: str) -> Reader:
    path, init = tmp_path / wrap, f"file://{tmp_path / 'init'}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", DISTRIBUTED_RANK, str(r), init, str(path), wrap], env=env
        )
        for r in (0, 1)
    ]
    assert [p.wait(TIMEOUT_S) for p in ranks] == [0, 0]
    return Reader(path)


def test_a_two_process_gloo_ddp_run_records_both_ranks(tmp_path):
    reader = record_two_ranks(tmp_path, "ddp")
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


def test_a_two_process_fsdp_run_records_each_ranks_shard(tmp_path):
    reader = record_two_ranks(tmp_path, "fsdp")
    assert reader.ranks == [0, 1] and reader.describe()["complete"]
    # Each rank records its own shard of the (8, 4) weight: together every entry, once.
    entries = [reader.rank(r).tensor("0.weight").counts[0].sum() for r in (0, 1)]
    assert entries == [16, 16]


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
