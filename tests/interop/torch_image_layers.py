"""Writes PyTorch state_dicts of the layers test_layers_image.cpp loads with fx::load, as safetensors
files in the folder given: nn.GroupNorm(3, 6), nn.InstanceNorm2d(6, affine, running statistics)
after one training step, nn.Conv1d(4, 6, 3, groups=2), nn.Conv3d(4, 6, (3, 2, 3), groups=2) and
nn.ConvTranspose3d(4, 6, (3, 2, 3), groups=2), with the weights (and the input of the
training step) of tests/reference/torch_layers_image.py's cases."""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_torch  # noqa: E402

torch.set_default_dtype(torch.float64)


def wave(shape, a, b):
    n = 1
    for d in shape:
        n *= d
    return torch.sin(a * torch.arange(n, dtype=torch.float64) + b).reshape(shape)


def save(layer, path):
    safetensors_torch.write(path, {k: v.detach().contiguous() for k, v in layer.state_dict().items()})


def main(folder):
    gn = nn.GroupNorm(3, 6)
    inorm = nn.InstanceNorm2d(6, momentum=0.3, affine=True, track_running_stats=True)
    for layer in (gn, inorm):
        with torch.no_grad():
            layer.weight.copy_(wave([6], 0.31, 1.0))
            layer.bias.copy_(wave([6], 0.17, 0.4))
    inorm.train()
    inorm(wave([2, 6, 5, 4], 0.37, 0.1))
    conv = nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2)
    with torch.no_grad():
        conv.weight.copy_(wave([6, 2, 3], 0.23, 0.5))
        conv.bias.copy_(wave([6], 1.1, 0.2))
    conv3 = nn.Conv3d(4, 6, (3, 2, 3), stride=2, padding=1, groups=2)
    up3 = nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=2, padding=1, output_padding=1, dilation=2, groups=2)
    with torch.no_grad():
        conv3.weight.copy_(wave([6, 2, 3, 2, 3], 0.23, 0.5))
        conv3.bias.copy_(wave([6], 1.1, 0.2))
        up3.weight.copy_(wave([4, 3, 3, 2, 3], 0.23, 0.5))
        up3.bias.copy_(wave([6], 1.1, 0.2))
    save(conv3, os.path.join(folder, "conv3d.safetensors"))
    save(up3, os.path.join(folder, "convtranspose3d.safetensors"))
    save(gn, os.path.join(folder, "groupnorm.safetensors"))
    save(inorm, os.path.join(folder, "instancenorm.safetensors"))
    save(conv, os.path.join(folder, "conv1d.safetensors"))


if __name__ == "__main__":
    main(sys.argv[1])
