"""A damaged recording: what is lost is named, never read as data (and never a step -2**63)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
import zarr

import gradviz
from gradviz.cli import main
from gradviz.core.common.errors import GradvizError
from gradviz.core.record import layout as L
from gradviz.core.record.reader import Reader
from gradviz.core.record.writer import STEP_CHUNK

STEPS = 3 * STEP_CHUNK  # three chunks of index and stats


@pytest.fixture
def recording(tmp_path):
    """48 steps of one watched tensor, gradient = step number; NaN from step 40."""
    path = tmp_path / "run"
    x = torch.zeros(6, requires_grad=True)
    with gradviz.watch({"x": x}, path, every=1) as rec:
        for step in range(STEPS):
            x.grad = torch.full((6,), float(step) if step < 40 else float("nan"))
            rec.log(loss=float(step))
    return path


def chunk(path, array: str, k: int):
    """The file of the k-th chunk of ``index`` or ``stats`` of rank 0."""
    tail = "/".join(["0"] * (2 if array == "stats" else 1))
    return path / "rank0" / array / "c" / str(k) / tail


def test_a_whole_recording_has_no_damage_and_per_rank_numbers(recording):
    summary = Reader(recording).describe()
    assert summary["damaged"] == [] and summary["complete"]
    assert summary["per_rank"] == [
        {
            "rank": 0,
            "steps": STEPS,
            "last_step": STEPS - 1,
            "complete": True,
            "first_nonfinite": {"step": 40, "tensor": "x", "index": 0, "kind": "nan"},
        }
    ]


def test_a_deleted_stats_chunk_is_named_and_its_steps_flagged_not_drawn_as_finite(recording):
    chunk(recording, "stats", 1).unlink()
    reader = Reader(recording)
    summary = reader.describe()
    assert summary["complete"] is False
    assert summary["damaged"] == [
        {
            "rank": 0,
            "what": "stats",
            "missing_steps": [[16, 31]],
            "reason": "chunk files of 'stats' are missing.",
        }
    ]
    series = reader.rank(0).tensor("x")
    lost = np.arange(STEPS)[series.missing]
    assert list(lost) == list(range(16, 32))
    assert list(series.steps) == list(range(STEPS))  # the steps exist, their numbers lost not
    assert series.counts[series.missing].sum() == 0  # no entry counted finite
    np.testing.assert_array_equal(series.max_abs[np.r_[0:16, 32:40]], np.r_[0:16, 32:40])


def test_a_deleted_index_chunk_leaves_its_steps_out_and_never_gives_a_negative_step(recording):
    chunk(recording, "index", 2).unlink()
    reader = Reader(recording)
    stream = reader.rank(0)
    assert list(stream.step_numbers()) == list(range(32))
    assert (stream.step_numbers() >= 0).all()
    assert len(stream.tensor("x").counts) == len(stream.losses()) == 32
    (damage,) = reader.describe()["damaged"]
    # Lost at the end: bounded by the last readable step and the metadata's last step.
    assert damage["what"] == "index" and damage["missing_steps"] == [[32, 47]]


def test_a_truncated_chunk_is_named_and_the_other_chunks_still_read(recording):
    with open(chunk(recording, "stats", 0), "r+b") as f:
        f.truncate(10)
    reader = Reader(recording)
    (damage,) = reader.describe()["damaged"]
    assert damage["what"] == "stats" and damage["missing_steps"] == [[0, 15]]
    assert "cannot be decoded" in damage["reason"]
    series = reader.rank(0).tensor("x")
    np.testing.assert_array_equal(series.max_abs[16:40], np.arange(16, 40))


def test_a_missing_array_folder_loses_every_step_of_it(recording):
    shutil.rmtree(recording / "rank0" / "stats")
    (damage,) = Reader(recording).describe()["damaged"]
    assert damage["missing_steps"] == [[0, STEPS - 1]]
    assert damage["reason"] == "the array 'stats' is missing."


def test_metadata_that_disagrees_with_the_arrays_is_damage(recording):
    group = zarr.open_group(recording / "rank0", mode="r+")
    meta = dict(group.attrs[L.MARKER])
    group.attrs[L.MARKER] = {**meta, "last_step": 99}
    (damage,) = Reader(recording).describe()["damaged"]
    assert damage["what"] == "metadata" and "99" in damage["reason"]


def test_inspect_of_a_damaged_recording_says_so_and_exits_1(recording, capsys):
    chunk(recording, "stats", 1).unlink()
    assert main(["inspect", str(recording)]) == 1
    out = capsys.readouterr().out
    assert "complete: no (damaged" in out and "steps 16-31 lost" in out
    assert "complete: yes" not in out
    assert main(["inspect", str(recording), "--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["complete"] is False and summary["damaged"][0]["missing_steps"] == [[16, 31]]


def test_inspect_of_an_unreadable_recording_exits_2_with_one_sentence(recording, capsys):
    (recording / "rank0" / "zarr.json").write_text("not json")
    assert main(["inspect", str(recording), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "cannot be read" in err


def test_a_deleted_scalar_chunk_is_named_and_never_read_as_steps(recording):
    (recording / "rank0" / "scalars" / "s0" / "c" / "0" / "0").unlink()  # the loss's one chunk
    reader = Reader(recording)
    summary = reader.describe()
    assert summary["damaged"] == [
        {
            "rank": 0,
            "what": "scalars/loss",
            "missing_steps": [[0, STEPS - 1]],
            "reason": "chunk files of the scalar 'loss' are missing.",
        }
    ]
    assert summary["complete"] is False
    loss = reader.rank(0).scalar("loss")
    assert len(loss.steps) == len(loss.values) == 0  # no step NaN, no step -2**63


def test_a_recording_with_no_rank_says_so_in_one_sentence(recording, capsys):
    shutil.rmtree(recording / "rank0")  # as seen in the moment before a writer's first rank
    with pytest.raises(GradvizError, match="holds no rank's steps") as raised:
        Reader(recording).rank(0)
    assert "ranks []" not in str(raised.value)
    assert main(["inspect", str(recording)]) == 0
    out = capsys.readouterr().out
    assert "ranks: none (its writer has only just started" in out and "tensors: none" in out
