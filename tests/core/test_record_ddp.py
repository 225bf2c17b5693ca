"""DDP with two gloo processes: the rank whose own gradients went non-finite first is named,
although the all-reduce inside backward() gives every rank the same NaN."""

from __future__ import annotations

import textwrap

import pytest
import torch
import torch.distributed as dist
from gloo_ranks import run_two_ranks
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import gradviz
from gradviz.core.record.reader import Reader

NAN_STEP = 5

# Each run is "PATH|BAD_RANKS|HOOK"; one pair of processes records them all in turn, so the
# torch imports and the rendezvous are paid once for the tests of this file.
RANK_SCRIPT = textwrap.dedent(
    """
    import sys, torch, torch.distributed as dist, gradviz
    from torch import nn
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    rank, init, runs = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    for run in runs:
        path, bad, hook = run.split("|")
        bad_ranks = {int(r) for r in bad.split(",")}
        torch.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(
            nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
        )
        if hook == "wrapped":  # a user's own hook, wrapped so gradviz still sees each rank
            model.register_comm_hook(None, gradviz.wrap_comm_hook(default_hooks.allreduce_hook))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(8, 4) + rank
        with gradviz.watch(model, path, every=2) as rec:
            for step in range(8):
                opt.zero_grad()
                loss = model(x).pow(2).mean()
                if step == NAN_STEP and rank in bad_ranks:
                    loss = loss * float("nan")
                loss.backward()
                rec.log(loss=loss)
                opt.step()
    dist.destroy_process_group()
    """
).replace("NAN_STEP", str(NAN_STEP))

RUNS = {"rank 1": ("1", "gradviz"), "both": ("0,1", "wrapped")}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Reader]:
    """Each run of RUNS recorded by the same two gloo ranks, by name."""
    folder = tmp_path_factory.mktemp("ddp")
    paths = {name: folder / name.replace(" ", "_") for name in RUNS}
    runs = [f"{paths[name]}|{bad}|{hook}" for name, (bad, hook) in RUNS.items()]
    run_two_ranks(RANK_SCRIPT, f"file://{folder / 'init'}", *runs)
    return {name: Reader(path) for name, path in paths.items()}


def test_nan_on_rank_1_only_names_rank_1_though_every_rank_reduced_nan(recorded):
    reader = recorded["rank 1"]
    # After the all-reduce both ranks hold NaN gradients at that step: ties went to rank 0.
    assert reader.rank(0).first_nonfinite["step"] == NAN_STEP
    assert reader.rank(1).first_nonfinite["step"] == NAN_STEP
    first = reader.first_nonfinite()
    assert first["step"] == NAN_STEP and first["rank"] == 1 and first["ranks"] == [1]
    # Every gradient is NaN: the first watched tensor, at its first entry.
    assert first["tensor"] == "module.0.weight" and first["kind"] == "nan"
    assert first["index"] == 0
    summary = reader.describe()
    assert summary["first_nonfinite"]["rank"] == 1 and summary["first_nonfinite"]["ranks"] == [1]
    assert reader.rank(1).meta["comm_hook"] == "gradviz"
    # Where it started, per rank: rank 1's NaN came from its loss; rank 0's own outputs and
    # the gradients reaching them stayed finite (its biases' gradients, averaged with rank
    # 1's, did not), so it names no origin.
    assert reader.rank(1).first_nonfinite["origin"]["module"] == ""
    assert "origin" not in reader.rank(0).first_nonfinite


def test_nan_on_both_ranks_lists_both_also_through_a_wrapped_user_hook(recorded):
    reader = recorded["both"]
    first = reader.first_nonfinite()
    assert first["step"] == NAN_STEP and first["rank"] == 0 and first["ranks"] == [0, 1]
    assert reader.rank(0).meta["comm_hook"] == "wrapped"


def test_a_users_own_unwrapped_comm_hook_is_said_in_a_warning(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'init'}", rank=0, world_size=1)
    try:
        model = nn.parallel.DistributedDataParallel(nn.Linear(3, 2))
        model.register_comm_hook(None, default_hooks.allreduce_hook)
        with pytest.warns(UserWarning, match="gradviz.wrap_comm_hook"):
            rec = gradviz.watch(model, tmp_path / "run", every=1)
        model(torch.randn(4, 3)).sum().backward()
        rec.log()
        rec.close()
        reader = Reader(tmp_path / "run")
        assert reader.rank(0).meta["comm_hook"] == "user"
        assert reader.rank(0).steps == 1 and reader.first_nonfinite() is None
    finally:
        dist.destroy_process_group()
