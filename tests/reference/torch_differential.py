"""PyTorch's side of test_differential.cpp, the seeded random differential test.

Reads a JSON list of configurations {expr, dtype, inputs: [{shape, data}], weights: {shape, data} or
null} and writes, per configuration in the same order, either {shape, out, grads} -- the output of
the PyTorch expression over x0, x1, ... (torch as `torch`, functional as `F`) in the given dtype, and
the gradients of sum(output * weights) with respect to each input -- or {error} when PyTorch refuses
the configuration. For f32 it adds, under "f64", the same computed in float64 from the same
(f32-valued) inputs. Without weights (fluxion refused it) only the forward pass runs. Non-finite
numbers are the strings "nan", "inf" and "-inf" both ways, which JSON cannot hold.
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

DTYPES = {"f64": torch.float64, "f32": torch.float32}


def tensor(t, dtype):
    data = [float(v) for v in t["data"]]
    return torch.tensor(data, dtype=torch.float64).reshape(t["shape"]).to(dtype)


def values(t):
    return [v if math.isfinite(v) else str(v) for v in t.detach().double().reshape(-1).tolist()]


def run(config, dtype):
    xs = [tensor(t, dtype).requires_grad_(True) for t in config["inputs"]]
    env = {"torch": torch, "F": F, **{f"x{i}": x for i, x in enumerate(xs)}}
    try:
        out = eval(config["expr"], env)
        if config["weights"] is not None:
            (out * tensor(config["weights"], dtype)).sum().backward()
    except RuntimeError as e:  # PyTorch refusing the configuration; anything else is a bug here
        return {"error": str(e).splitlines()[0]}
    return {
        "shape": list(out.shape),
        "out": values(out),
        "grads": [values(x.grad) if x.grad is not None else None for x in xs],
    }


def main(src, dst):
    torch.set_num_threads(1)
    results = []
    for config in json.load(open(src)):
        result = run(config, DTYPES[config["dtype"]])
        if config["dtype"] == "f32" and "error" not in result:
            # the exact answer, near enough, for judging the rounding of both f32 answers
            result["f64"] = run(config, torch.float64)
        results.append(result)
    json.dump(results, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
