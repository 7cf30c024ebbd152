"""PyTorch's side of test_differential.cpp, the seeded random differential test.

Reads a JSON list of configurations {expr, dtype, inputs: [{shape, data}], weights: {shape, data} or
null} and writes, per configuration in the same order, either {shape, out, grads} -- the output of
the PyTorch expression over x0, x1, ... (torch as `torch`, functional as `F`) in the given dtype, and
the gradients of sum(output * weights) with respect to each input -- or {error} when PyTorch refuses
the configuration. For f32 it adds, under "f64", the same computed in float64 from the same
(f32-valued) inputs, and where the configuration says "sum_of_products" (its output is a sum of
products of the inputs' elements), under "terms" the size of the terms summed at each element: the
same in float64 from the absolute values of the inputs and weights, and "count", an upper bound on
the number of terms of any element's sum; where it gives "gradient_terms" (an expression for them
at the op's input z, given by "terms_at"), those of x0's gradient. Without weights (fluxion refused
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


def run(config, dtype, of=lambda t: t):
    """The answer in dtype, with `of` applied to every input and to the weights."""
    xs = [of(tensor(t, dtype)).requires_grad_(True) for t in config["inputs"]]
    env = {"torch": torch, "F": F, **{f"x{i}": x for i, x in enumerate(xs)}}
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
    """The sizes of the terms of x0's gradient where the configuration gives them at z, the op's
    input: carried back to x0 through z's own (linear) backward; the output's are left to the
    relative tolerance."""
    x0 = tensor(config["inputs"][0], torch.float64).requires_grad_(True)
    z = eval(config["terms_at"], {"torch": torch, "x0": x0})
    w = tensor(config["weights"], torch.float64)
    at_z = eval(config["gradient_terms"], {"torch": torch, "z": z.detach(), "w": w})
    (grad,) = torch.autograd.grad(z, x0, at_z)
    return {"out": [0.0] * w.numel(), "grads": [values(grad.abs())]}


def terms(config, result):
    """The sizes of the terms summed at each element, and a bound on their number: the largest of
    the element counts of the inputs and the output (each term takes a distinct element of one of
    them) and of the sums themselves (all inputs and weights 1; a sum over a broadcast input counts
    its repeats)."""
    count = max([1, math.prod(result["shape"])] + [len(t["data"]) for t in config["inputs"]])
    if config.get("gradient_terms"):
        sizes = gradient_terms(config)
    else:
        sizes = run(config, torch.float64, torch.abs)
        ones = run(config, torch.float64, torch.ones_like)
        for v in ones["out"] + [v for g in ones["grads"] if g is not None for v in g]:
            count = max(count, abs(float(v)))
    sizes["count"] = count
    return sizes


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
                result["terms"] = terms(config, result)
        results.append(result)
    json.dump(results, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
