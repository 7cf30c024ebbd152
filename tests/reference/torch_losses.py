"""Reference values for test_losses.cpp, from PyTorch.

Run by the tests through tests/torch_reference.hpp; by hand: /usr/bin/python3 torch_losses.py out.json
The inputs are the literal numbers below (the test has the same). Written, for each loss: its value
with mean aggregation, with sum, and the gradient of the mean loss with respect to the prediction;
for huge logits, the value and gradient in float64 and the value in float32.
"""
import json
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

yhat = torch.tensor([[0.2, -1.3, 2.1], [1.7, 0.4, -0.6]])
y = torch.tensor([[0.5, -1.0, 0.0], [1.0, 2.0, -0.5]])
logits = torch.tensor([[1.5, -0.3, 0.8], [-2.0, 0.1, 3.2]])
labels = torch.tensor([2, 0])
p = torch.tensor([[0.2, 0.7, 0.1], [0.05, 0.25, 0.7]])
q = torch.tensor([[0.3, 0.3, 0.4], [0.0, 0.5, 0.5]])
binary = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
big = torch.tensor([[1e4, 0.0, -1e4], [-1e4, 1e4, 0.0]])
eps = 1.1920929e-7
results = {}


def show(name, f, x):
    x = x.clone().requires_grad_(True)
    mean = f(x, "mean")
    mean.backward()
    total = f(x.detach(), "sum")
    results[name] = {"mean": float(mean), "sum": float(total), "grad": x.grad.reshape(-1).tolist()}


def huge(name, f):
    x = big.clone().requires_grad_(True)
    value = f(x)
    value.backward()
    results[name] = {"value": float(value), "grad": x.grad.reshape(-1).tolist(), "value_f32": float(f(big.float()))}


def main(dst):
    show("mse", lambda x, r: F.mse_loss(x, y, reduction=r), yhat)
    show("mae", lambda x, r: F.l1_loss(x, y, reduction=r), yhat)
    show("huber_delta_0.5", lambda x, r: F.huber_loss(x, y, reduction=r, delta=0.5), yhat)
    # Class losses: PyTorch's mean divides by the number of samples, as fluxion's mean over samples.
    show("logitcrossentropy", lambda x, r: F.cross_entropy(x, labels, reduction=r), logits)
    show("crossentropy", lambda x, r: F.nll_loss(torch.log(x + eps), labels, reduction=r), p)
    # PyTorch's binary_cross_entropy clamps the log at -100 instead; Flux's form, with epsilon:
    show("binarycrossentropy",
         lambda x, r: getattr(torch, r)(-(binary * torch.log(x + eps) + (1 - binary) * torch.log(1 - x + eps))), p)
    show("logitbinarycrossentropy", lambda x, r: F.binary_cross_entropy_with_logits(x, binary, reduction=r), logits)
    # KL(q || p) per sample: sum q log q - q log p; PyTorch's kl_div takes log p.
    show("kldivergence", lambda x, r: F.kl_div(torch.log(x + eps), q, reduction="sum") / (2 if r == "mean" else 1), p)

    # Huge logits stay finite: both samples of class 1.
    huge("logitcrossentropy_huge", lambda x: F.cross_entropy(x, torch.tensor([1, 1])))
    huge("logitbinarycrossentropy_huge", lambda x: F.binary_cross_entropy_with_logits(x, binary.to(x.dtype)))
    json.dump(results, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[-1])
