"""Evaluates the op table's PyTorch expressions on inputs with a zero-length axis, for test_ops.cpp.

Reads a JSON list of cases {name, expr, inputs: [{shape, data}]} and writes, per case, either the
error PyTorch raises or the output and the gradients of sum(output * w), w = 1 + 0.5 i over the
flattened output, with respect to each input, all in float64; NaN and infinities as the strings
"nan", "inf" and "-inf".
"""
import json
import sys

import torch
import torch.nn.functional as F


def values(t):
    """The values flattened, with NaN and infinities as strings, which JSON cannot hold as numbers."""
    return [v if abs(v) != float("inf") and v == v else str(v) for v in t.detach().reshape(-1).tolist()]


def tensor(t):
    return torch.tensor(t["data"], dtype=torch.float64).reshape(t["shape"])


def evaluate(case):
    xs = [tensor(t).requires_grad_(True) for t in case["inputs"]]
    env = {"torch": torch, "F": F, **{f"x{i}": x for i, x in enumerate(xs)}}
    try:
        out = eval(case["expr"], env)
    except (RuntimeError, IndexError, ValueError) as e:
        return {"error": str(e)}
    w = (1 + 0.5 * torch.arange(out.numel(), dtype=torch.float64)).reshape(out.shape)
    (out * w).sum().backward()
    return {
        "shape": list(out.shape),
        "out": values(out),
        "grads": [values(x.grad) if x.grad is not None else None for x in xs],
    }


def main(src, dst):
    json.dump({case["name"]: evaluate(case) for case in json.load(open(src))}, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
