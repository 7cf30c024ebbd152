"""Reference values for test_layers_embedding.cpp, from PyTorch's embedding and embedding_bag.

Run by the tests through tests/torch_reference.hpp; by hand: /usr/bin/python3 torch_embedding.py out.json
Weights are wave(shape, a, b) = sin(a * i + b) over the flattened index, as the test builds them.
Written, per case: the output, the weight after the call (max_norm rescales it), and the gradient
of sum(y * cos(0.7 i)) with respect to the weight.
"""
import json
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def wave(shape, a, b):
    n = 1
    for d in shape:
        n *= d
    return torch.sin(a * torch.arange(n, dtype=torch.float64) + b).reshape(shape)


def run(results, name, weight, f):
    w = weight.clone().requires_grad_(True)
    y = f(w)
    (y.reshape(-1) * torch.cos(0.7 * torch.arange(y.numel(), dtype=torch.float64))).sum().backward()
    results[name] = {"out": y.detach().reshape(-1).tolist(), "weight": w.detach().reshape(-1).tolist(),
                     "grad": w.grad.reshape(-1).tolist()}


def main(dst):
    results = {}
    weight = wave([6, 3], 0.37, 0.1) * 2
    padded = weight.clone()
    padded[1] = 0
    idx = torch.tensor([[0, 1, 2], [1, 5, 0]])
    run(results, "padding", padded, lambda w: F.embedding(idx, w, padding_idx=1))
    # max_norm renormalises rows in place, outside autograd, as nn.Embedding does.
    def renormed(w):
        with torch.no_grad():
            torch.embedding_renorm_(w, idx.reshape(-1), 1.0, 2.0)
        return F.embedding(idx, w)
    run(results, "max_norm", weight, renormed)
    flat = torch.tensor([0, 2, 5, 1, 1, 3, 4])
    offsets = torch.tensor([0, 2, 2, 5])  # bag 1 is empty
    for mode in ["sum", "mean", "max"]:
        run(results, "bag_" + mode, weight, lambda w: F.embedding_bag(flat, w, offsets, mode=mode))
    run(results, "bag_fixed_mean", weight, lambda w: F.embedding_bag(idx, w, mode="mean"))
    json.dump(results, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[-1])
