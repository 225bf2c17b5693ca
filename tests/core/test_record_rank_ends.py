"""A rank whose records end early: the first bad rank and step are never claimed past its end.

Under DDP rank 1 goes NaN at step 150 and is killed with SIGKILL at step 152; its writer had
put only the steps up to 80 on disk. Rank 0's own gradients go NaN at step 151 (the weights
the all-reduced NaN of step 150 wrote). Read as they are, the streams name rank 0 at step
151; what is known is that rank 1's records end at step 80.

The fast tests write such rank streams directly; the slow ones are two gloo processes, rank 1
killed with SIGKILL.
"""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from gloo_ranks import run_two_ranks_to_their_end

from gradviz.cli import main
from gradviz.core.record import layout as L
from gradviz.core.record.rank_ends import RankEnd, known_sentence
from gradviz.core.record.reader import Reader
from gradviz.core.record.writer import RankWriter

NAN_STEP, KILL_STEP, EVERY = 150, 152, 10
TENSOR = "module.0.weight"
ISSUE_SENTENCE = "rank 1's records end at step 80; from step 81 on only rank 0 is known"


def rows(bad: bool) -> np.ndarray:
    """(1, ROW_WIDTH) statistics of one tensor: four zero entries, or one NaN too."""
    out = np.zeros((1, L.ROW_WIDTH))
    out[0, len(L.STAT_COLUMNS) + L.ZERO_BIN] = 4
    if bad:
        out[0, len(L.STAT_COLUMNS) + L.NAN_BIN] = 1
    return out


def write_rank(path, rank: int, last: int | None, bad_from: int | None, close: bool,
               local_first: int | None = None) -> None:  # fmt: skip
    """Rank ``rank``'s stream as a DDP watch writes it: every EVERY-th step and every bad one
    up to ``last`` (None: no step), NaN from ``bad_from``; ``local_first``: the step its own
    gradients went NaN (the communication hook's check)."""
    writer = RankWriter(path, source="watch", tensors=[TENSOR], rank=rank, world_size=2)
    writer.meta["comm_hook"] = "gradviz"
    writer.meta["local_first_nonfinite"] = None
    if local_first is not None:
        writer.meta["local_first_nonfinite"] = {
            "step": local_first, "tensor": TENSOR, "index": 0, "kind": "nan"
        }  # fmt: skip
    items = []
    for step in range(0 if last is None else last + 1):
        bad = bad_from is not None and step >= bad_from
        if step % EVERY == 0 or bad:
            first = {"step": step, "tensor": TENSOR, "index": 0, "kind": "nan"}
            items.append((step, 1.0, rows(bad), None, first if step == bad_from else None))
    if last is not None:
        writer.append_many(items)
    if close:
        writer.close()


def killed_run(path, rank1_last: int | None):
    """Rank 0 closed at step 152 (reduced NaN from 150, its own from 151); rank 1 killed,
    its records ending at ``rank1_last``."""
    write_rank(path, 0, KILL_STEP, NAN_STEP, close=True, local_first=NAN_STEP + 1)
    write_rank(path, 1, rank1_last, None, close=False)
    return path


def inspect(path, capsys, *flags) -> tuple[int, str]:
    code = main(["inspect", str(path), *flags])
    return code, capsys.readouterr().out


def test_rank_1_cut_off_at_step_80_claims_no_first_rank_nor_step(tmp_path, capsys):
    path = killed_run(tmp_path / "run", rank1_last=80)
    first = Reader(path).first_nonfinite()
    assert first["step"] is None and first["rank"] is None and first["ranks"] is None
    assert first["not_known"] == ISSUE_SENTENCE
    # What the ranks that are known show is kept, as such.
    assert first["seen"]["rank"] == 0 and first["seen"]["step"] == NAN_STEP + 1
    code, out = inspect(path, capsys, "--json")
    summary = json.loads(out)
    assert code == 1  # not 0: the recording cannot answer
    assert summary["complete"] is False and summary["damaged"] == []
    assert summary["first_nonfinite"]["step"] is None
    assert summary["first_nonfinite"]["not_known"] == ISSUE_SENTENCE
    assert summary["first_nonfinite"]["seen"]["step"] == NAN_STEP + 1
    assert summary["ranks_known"] == ISSUE_SENTENCE
    (short,) = summary["ranks_ending_early"]
    assert short["rank"] == 1 and short["last_step"] == 80 and short["complete"] is False
    assert "killed" in short["reason"]
    code, text = inspect(path, capsys)
    assert code == 1
    assert f"complete: no ({ISSUE_SENTENCE})" in text
    assert f"first non-finite gradient: not known: {ISSUE_SENTENCE}" in text
    assert "ends early: rank 1's records end at step 80" in text


def test_rank_1_killed_at_once_keeps_no_step_and_rank_0_is_not_named_first(tmp_path, capsys):
    path = killed_run(tmp_path / "run", rank1_last=None)
    first = Reader(path).first_nonfinite()
    assert first["rank"] is None and first["step"] is None
    sentence = "rank 1 recorded no step; from step 0 on only rank 0 is known"
    assert first["not_known"] == sentence
    code, text = inspect(path, capsys)
    assert code == 1 and f"not known: {sentence}" in text


def test_a_rank_without_any_folder_is_counted_from_the_world_size(tmp_path, capsys):
    path = tmp_path / "run"
    write_rank(path, 0, KILL_STEP, NAN_STEP, close=True, local_first=NAN_STEP + 1)
    summary = Reader(path).describe()
    assert summary["ranks"] == [0]  # the ranks that have a stream
    assert summary["first_nonfinite"]["not_known"].startswith("rank 1 has no readable records")
    assert summary["ranks_ending_early"][0]["rank"] == 1


def test_a_first_step_that_every_ranks_records_reach_is_still_claimed(tmp_path, capsys):
    path = tmp_path / "run"
    write_rank(path, 0, KILL_STEP, 40, close=True, local_first=40)
    write_rank(path, 1, 80, 40, close=False)
    summary = Reader(path).describe()
    first = summary["first_nonfinite"]
    assert first["step"] == 40 and first["rank"] == 0 and first["ranks"] == [0]
    assert "not_known" not in first
    # The recording is still not whole: rank 1's end is said.
    assert summary["complete"] is False and summary["ranks_known"] == ISSUE_SENTENCE
    code, text = inspect(path, capsys)
    assert code == 1 and "step 40, module.0.weight (rank 0)" in text


def test_none_seen_is_not_none_while_a_rank_s_records_end_early(tmp_path, capsys):
    path = tmp_path / "run"
    write_rank(path, 0, KILL_STEP, None, close=True)
    write_rank(path, 1, 80, None, close=False)
    first = Reader(path).first_nonfinite()
    assert first is not None and first["seen"] is None and first["not_known"] == ISSUE_SENTENCE
    code, text = inspect(path, capsys)
    assert "(on the ranks known there: none)" in text
    assert "\n  first non-finite gradient: none" not in text  # each rank's own line may say so


def test_ranks_that_reach_the_same_step_give_a_definite_answer_and_exit_0(tmp_path, capsys):
    path = tmp_path / "run"
    write_rank(path, 0, KILL_STEP, NAN_STEP, close=True, local_first=NAN_STEP + 1)
    write_rank(path, 1, KILL_STEP, NAN_STEP, close=True, local_first=NAN_STEP)
    summary = Reader(path).describe()
    assert summary["complete"] is True and summary["ranks_ending_early"] == []
    assert summary["ranks_known"] == ""
    first = summary["first_nonfinite"]
    assert (first["step"], first["rank"], first["ranks"]) == (NAN_STEP, 1, [1])
    assert inspect(path, capsys)[0] == 0


def test_several_short_ranks_say_which_are_known_from_which_step():
    ends = [RankEnd(0, 152, 20, True), RankEnd(1, 80, 9, False), RankEnd(2, 100, 11, False)]
    assert known_sentence(ends) == (
        "rank 1's records end at step 80; rank 2's records end at step 100; "
        "from step 81 on only ranks 0, 2 are known; from step 101 on only rank 0 is known"
    )


# ---- two gloo processes, rank 1 killed with SIGKILL ------------------------------------------

# argv: rank, init, path, KEPT (the last step rank 1's disk takes; -1: none).
KILLED_RANK = textwrap.dedent(
    """
    import os, signal, sys, threading, torch, torch.distributed as dist, gradviz
    from torch import nn
    from gradviz.core.record import writer as W
    rank, init, path, kept = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    if rank == 1:
        # Rank 1's disk stops taking writes after step `kept` (its steps wait in memory, as
        # behind a slow or full disk), so SIGKILL loses every later step. The kill waits until
        # the writer has stalled: a writer thread slowed by a busy machine keeps no fewer steps.
        original = W.RankWriter.append_many
        stalled_now = threading.Event()
        def stalled(self, items):
            on_disk = [item for item in items if item[0] <= kept]
            if on_disk:
                original(self, on_disk)
            if len(on_disk) < len(items):
                stalled_now.set()
                threading.Event().wait()
        W.RankWriter.append_many = stalled
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 4) + rank
    with gradviz.watch(model, path, every=EVERY) as rec:
        try:
            for step in range(KILL_STEP + 50):
                opt.zero_grad()
                loss = model(x).pow(2).mean()
                if step == NAN_STEP and rank == 1:
                    loss = loss * float("nan")
                loss.backward()
                rec.log(loss=loss)
                opt.step()
                if step == KILL_STEP and rank == 1:
                    stalled_now.wait(300)  # any stall comes within a flush
                    os.kill(os.getpid(), signal.SIGKILL)
        except RuntimeError:  # rank 1 is gone: rank 0's next all-reduce fails
            pass
    """
)
KILLED_RANK = (
    KILLED_RANK.replace("KILL_STEP", str(KILL_STEP))
    .replace("NAN_STEP", str(NAN_STEP))
    .replace("EVERY", str(EVERY))
)


def run_killed(tmp_path, kept: int) -> Reader:
    path = tmp_path / "run"
    codes, errors = run_two_ranks_to_their_end(
        KILLED_RANK, f"file://{tmp_path / 'init'}", str(path), str(kept)
    )
    assert codes == [0, -9], errors  # rank 0 ended by itself, rank 1 by SIGKILL
    return Reader(path)


@pytest.mark.slow
def test_gloo_rank_1_nan_then_sigkilled_with_records_to_step_80(tmp_path, capsys):
    reader = run_killed(tmp_path, kept=80)
    assert reader.rank(1).meta["last_step"] == 80 and not reader.rank(1).complete
    # What the streams hold as they are: rank 0's own gradients went NaN one step after
    # rank 1's (the all-reduced NaN reached its weights), and rank 1's NaN is not on disk.
    assert reader.rank(0).meta["local_first_nonfinite"]["step"] == NAN_STEP + 1
    first = reader.first_nonfinite()
    assert first["rank"] is None and first["step"] is None
    assert first["not_known"] == ISSUE_SENTENCE
    code, text = inspect(reader.path, capsys)
    assert code == 1 and f"first non-finite gradient: not known: {ISSUE_SENTENCE}" in text


@pytest.mark.slow
def test_gloo_rank_1_sigkilled_before_its_first_write_keeps_no_step(tmp_path, capsys):
    reader = run_killed(tmp_path, kept=-1)
    assert reader.rank(1).steps == 0
    first = reader.first_nonfinite()
    assert first["rank"] is None
    assert first["not_known"] == "rank 1 recorded no step; from step 0 on only rank 0 is known"
    code, out = inspect(reader.path, capsys, "--json")
    assert code == 1 and json.loads(out)["complete"] is False
