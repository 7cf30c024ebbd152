"""Reference values for test_layers_conv.cpp and test_layers_norm.cpp, from PyTorch.

Run by the tests through tests/torch_reference.hpp; by hand: /usr/bin/python3 torch_layers.py out.json
Inputs and weights follow formulas the tests rebuild with fluxion ops (see `wave`). Written, for each
case: the output's shape and values, the checksum sum(y * cos(0.7 i)) over the flattened output and
its first three values (the numbers the tests keep for machines without PyTorch), and the running
statistics of the BatchNorm cases.
"""
import json
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
results = {}


def wave(shape, a, b):
    """sin(a * i + b) over the flattened index i, reshaped."""
    n = 1
    for d in shape:
        n *= d
    return torch.sin(a * torch.arange(n, dtype=torch.float64) + b).reshape(shape)


def report(name, y, **extra):
    flat = y.detach().reshape(-1)
    w = torch.cos(0.7 * torch.arange(flat.numel(), dtype=torch.float64))
    results[name] = {"shape": list(y.shape), "out": flat.tolist(), "checksum": float((flat * w).sum()),
                     "first": flat[:3].tolist(), **{k: v.tolist() for k, v in extra.items()}}


def main(dst):
    x = wave([2, 3, 7, 6], 0.37, 0.1)
    w = wave([4, 3, 2, 3], 0.23, 0.5)
    b = wave([4], 1.1, 0.2)
    # Conv, SamePad with an even kernel height: total padding 1 (rows), 2 (cols); PyTorch's "same"
    # puts the odd extra row at the bottom.
    report("conv_same", F.conv2d(F.pad(x, (1, 1, 0, 1)), w, b))
    # Conv with stride 2, padding 1, dilation (1, 2), groups 1.
    report("conv_strided", F.conv2d(x, w, b, stride=2, padding=1, dilation=(1, 2)))
    # Grouped: 4 input channels in 2 groups.
    xg = wave([2, 4, 5, 5], 0.41, 0.3)
    wg = wave([6, 2, 3, 3], 0.19, 0.7)
    report("conv_groups", F.conv2d(xg, wg, None, groups=2))
    # ConvTranspose, weight {in, out, kh, kw}, stride 2, padding 1, kernel 4 (SamePad: output = 2H).
    wt = wave([3, 2, 4, 4], 0.29, 0.4)
    bt = wave([2], 0.9, 0.1)
    report("convtranspose_same", F.conv_transpose2d(x, wt, bt, stride=2, padding=1))
    # ConvTranspose, 4 => 6 in 2 groups (weight {in, out/groups, kh, kw}), stride 2, padding 1,
    # dilation 2, output padding 1.
    wtg = wave([4, 3, 3, 3], 0.31, 0.2)
    btg = wave([6], 0.7, 0.3)
    report("convtranspose_groups",
           F.conv_transpose2d(xg, wtg, btg, stride=2, padding=1, output_padding=1, groups=2, dilation=2))
    # Pools.
    report("maxpool_pad", F.max_pool2d(x, 3, stride=2, padding=1))
    report("meanpool_pad", F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=True))
    report("adaptive_2x3", F.adaptive_avg_pool2d(x[:, :, :6, :], (2, 3)))

    # BatchNorm(3), momentum 0.1, one training step on {2, 3, 7, 6}, then evaluation.
    bn = torch.nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.copy_(torch.tensor([1.5, 0.5, -1.0]))
        bn.bias.copy_(torch.tensor([0.1, 0.2, 0.3]))
    bn.train()
    report("batchnorm_train", bn(x), running_mean=bn.running_mean, running_var=bn.running_var)
    bn.eval()
    report("batchnorm_test", bn(x))
    # BatchNorm on vectors {N, C}.
    v = wave([5, 3], 0.53, 0.2)
    bn1 = torch.nn.BatchNorm1d(3)
    report("batchnorm_vectors", bn1(v), running_var=bn1.running_var)
    # BatchNorm with every option changed: momentum 0.3, epsilon 0.5, no affine parameters; two
    # training steps (the second on x scaled by 2), then evaluation.
    bno = torch.nn.BatchNorm2d(3, momentum=0.3, eps=0.5, affine=False)
    bno.train()
    bno(x)
    report("batchnorm_options_train", bno(2 * x), running_mean=bno.running_mean, running_var=bno.running_var)
    bno.eval()
    report("batchnorm_options_test", bno(x))

    # LayerNorm over the last two axes {7, 6} with weight/bias.
    ln = torch.nn.LayerNorm([7, 6])
    with torch.no_grad():
        ln.weight.copy_(wave([7, 6], 0.31, 1.0))
        ln.bias.copy_(wave([7, 6], 0.17, 0.4))
    report("layernorm", ln(x))
    # LayerNorm over the last axis, epsilon 0.5, no affine parameters.
    report("layernorm_options", F.layer_norm(x, [6], eps=0.5))
    json.dump(results, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[-1])
