"""Reference values for test_layers_scale.cpp's Bilinear case, from PyTorch's F.bilinear.

Run by the tests through tests/torch_reference.hpp; by hand: /usr/bin/python3 torch_bilinear.py out.json
Inputs follow sin(a * i + b) over the flattened index, as the test builds them. Written: the output,
and the gradients of sum(y * cos(0.7 i)) with respect to x1, x2, the weight and the bias.
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


def main(dst):
    x1 = wave([3, 5], 0.37, 0.1).requires_grad_(True)
    x2 = wave([3, 4], 0.23, 0.5).requires_grad_(True)
    w = wave([2, 5, 4], 0.19, 0.7).requires_grad_(True)
    b = wave([2], 1.1, 0.2).requires_grad_(True)
    y = F.bilinear(x1, x2, w, b)
    (y.reshape(-1) * torch.cos(0.7 * torch.arange(y.numel(), dtype=torch.float64))).sum().backward()
    json.dump({"out": y.detach().reshape(-1).tolist(), "dx1": x1.grad.reshape(-1).tolist(),
               "dx2": x2.grad.reshape(-1).tolist(), "dw": w.grad.reshape(-1).tolist(),
               "db": b.grad.reshape(-1).tolist()}, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[-1])
