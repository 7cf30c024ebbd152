"""Evaluates the op table's PyTorch expressions for test_ops.cpp.

Reads a JSON list of cases {name, expr, inputs: [{shape, data}], weights: {shape, data}} and
writes, per case, the output and the gradients of sum(output * weights) with respect to each
input, all in float64.
"""
import json
import sys

import torch
import torch.nn.functional as F


def tensor(t):
    return torch.tensor(t["data"], dtype=torch.float64).reshape(t["shape"])


def main(src, dst):
    results = {}
    for case in json.load(open(src)):
        xs = [tensor(t).requires_grad_(True) for t in case["inputs"]]
        env = {"torch": torch, "F": F, **{f"x{i}": x for i, x in enumerate(xs)}}
        out = eval(case["expr"], env)
        (out * tensor(case["weights"])).sum().backward()
        results[case["name"]] = {
            "shape": list(out.shape),
            "out": out.detach().reshape(-1).tolist(),
            "grads": [x.grad.reshape(-1).tolist() if x.grad is not None else None for x in xs],
        }
    json.dump(results, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
