"""One rank of a DistributedDataParallel training run on the gloo backend, started by
torch.distributed.run (tests/python/test_ddp.py): 10 steps of SGD with momentum on a small
network with a BatchNorm buffer, each rank on its own data. `mode` is how the model is
compiled: eager, dynvm.compile(DDP(model)) or DDP(dynvm.compile(model)). Each rank saves
its parameters and buffers, and rank 0 dynvm's counters, under `out`. With
DYNVM_DDP_BACKEND=nccl each rank trains on its GPU instead (the GPU machine's run,
docs/gpu_machine.md)."""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

import dynvm


def main(mode, out):
    backend = os.environ.get("DYNVM_DDP_BACKEND", "gloo")
    dist.init_process_group(backend)
    try:
        train(mode, out, backend)
        # No rank tears its connections down while the other still uses them.
        dist.barrier()
    finally:
        # Also when training raised: a process that exits with the group alive aborts in
        # gloo's threads ("terminate called without an active exception"), which hides
        # the traceback behind a SIGABRT.
        dist.destroy_process_group()


def train(mode, out, backend):
    rank = dist.get_rank()
    device = "cpu"
    if backend == "nccl":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.GELU(), nn.Linear(32, 16),
                          nn.LayerNorm(16), nn.Tanh(), nn.Linear(16, 4)).to(device)
    if mode == "inner":
        ddp = nn.parallel.DistributedDataParallel(dynvm.compile(model), bucket_cap_mb=0.001)
        step_fn = ddp
    else:
        # Small buckets: the gradients are all-reduced in several buckets.
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
        step_fn = dynvm.compile(ddp) if mode == "outer" else ddp
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(100 + rank)
    for _ in range(10):
        x = torch.randn(6, 8, generator=data).to(device)
        loss = step_fn(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()},
               f"{out}/{mode}-{rank}.pt")
    if rank == 0:
        with open(f"{out}/{mode}-counters.json", "w") as f:
            json.dump(dict(dynvm.counters), f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
