"""Reference values for test_optimisers.cpp's longer runs: 50 steps of each rule, in float64 and float32.

Run by the tests through tests/torch_reference.hpp; by hand: /usr/bin/python3 torch_optimiser_steps.py out.json
Parameters W {2, 3} and b {2} start at the values below (the test has the same) and take 50 steps,
the gradient of element i at step k (from 0) being ((7 k + 13 i) mod 17 - 8) / 8, exact in both
types, with zeros and sign changes for the rules that look at signs. Written, per rule and type
("Adagrad f32"): W and b flattened after each step.

PyTorch 1.13's optimisers where it has the rule. NAdam follows PyTorch 2 (1.13 counts mu_t twice in
the momentum's weight, a bug fixed since); AdaBelief, OAdam and Lion, which PyTorch lacks, follow their papers
(Optimisers.jl's AdaBelief and OAdam; Lion's paper), written here with the same tensor operations.
"""
import json
import sys

import torch

W0 = [[0.5, -1.2, 0.3], [2.0, 0.1, -0.7]]
b0 = [0.25, -0.5]
STEPS = 50


def gradient(k, n, offset):
    return [((7 * k + 13 * (offset + i)) % 17 - 8) / 8 for i in range(n)]


class NAdam2(torch.optim.Optimizer):
    """PyTorch 2's NAdam (momentum decay psi), single-tensor form."""

    def __init__(self, params, lr, betas, eps, momentum_decay):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, psi=momentum_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                s = self.state[p]
                if not s:
                    s.update(t=0, mu_product=1.0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                s["t"] += 1
                t = s["t"]
                c2 = 1 - beta2 ** t
                mu = beta1 * (1. - 0.5 * (0.96 ** (t * group["psi"])))
                mu_next = beta1 * (1. - 0.5 * (0.96 ** ((t + 1) * group["psi"])))
                s["mu_product"] *= mu
                s["m"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
                s["v"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                denom = s["v"].div(c2).sqrt().add_(group["eps"])
                p.addcdiv_(p.grad, denom, value=-group["lr"] * (1. - mu) / (1. - s["mu_product"]))
                p.addcdiv_(s["m"], denom, value=-group["lr"] * mu_next / (1. - s["mu_product"] * mu_next))


class AdaBelief(torch.optim.Optimizer):
    """m = b1 m + (1 - b1) g; s = b2 s + (1 - b2) (g - m)^2 + eps; p -= lr (m / c1) / (sqrt(s / c2) + eps)."""

    def __init__(self, params, lr, betas, eps):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    st.update(t=0, m=torch.zeros_like(p), s=torch.zeros_like(p))
                st["t"] += 1
                c1, c2 = 1 - beta1 ** st["t"], 1 - beta2 ** st["t"]
                st["m"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
                diff = p.grad - st["m"]
                st["s"].mul_(beta2).addcmul_(diff, diff, value=1 - beta2).add_(group["eps"])
                p.sub_(group["lr"] * (st["m"] / c1) / (st["s"].div(c2).sqrt() + group["eps"]))


class OAdam(torch.optim.Optimizer):
    """Optimistic Adam: d = lr (m / c1) / (sqrt(v / c2) + eps); p -= 2 d - d_prev."""

    def __init__(self, params, lr, betas, eps):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    st.update(t=0, m=torch.zeros_like(p), v=torch.zeros_like(p), d=torch.zeros_like(p))
                st["t"] += 1
                c1, c2 = 1 - beta1 ** st["t"], 1 - beta2 ** st["t"]
                st["m"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
                st["v"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                d = group["lr"] * (st["m"] / c1) / (st["v"].div(c2).sqrt() + group["eps"])
                p.sub_(2 * d - st["d"])
                st["d"] = d


class Lion(torch.optim.Optimizer):
    """p -= lr sign(b1 m + (1 - b1) g); m = b2 m + (1 - b2) g."""

    def __init__(self, params, lr, betas):
        super().__init__(params, dict(lr=lr, betas=betas))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                st = self.state[p]
                if not st:
                    st["m"] = torch.zeros_like(p)
                update = st["m"].mul(beta1).add_(p.grad, alpha=1 - beta1).sign_()
                p.sub_(group["lr"] * update)
                st["m"].mul_(beta2).add_(p.grad, alpha=1 - beta2)


def run(results, name, make, dtype):
    W = torch.tensor(W0, dtype=dtype, requires_grad=True)
    b = torch.tensor(b0, dtype=dtype, requires_grad=True)
    opt = make([W, b])
    steps = []
    for k in range(STEPS):
        W.grad = torch.tensor(gradient(k, 6, 0), dtype=dtype).reshape(2, 3)
        b.grad = torch.tensor(gradient(k, 2, 6), dtype=dtype)
        opt.step()
        steps.append([float(v) for v in torch.cat([W.detach().reshape(-1), b.detach()]).tolist()])
    results[name + (" f64" if dtype == torch.float64 else " f32")] = steps


def main(dst):
    rules = {
        "AMSGrad": lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-8, amsgrad=True),
        "OAdam": lambda p: OAdam(p, lr=0.01, betas=(0.5, 0.9), eps=1e-8),
        "AdaGrad": lambda p: torch.optim.Adagrad(p, lr=0.1, eps=1e-8),
        "AdaDelta": lambda p: torch.optim.Adadelta(p, lr=1.0, rho=0.9, eps=1e-6),
        "AdaMax": lambda p: torch.optim.Adamax(p, lr=0.01, betas=(0.8, 0.99), eps=1e-8),
        "NAdam": lambda p: NAdam2(p, lr=0.01, betas=(0.8, 0.99), eps=1e-8, momentum_decay=4e-3),
        "RAdam": lambda p: torch.optim.RAdam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-8),
        "AdaBelief": lambda p: AdaBelief(p, lr=0.01, betas=(0.8, 0.99), eps=1e-12),
        "Lion": lambda p: Lion(p, lr=0.01, betas=(0.8, 0.95)),
        "Rprop": lambda p: torch.optim.Rprop(p, lr=0.01, etas=(0.5, 1.2), step_sizes=(1e-4, 0.05)),
    }
    results = {}
    for name, make in rules.items():
        for dtype in (torch.float64, torch.float32):
            run(results, name, make, dtype)
    json.dump(results, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[-1])
