"""PyTorch DistributedDataParallel with Gloo, the same models and global batches as scaling.cpp, on
N processes of this machine with one thread each.

usage: python3 scaling_torch.py lenet5|wide STEPS N       prints "<model> <N> <images/s>"
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


def model_of(name):
    if name == "lenet5":
        return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 120), nn.ReLU(), nn.Linear(120, 84),
                             nn.ReLU(), nn.Linear(84, 10))
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def worker(rank, world, name, steps, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29517", rank=rank, world_size=world)
    torch.manual_seed(rank)
    batch = (64 if name == "lenet5" else 256) // world
    x = torch.randn(batch, 1, 28, 28) if name == "lenet5" else torch.randn(batch, 784)
    y = torch.tensor([(i * 7 + rank) % 10 for i in range(batch)])
    model = nn.parallel.DistributedDataParallel(model_of(name))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(5):
        step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        out.put(steps * batch * world / seconds)
    dist.destroy_process_group()


def main():
    name, steps, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    mp.spawn(worker, args=(world, name, steps, out), nprocs=world, join=True)
    print(f"{name} {world} {out.get():.0f}")


if __name__ == "__main__":
    main()
