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
    more(results)
    json.dump(results, open(dst, "w"))


# ---- class indices, weights, ignored labels, label smoothing; Flux's other losses; CTC ----
logits4 = torch.tensor([[1.5, -0.3, 0.8], [-2.0, 0.1, 3.2], [0.4, 0.4, -1.1], [2.2, -0.7, 0.3]])
labels4 = torch.tensor([2, 0, 1, 2])
labels4_ignored = torch.tensor([2, -100, 1, 2])
weight3 = torch.tensor([0.2, 1.0, 2.5])
spatial = torch.sin(torch.arange(24.0) * 0.7).reshape(2, 3, 2, 2) * 2
spatial_labels = torch.tensor([[[0, 2], [1, 1]], [[2, 7], [0, 1]]])  # 7 is ignored below
soft4 = torch.softmax(torch.cos(torch.arange(12.0)).reshape(4, 3), 1)
positive = torch.tensor([[0.7, 1.3, 0.2], [2.5, 0.9, 1.1]])
counts = torch.tensor([[1.0, 0.0, 2.0], [3.0, 1.0, 0.0]])
signs = torch.tensor([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]])
unit = torch.tensor([[0.9, 0.2, 0.6], [0.1, 0.35, 0.8]])


def flux_focal(x, y, gamma=2.0, e=eps):
    x = x + e
    return (-y * (1 - x) ** gamma * torch.log(x)).sum(-1)


def flux_binary_focal(x, y, gamma=2.0, e=eps):
    x = x + e
    p_t = y * x + (1 - y) * (1 - x)
    return -((1 - p_t) ** gamma) * torch.log(p_t)


def reduce(v, r):
    return getattr(torch, r)(v)


def ctc_inputs():
    T, N, C = 12, 4, 5
    t = torch.arange(T, dtype=torch.float64).reshape(T, 1, 1)
    n = torch.arange(N, dtype=torch.float64).reshape(1, N, 1)
    c = torch.arange(C, dtype=torch.float64).reshape(1, 1, C)
    x = torch.sin(1.3 * t + 0.7 * n + 2.1 * c) * 2
    targets = torch.tensor([[1, 2, 2, 3, 0], [4, 0, 0, 0, 0], [1, 1, 1, 1, 1], [3, 4, 1, 2, 1]])
    input_lengths = torch.tensor([12, 9, 12, 7])
    target_lengths = torch.tensor([4, 1, 5, 0])
    return x, targets, input_lengths, target_lengths


def more(results):
    show("ce_index", lambda x, r: F.cross_entropy(x, labels4, reduction=r), logits4)
    show("ce_index_weight", lambda x, r: F.cross_entropy(x, labels4, weight=weight3, reduction=r), logits4)
    show("ce_index_ignore", lambda x, r: F.cross_entropy(x, labels4_ignored, reduction=r), logits4)
    show("ce_index_smooth", lambda x, r: F.cross_entropy(x, labels4, label_smoothing=0.1, reduction=r), logits4)
    show("ce_index_all", lambda x, r: F.cross_entropy(x, labels4_ignored, weight=weight3, label_smoothing=0.2,
                                                      reduction=r), logits4)
    show("ce_spatial", lambda x, r: F.cross_entropy(x, spatial_labels, weight=weight3, ignore_index=7,
                                                    label_smoothing=0.1, reduction=r), spatial)
    show("ce_soft_weight_smooth", lambda x, r: F.cross_entropy(x, soft4, weight=weight3, label_smoothing=0.15,
                                                               reduction=r), logits4)
    probs4 = torch.softmax(logits4, 1)
    show("nll_prob_weight", lambda x, r: F.nll_loss(torch.log(x + eps), labels4_ignored, weight=weight3, reduction=r),
         probs4)
    show("msle", lambda x, r: reduce(torch.log((x + eps) / (counts + eps)) ** 2, r), positive)
    show("poisson", lambda x, r: reduce(x - torch.xlogy(counts, x), r), positive)
    show("hinge", lambda x, r: reduce(torch.clamp(1 - x * signs, min=0), r), yhat)
    show("squared_hinge", lambda x, r: reduce(torch.clamp(1 - x * signs, min=0) ** 2, r), yhat)
    show("dice", lambda x, r: 1 - (2 * (binary * x).sum() + 1) / ((binary ** 2).sum() + (x ** 2).sum() + 1), unit)
    show("tversky", lambda x, r: 1 - ((binary * x).sum() + 1) /
         ((binary * x + 0.7 * (1 - binary) * x + 0.3 * binary * (1 - x)).sum() + 1), unit)
    show("focal", lambda x, r: reduce(flux_focal(x, torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])), r), p)
    show("focal_gamma_1_5", lambda x, r: reduce(flux_focal(x, q, gamma=1.5), r), p)
    show("binary_focal", lambda x, r: reduce(flux_binary_focal(x, binary), r), unit)
    show("siamese", lambda x, r: reduce((1 - binary) * x ** 2 + binary * torch.clamp(1.5 - x, min=0) ** 2, r),
         positive)

    # CTC: the gradient with respect to logits (log_probs = log_softmax(logits)).
    x, targets, input_lengths, target_lengths = ctc_inputs()
    for r in ["mean", "sum"]:
        xg = x.clone().requires_grad_(True)
        value = F.ctc_loss(F.log_softmax(xg, 2), targets, input_lengths, target_lengths, reduction=r)
        value.backward()
        results["ctc_" + r] = {"value": float(value), "grad": xg.grad.reshape(-1).tolist()}
    results["ctc_none"] = F.ctc_loss(F.log_softmax(x, 2), targets, input_lengths, target_lengths,
                                     reduction="none").tolist()
    # Too short to emit: 1 1 1 needs 5 frames, 3 are given.
    short = F.log_softmax(x[:3, :1], 2)
    results["ctc_impossible"] = str(float(F.ctc_loss(short, torch.tensor([[1, 1, 1]]), torch.tensor([3]),
                                                 torch.tensor([3]), reduction="sum")))  # "inf": JSON has no infinity


if __name__ == "__main__":
    main(sys.argv[-1])
