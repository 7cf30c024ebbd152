"""PyTorch's side of test_differential.cpp, the seeded random differential test.

Reads a JSON list of configurations {expr, dtype, inputs: [{shape, data}], weights: {shape, data} or
null} and writes, per configuration in the same order, either {shape, out, grads} -- the output of
the PyTorch expression over x0, x1, ... (torch as `torch`, functional as `F`) in the given dtype, and
the gradients of sum(output * weights) with respect to each input -- or {error} when PyTorch refuses
the configuration. For f32 it adds, under "f64", the same computed in float64 from the same
(f32-valued) inputs, and where the configuration says "sum_of_products" (its output is a sum of
products of the inputs' elements), under "terms" K sum |term| at each element of the output and of
the gradients, K the number of terms summed there; where it gives "gradient_terms" (an expression
for that at the op's input z, given by "terms_at"), those of x0's gradient. Without weights (fluxion refused
it) only the forward pass runs. Non-finite numbers are the strings "nan", "inf" and "-inf" both
ways, which JSON cannot hold.
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


class Summing:
    """A module (torch or F) whose means are sums: the expression then counts its terms."""

    def __init__(self, module):
        self.module = module

    def __getattr__(self, name):
        if name == "mean":
            return torch.sum
        if name == "avg_pool2d":
            return lambda *args, **kwargs: F.avg_pool2d(*args, **kwargs, divisor_override=1)
        return getattr(self.module, name)


def run(config, dtype, of=lambda t: t, counting=False):
    """The answer in dtype, with `of` applied to every input and to the weights; counting, with
    means as sums."""
    xs = [of(tensor(t, dtype)).requires_grad_(True) for t in config["inputs"]]
    modules = {"torch": Summing(torch), "F": Summing(F)} if counting else {"torch": torch, "F": F}
    env = {**modules, **{f"x{i}": x for i, x in enumerate(xs)}}
    try:
        out = eval(config["expr"], env)
        if config["weights"] is not None:
            (out * of(tensor(config["weights"], dtype))).sum().backward()
    except RuntimeError as e:  # PyTorch refusing the configuration; anything else is a bug here
        return {"error": str(e).splitlines()[0]}
    return {
        "shape": list(out.shape),
        "out": values(out),
        "grads": [values(x.grad) if x.grad is not None else None for x in xs],
    }


def gradient_terms(config):
    """K sum |term| of x0's gradient where the configuration gives it at z, the op's input: carried
    back to x0 through z's own (linear) backward; the output's are left to the relative
    tolerance."""
    x0 = tensor(config["inputs"][0], torch.float64).requires_grad_(True)
    z = eval(config["terms_at"], {"torch": torch, "x0": x0})
    w = tensor(config["weights"], torch.float64)
    at_z = eval(config["gradient_terms"], {"torch": torch, "z": z.detach(), "w": w})
    (grad,) = torch.autograd.grad(z, x0, at_z)
    return {"out": [0.0] * w.numel(), "grads": [values(grad.abs())]}


def terms(config):
    """K sum |term| at each element: sum |term| is the expression in float64 on the absolute values
    of the inputs and weights, K the same on ones with means as sums (the number of terms, a
    product of n inputs counted n times in a gradient at most)."""
    if config.get("gradient_terms"):
        return gradient_terms(config)
    sizes = run(config, torch.float64, torch.abs)
    counts = run(config, torch.float64, torch.ones_like, counting=True)

    def times(a, b):
        if a is None:
            return None
        products = (float(u) * max(1.0, float(v)) for u, v in zip(a, b))
        return [p if math.isfinite(p) else str(p) for p in products]

    return {
        "out": times(sizes["out"], counts["out"]),
        "grads": [times(g, c) for g, c in zip(sizes["grads"], counts["grads"])],
    }


def main(src, dst):
    torch.set_num_threads(1)
    results = []
    for config in json.load(open(src)):
        result = run(config, DTYPES[config["dtype"]])
        if config["dtype"] == "f32" and "error" not in result:
            # the exact answer, near enough, for judging the rounding of both f32 answers
            result["f64"] = run(config, torch.float64)
            bounded = config.get("sum_of_products") or config.get("gradient_terms")
            if bounded and config["weights"] is not None:
                result["terms"] = terms(config)
        results.append(result)
    json.dump(results, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
