"""Reference values for test_schedules.cpp: PyTorch's learning-rate schedulers, the learning rate in
effect at each of the first N steps (before step() is called the e-th time, e = 0 .. N-1: the
schedule's t = e + 1).

Run by the tests through tests/torch_reference.hpp; by hand: /usr/bin/python3 torch_schedules.py out.json
Each scheduler drives SGD on one parameter with base learning rate `lr`; the arguments are the
test's (same names there).
"""
import json
import sys

import torch

N = 40
results = {}


def run(name, lr, make):
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=lr)
    sched = make(opt)
    values = []
    for _ in range(N):
        values.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    results[name] = values


S = torch.optim.lr_scheduler
run("StepLR", 0.1, lambda o: S.StepLR(o, step_size=3, gamma=0.5))
run("MultiStepLR", 1.0, lambda o: S.MultiStepLR(o, milestones=[2, 5, 7], gamma=0.8))
run("ExponentialLR", 0.1, lambda o: S.ExponentialLR(o, gamma=0.9))
run("PolynomialLR", 0.1, lambda o: S.PolynomialLR(o, total_iters=N, power=2.0))
run("CosineAnnealingLR", 0.1, lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.01))
run("CosineAnnealingWarmRestarts", 0.1, lambda o: S.CosineAnnealingWarmRestarts(o, T_0=7, eta_min=0.01))
for mode, name in (("triangular", "CyclicLR"), ("triangular2", "CyclicLR2"), ("exp_range", "CyclicLRExp")):
    run(name, 0.01, lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4, mode=mode, gamma=0.95,
                                          cycle_momentum=False))

with open(sys.argv[1], "w") as f:
    json.dump(results, f)
