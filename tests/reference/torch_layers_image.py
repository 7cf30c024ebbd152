"""Reference values for test_layers_image.cpp, from PyTorch.

Run by the tests through tests/torch_reference.hpp; by hand: /usr/bin/python3 torch_layers_image.py out.json
Inputs and weights follow `wave`, as in torch_layers.py. Written, for each case: the output's shape and
values, the checksum sum(y * cos(0.7 i)) over the flattened output, its first three values (the
numbers the tests keep for machines without PyTorch), and the gradients of that checksum with respect
to the input and the layer's weights; for the InstanceNorm with running statistics, those after one
training step and the output of the layer testing.
"""
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
results = {}


def wave(shape, a, b):
    """sin(a * i + b) over the flattened index i, reshaped."""
    n = 1
    for d in shape:
        n *= d
    return torch.sin(a * torch.arange(n, dtype=torch.float64) + b).reshape(shape)


def report(name, f, x, params=(), **extra):
    x = x.clone().requires_grad_(True)
    y = f(x)
    flat = y.reshape(-1)
    w = torch.cos(0.7 * torch.arange(flat.numel(), dtype=torch.float64))
    checksum = (flat * w).sum()
    checksum.backward()
    results[name] = {"shape": list(y.shape), "out": flat.tolist(), "checksum": float(checksum),
                     "first": flat[:3].tolist(), "grad_x": x.grad.reshape(-1).tolist(),
                     **{"grad_" + k: p.grad.reshape(-1).tolist() for k, p in params},
                     **{k: v.tolist() for k, v in extra.items()}}


def affine(layer, channels):
    with torch.no_grad():
        layer.weight.copy_(wave([channels], 0.31, 1.0))
        layer.bias.copy_(wave([channels], 0.17, 0.4))
    return layer


def main(dst):
    x = wave([2, 6, 5, 4], 0.37, 0.1)
    gn = affine(nn.GroupNorm(3, 6), 6)
    report("groupnorm", gn, x, [("weight", gn.weight), ("bias", gn.bias)])
    report("groupnorm_vectors", nn.GroupNorm(2, 6, eps=0.5, affine=False), wave([3, 6], 0.53, 0.2))

    inorm = affine(nn.InstanceNorm2d(6, affine=True), 6)
    report("instancenorm", inorm, x, [("weight", inorm.weight), ("bias", inorm.bias)])
    tracked = nn.InstanceNorm2d(6, momentum=0.3, track_running_stats=True)
    tracked.train()
    tracked(x)
    tracked.eval()
    report("instancenorm_tracked", tracked, x * 2, running_mean=tracked.running_mean,
           running_var=tracked.running_var)

    report("pixelshuffle", lambda v: F.pixel_shuffle(v, 2), wave([2, 8, 3, 4], 0.37, 0.1))

    u = wave([2, 3, 4, 5], 0.41, 0.3)
    report("nearest_scale", lambda v: F.interpolate(v, scale_factor=2, mode="nearest"), u)
    report("nearest_size", lambda v: F.interpolate(v, size=(7, 3), mode="nearest"), u)
    report("bilinear_scale", lambda v: F.interpolate(v, scale_factor=2, mode="bilinear"), u)
    report("bilinear_scale_fraction", lambda v: F.interpolate(v, scale_factor=1.5, mode="bilinear"), u)
    report("bilinear_size_aligned",
           lambda v: F.interpolate(v, size=(7, 9), mode="bilinear", align_corners=True), u)
    report("bilinear_size", lambda v: F.interpolate(v, size=(3, 11), mode="bilinear"), u)
    report("bilinear_one_row_aligned",
           lambda v: F.interpolate(v, size=(1, 8), mode="bilinear", align_corners=True), u)

    v3 = wave([2, 3, 3, 4, 5], 0.41, 0.3)
    report("trilinear_scale", lambda v: F.interpolate(v, scale_factor=2, mode="trilinear"), v3)
    report("trilinear_scale_fraction", lambda v: F.interpolate(v, scale_factor=(1.5, 2.0, 1.3), mode="trilinear"), v3)
    report("trilinear_size_aligned",
           lambda v: F.interpolate(v, size=(5, 7, 3), mode="trilinear", align_corners=True), v3)
    report("nearest_volume", lambda v: F.interpolate(v, size=(5, 6, 7), mode="nearest"), v3)

    # Adaptive pools: PyTorch's windows where the sizes do not divide, and larger outputs.
    report("adaptivemeanpool_uneven", lambda v: F.adaptive_avg_pool2d(v, (3, 2)), u)
    report("adaptivemaxpool_uneven", lambda v: F.adaptive_max_pool2d(v, (3, 2)), u)
    report("adaptivemaxpool_divides", lambda v: F.adaptive_max_pool2d(v, (2, 5)), u)
    report("adaptivemeanpool_larger", lambda v: F.adaptive_avg_pool2d(v, (6, 7)), u)
    report("globalmaxpool", lambda v: F.adaptive_max_pool2d(v, 1), u)

    # 1-d layers on sequences {N, C, L}.
    seq = wave([2, 4, 9], 0.37, 0.1)
    conv = nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2)
    with torch.no_grad():
        conv.weight.copy_(wave([6, 2, 3], 0.23, 0.5))
        conv.bias.copy_(wave([6], 1.1, 0.2))
    report("conv1d", conv, seq, [("weight", conv.weight), ("bias", conv.bias)])
    # SamePad with an even kernel: total padding 3, PyTorch's "same" puts the extra zero at the end.
    same = nn.Conv1d(4, 3, 4)
    with torch.no_grad():
        same.weight.copy_(wave([3, 4, 4], 0.23, 0.5))
        same.bias.copy_(wave([3], 1.1, 0.2))
    report("conv1d_same", lambda v: same(F.pad(v, (1, 2))), seq, [("weight", same.weight), ("bias", same.bias)])
    report("maxpool1d", lambda v: F.max_pool1d(v, 3, stride=2, padding=1), seq)
    report("meanpool1d", lambda v: F.avg_pool1d(v, 3, stride=2, padding=1), seq)

    # 1-d transpose, and 3-d layers on volumes {N, C, D, H, W}.
    up1 = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, dilation=2, groups=2)
    with torch.no_grad():
        up1.weight.copy_(wave([4, 3, 3], 0.23, 0.5))
        up1.bias.copy_(wave([6], 1.1, 0.2))
    report("convtranspose1d", up1, seq, [("weight", up1.weight), ("bias", up1.bias)])
    vol = wave([2, 4, 4, 5, 6], 0.37, 0.1)
    conv3 = nn.Conv3d(4, 6, (3, 2, 3), stride=2, padding=1, groups=2)
    with torch.no_grad():
        conv3.weight.copy_(wave([6, 2, 3, 2, 3], 0.23, 0.5))
        conv3.bias.copy_(wave([6], 1.1, 0.2))
    report("conv3d", conv3, vol, [("weight", conv3.weight), ("bias", conv3.bias)])
    # SamePad with even kernels: the extra zero at the end of the depth and the height.
    same3 = nn.Conv3d(4, 3, (2, 2, 3))
    with torch.no_grad():
        same3.weight.copy_(wave([3, 4, 2, 2, 3], 0.23, 0.5))
        same3.bias.copy_(wave([3], 1.1, 0.2))
    report("conv3d_same", lambda v: same3(F.pad(v, (1, 1, 0, 1, 0, 1))), vol,
           [("weight", same3.weight), ("bias", same3.bias)])
    up3 = nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=2, padding=1, output_padding=1, dilation=2, groups=2)
    with torch.no_grad():
        up3.weight.copy_(wave([4, 3, 3, 2, 3], 0.23, 0.5))
        up3.bias.copy_(wave([6], 1.1, 0.2))
    report("convtranspose3d", up3, wave([1, 4, 3, 3, 4], 0.37, 0.1), [("weight", up3.weight), ("bias", up3.bias)])
    report("maxpool3d", lambda v: F.max_pool3d(v, (3, 2, 3), stride=2, padding=1), vol)
    report("meanpool3d", lambda v: F.avg_pool3d(v, (3, 2, 3), stride=2, padding=1), vol)

    # Per-axis (and per-side) stride, padding, dilation and output padding, a different value on each axis.
    sides1 = nn.Conv1d(4, 6, 3, stride=2)
    with torch.no_grad():
        sides1.weight.copy_(wave([6, 4, 3], 0.23, 0.5))
        sides1.bias.copy_(wave([6], 1.1, 0.2))
    report("conv1d_sides", lambda v: sides1(F.pad(v, (2, 1))), seq, [("weight", sides1.weight), ("bias", sides1.bias)])
    axes3 = nn.Conv3d(4, 6, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 2), groups=2)
    with torch.no_grad():
        axes3.weight.copy_(wave([6, 2, 3, 2, 3], 0.23, 0.5))
        axes3.bias.copy_(wave([6], 1.1, 0.2))
    report("conv3d_axes", axes3, vol, [("weight", axes3.weight), ("bias", axes3.bias)])
    sides3 = nn.Conv3d(4, 3, (2, 2, 3), stride=(2, 1, 1))
    with torch.no_grad():
        sides3.weight.copy_(wave([3, 4, 2, 2, 3], 0.23, 0.5))
        sides3.bias.copy_(wave([3], 1.1, 0.2))
    # fluxion's pad {front, back, top, bottom, left, right} = {1, 0, 0, 1, 2, 1}; F.pad takes the last axis first.
    report("conv3d_sides", lambda v: sides3(F.pad(v, (2, 1, 0, 1, 1, 0))), vol,
           [("weight", sides3.weight), ("bias", sides3.bias)])
    upaxes3 = nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=(2, 1, 3), padding=(1, 0, 1), output_padding=(1, 0, 2),
                                 dilation=(1, 2, 1), groups=2)
    with torch.no_grad():
        upaxes3.weight.copy_(wave([4, 3, 3, 2, 3], 0.23, 0.5))
        upaxes3.bias.copy_(wave([6], 1.1, 0.2))
    report("convtranspose3d_axes", upaxes3, wave([1, 4, 3, 3, 4], 0.37, 0.1),
           [("weight", upaxes3.weight), ("bias", upaxes3.bias)])
    report("maxpool3d_axes", lambda v: F.max_pool3d(v, (1, 3, 2), stride=(1, 2, 1), padding=(0, 1, 1)), vol)
    report("meanpool3d_axes", lambda v: F.avg_pool3d(v, (2, 3, 2), stride=(2, 1, 2), padding=(1, 1, 0)), vol)

    # The adaptive and global pools on sequences and volumes: sizes that do not divide, and larger.
    report("adaptivemeanpool1d_uneven", lambda v: F.adaptive_avg_pool1d(v, 4), seq)
    report("adaptivemaxpool1d_larger", lambda v: F.adaptive_max_pool1d(v, 11), seq)
    report("globalmeanpool1d", lambda v: F.adaptive_avg_pool1d(v, 1), seq)
    report("adaptivemeanpool3d_uneven", lambda v: F.adaptive_avg_pool3d(v, (3, 2, 4)), vol)
    report("adaptivemaxpool3d_uneven", lambda v: F.adaptive_max_pool3d(v, (3, 2, 4)), vol)
    report("globalmaxpool3d", lambda v: F.adaptive_max_pool3d(v, 1), vol)

    with open(dst, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1])
