"""Reference values for test_optimisers.cpp: two steps of each PyTorch optimiser.

Run by the tests through tests/torch_reference.hpp; by hand: /usr/bin/python3 torch_optimisers.py out.json
Parameters W {2, 3} and b {2} start at the literal values below (the test has the same) and take
two steps with gradients g1 then g2. Written, per optimiser: W and b flattened after each step, in
float64.
"""
import json
import sys

import torch

torch.set_default_dtype(torch.float64)

W0 = [[0.5, -1.2, 0.3], [2.0, 0.1, -0.7]]
b0 = [0.25, -0.5]
g1 = ([[0.3, -0.2, 0.1], [1.5, -0.4, 0.05]], [0.2, -0.1])
g2 = ([[-0.1, 0.4, 0.2], [0.7, 0.3, -0.6]], [0.05, 0.3])
results = {}


def run(name, make, before_step=lambda params: None):
    W = torch.tensor(W0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    opt = make([W, b])
    results[name] = []
    for gW, gb in (g1, g2):
        W.grad = torch.tensor(gW)
        b.grad = torch.tensor(gb)
        before_step([W, b])
        opt.step()
        results[name].append(torch.cat([W.detach().reshape(-1), b.detach()]).tolist())


def main(dst):
    run("Descent(0.1)", lambda p: torch.optim.SGD(p, lr=0.1))
    run("Momentum(0.05, 0.8)", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8))
    run("Nesterov(0.05, 0.8)", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True))
    run("RMSProp(0.01, 0.9, 1e-8)", lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-8))
    run("Adam(0.01, 0.8, 0.99, 1e-8)", lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-8))
    run("AdamW(0.01, 0.8, 0.99, 0.1, 1e-8)",
        lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.8, 0.99), eps=1e-8, weight_decay=0.1))
    run("WeightDecay(0.01) + Momentum(0.05, 0.8)",
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, weight_decay=0.01))
    run("ClipGrad(0.5) + Descent(0.1)", lambda p: torch.optim.SGD(p, lr=0.1),
        lambda p: torch.nn.utils.clip_grad_value_(p, 0.5))
    run("ClipNorm(1.0) + Adam(0.01)", lambda p: torch.optim.Adam(p, lr=0.01),
        lambda p: torch.nn.utils.clip_grad_norm_(p, 1.0))
    json.dump(results, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[-1])
