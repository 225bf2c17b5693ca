"""A DDP training loop under torchrun whose rank 1 alone goes NaN at step 5: the recording
names rank 1, although the all-reduce inside backward() gives every rank the same NaN.

    torchrun --nproc-per-node 2 resources/examples/ddp_torchrun.py run-ddp
    gradviz inspect run-ddp

gloo on the CPU (NCCL where every rank has a CUDA device). ``--nan-rank -1`` trains clean.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn

import gradviz


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="new recording directory (shared by the ranks)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--nan-rank", type=int, default=1, help="rank whose loss turns NaN")
    parser.add_argument("--nan-step", type=int, default=5)
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")  # torchrun's environment
    rank = dist.get_rank()
    device = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', 0)}" if cuda else "cpu")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    model = nn.parallel.DistributedDataParallel(model)  # watch checks each rank before reducing
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps)
    generator = torch.Generator().manual_seed(rank)  # each rank its own data
    with gradviz.watch(model, args.path, every=5) as rec:
        for step in range(args.steps):
            x = torch.randn(32, 16, generator=generator).to(device)
            y = x.sum(dim=1, keepdim=True)
            loss = nn.functional.mse_loss(model(x), y)
            if rank == args.nan_rank and step == args.nan_step:
                loss = loss * float("nan")  # e.g. one bad batch on one rank
            opt.zero_grad()
            loss.backward()
            rec.log(loss=loss, lr=schedule.get_last_lr()[0])
            opt.step()
            schedule.step()
    dist.barrier()  # every rank's recorder is closed: its stream is complete
    if rank == 0:
        first = gradviz.Reader(args.path).first_nonfinite()
        print(f"recorded {args.path}; first non-finite: {first}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
