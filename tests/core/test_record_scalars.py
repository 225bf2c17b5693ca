"""Named scalars logged at every step (``rec.log(loss=..., lr=..., accuracy=...)``)."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
import torch

import gradviz
from gradviz.cli import main
from gradviz.core.common.errors import GradvizError
from gradviz.core.record import layout as L
from gradviz.core.record.reader import Reader
from gradviz.core.record.writer import SCALAR_CHUNK, RankWriter


def test_every_logged_step_keeps_its_scalars_with_nan_and_inf_as_logged(tmp_path):
    w = torch.zeros(3, requires_grad=True)
    steps = SCALAR_CHUNK + 45  # across a chunk boundary of the scalars' arrays
    lrs = [0.1 * 0.99**s for s in range(steps)]
    accuracies = [s / steps for s in range(steps)]
    accuracies[7], accuracies[8], accuracies[9] = math.nan, math.inf, -math.inf
    with gradviz.watch({"w": w}, tmp_path / "run", every=50) as rec:
        for s in range(steps):
            w.grad = torch.ones(3)
            loss = torch.tensor(float(steps - s))  # a 0-d tensor, as a loss is
            rec.log(loss=loss, lr=lrs[s], accuracy=torch.tensor(accuracies[s]))
    stream = Reader(tmp_path / "run").rank(0)
    # Gradients at every 50th step; the scalars at every step.
    assert list(stream.step_numbers()) == list(range(0, steps, 50))
    assert stream.scalar_names() == ["loss", "lr", "accuracy"]
    lr = stream.scalar("lr")
    np.testing.assert_array_equal(lr.steps, np.arange(steps))
    np.testing.assert_array_equal(lr.values, lrs)
    np.testing.assert_array_equal(stream.scalar("accuracy").values, np.float32(accuracies))
    np.testing.assert_array_equal(stream.scalar("loss").values, np.arange(steps, 0, -1))


def test_scalars_in_optimizer_mode_carry_the_optimizer_steps_numbers(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    with gradviz.watch(model, tmp_path / "run", optimizer=opt, every=3) as rec:
        for _ in range(6):
            opt.zero_grad()
            loss = model(torch.ones(4, 2)).pow(2).mean()
            loss.backward()
            opt.step()
            rec.log(loss=loss, lr=sched.get_last_lr()[0])
            sched.step()
    stream = Reader(tmp_path / "run").rank(0)
    lr = stream.scalar("lr")
    assert list(lr.steps) == [0, 1, 2, 3, 4, 5]
    np.testing.assert_allclose(lr.values, [0.1, 0.1, 0.05, 0.05, 0.025, 0.025])
    # The recorded steps' loss is the loss logged at that step.
    losses = stream.scalar("loss")
    np.testing.assert_array_equal(stream.losses(), losses.values[stream.step_numbers()])


def test_inspect_json_names_the_scalars(tmp_path, capsys):
    w = torch.zeros(2, requires_grad=True)
    with gradviz.watch({"w": w}, tmp_path / "run", every=1) as rec:
        w.grad = torch.ones(2)
        rec.log(loss=1.0, **{"train/accuracy": 0.5})
    assert main(["inspect", str(tmp_path / "run")]) == 0
    assert "scalars: loss, train/accuracy" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "run"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["scalars"] == ["loss", "train/accuracy"]
    assert Reader(tmp_path / "run").rank(0).scalar("train/accuracy").values.tolist() == [0.5]


def test_a_recording_from_before_scalars_still_reads_its_loss(tmp_path):
    """Recordings written before scalars had no ``scalars`` entry: their recorded losses
    are their one scalar."""
    writer = RankWriter(tmp_path / "old", source="watch", tensors=["w"])
    rows = np.zeros((1, L.ROW_WIDTH))
    writer.append_many([(0, 2.5, rows, None, None), (10, 1.5, rows, None, None)])
    del writer.meta["scalars"]
    writer.close()
    reader = Reader(tmp_path / "old")
    stream = reader.rank(0)
    assert stream.scalar_names() == ["loss"] and reader.describe()["scalars"] == ["loss"]
    loss = stream.scalar("loss")
    assert loss.steps.tolist() == [0, 10] and loss.values.tolist() == [2.5, 1.5]
    with pytest.raises(GradvizError, match="No scalar 'lr'.*holds: loss"):
        stream.scalar("lr")


def test_a_scalar_that_is_not_a_number_is_refused_in_one_sentence(tmp_path):
    w = torch.zeros(2, requires_grad=True)
    with gradviz.watch({"w": w}, tmp_path / "run") as rec:
        w.grad = torch.ones(2)
        with pytest.raises(GradvizError, match=r"rec.log\(acc=...\) takes a number.*\(3,\)"):
            rec.log(acc=torch.ones(3))
        with pytest.raises(GradvizError, match=r"rec.log\(tag=...\).*not str"):
            rec.log(tag="x")


def test_scalars_no_further_step_follows_reach_the_disk_while_the_recorder_is_open(tmp_path):
    w = torch.zeros(2, requires_grad=True)
    rec = gradviz.watch({"w": w}, tmp_path / "run", every=100)
    for s in range(3):  # fewer steps than a flush of the buffer; only step 0 is recorded
        w.grad = torch.ones(2)
        rec.log(loss=float(s), lr=0.5)
    reader = Reader(tmp_path / "run")
    deadline = time.monotonic() + 60  # generous for a busy machine; ends once they are there
    while (
        time.monotonic() < deadline
        and reader.rank(0).meta["scalars"].get("lr", {}).get("count") != 3
    ):
        time.sleep(0.02)
        reader.refresh()
    stream = reader.rank(0)
    assert list(stream.scalar("lr").steps) == [0, 1, 2] and not stream.complete
    rec.close()


def test_add_scalars_gives_a_step_its_loss_after_the_gradients_were_recorded(tmp_path):
    """A trainer knows its loss only after the optimizer's step (the callbacks' case)."""
    w = torch.zeros(2, requires_grad=True)
    with gradviz.watch({"w": w}, tmp_path / "run", every=2) as rec:
        for step in range(4):
            w.grad = torch.ones(2)
            rec.log(step=step, lr=0.5)
            rec.add_scalars(step=step, loss=10.0 - step)
    stream = Reader(tmp_path / "run").rank(0)
    assert stream.scalar("loss").values.tolist() == [10.0, 9.0, 8.0, 7.0]
    assert stream.scalar("lr").steps.tolist() == [0, 1, 2, 3]
    # The recorded steps (0 and 2) carry the loss given to them afterwards.
    assert stream.step_numbers().tolist() == [0, 2] and stream.losses().tolist() == [10.0, 8.0]


def test_every_logged_step_records_when_it_was_logged_and_older_recordings_have_none(tmp_path):
    w = torch.zeros(2, requires_grad=True)
    before = time.time()
    with gradviz.watch({"w": w}, tmp_path / "run", every=4) as rec:
        for s in range(SCALAR_CHUNK + 3):  # across a chunk boundary of the times' array
            w.grad = torch.ones(2)
            rec.log(loss=float(s)) if s % 2 else rec.log()  # with and without scalars
    after = time.time()
    times = Reader(tmp_path / "run").rank(0).wall_times()
    np.testing.assert_array_equal(times.steps, np.arange(SCALAR_CHUNK + 3))
    assert before <= times.values[0] and times.values[-1] <= after
    assert (np.diff(times.values) >= 0).all()  # in the order they were logged
    # A recording written before wall times were recorded: none, not made-up ones.
    writer = RankWriter(tmp_path / "old", source="watch", tensors=["w"])
    writer.append_many([(0, 2.5, np.zeros((1, L.ROW_WIDTH)), None, None)])
    writer.close()
    assert Reader(tmp_path / "old").rank(0).wall_times() is None


def test_a_reader_refresh_sees_scalars_logged_between_recorded_steps(tmp_path):
    """A follower (the Runs page) re-reads when a scalar grows, though no step was recorded."""
    writer = RankWriter(tmp_path / "run", source="watch", tensors=["w"])
    writer.append_many([(0, 1.0, np.zeros((1, L.ROW_WIDTH)), None, None)])
    reader = Reader(tmp_path / "run")
    assert not reader.refresh()
    writer.append_scalars({"lr": np.array([[0.0, 0.1], [1.0, 0.05]])})
    assert reader.refresh()  # the recorded steps did not change; the scalar did
    assert reader.rank(0).scalar("lr").values.tolist() == [0.1, 0.05]
    assert not reader.refresh()


def test_a_recorded_step_reaches_the_writer_with_the_scalars_logged_up_to_it(tmp_path, monkeypatch):
    # One batch, so one metadata write (a millisecond or more of the writer's time); the
    # scalars were once handed over just before their step and often written by themselves.
    from gradviz.core.record.scalars import ScalarBuffer
    from gradviz.core.record.writer import BackgroundWriter, _Scalars

    monkeypatch.setattr(BackgroundWriter, "FLUSH_S", 0.0)  # each hand-over written as it comes
    flush = ScalarBuffer.flush

    def flush_and_let_the_writer_take_it(self):  # the race the scalars used to lose at once
        flush(self)
        deadline = time.monotonic() + 30
        while not self.writer._queue.empty() and time.monotonic() < deadline:
            time.sleep(0.001)

    monkeypatch.setattr(ScalarBuffer, "flush", flush_and_let_the_writer_take_it)
    batches = []
    write = BackgroundWriter._write
    monkeypatch.setattr(
        BackgroundWriter, "_write", lambda self, items: (batches.append(items), write(self, items))
    )
    w = torch.zeros(2, requires_grad=True)
    with gradviz.watch({"w": w}, tmp_path / "run", every=1) as rec:
        for s in range(6):
            w.grad = torch.full((2,), float(s))
            rec.log(loss=float(s), lr=0.1)
    for batch in batches:  # scalars never travel alone (nor cost a write of their own)
        if any(isinstance(item, _Scalars) for item in batch):
            assert any(isinstance(item, tuple) for item in batch)
    written = [item[0] for batch in batches for item in batch if isinstance(item, tuple)]
    assert written == list(range(6))
    stream = Reader(tmp_path / "run").rank(0)
    assert stream.meta["steps"] == 6 and list(stream.scalar("lr").steps) == list(range(6))
