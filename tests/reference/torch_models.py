"""The PyTorch side of tests/test_models.cpp: a torchvision model with random weights and
non-trivial BatchNorm statistics, and what fluxion's model must reproduce from it. The U-Net, which
torchvision lacks, is written here with milesial/Pytorch-UNet's architecture and state names.

  torch_models.py NAME SIZE NUM_CLASSES OUT_DIR [--grad]
      Writes OUT_DIR/NAME.weights.safetensors: the model's state_dict as PyTorch gives it
      (BatchNorm's num_batches_tracked included: fx::load skips it), and then
      OUT_DIR/NAME.reference.safetensors: "x" {2, 3, SIZE, SIZE}, "logits" (eval mode),
      "parameters" (the count of the model with 1000 classes, as torchvision builds it) and, with
      --grad, "grad.<name>" for every parameter: the gradient of mean(logits²) in train mode on "x".
Runs with Debian's torchvision 0.14 (python3-torchvision); safetensors through safetensors_torch.
"""
import argparse
import os
import pathlib
import sys

import torch
import torch.nn.functional as F
import torchvision
from torch import nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "interop"))
import safetensors_torch  # noqa: E402


def randomise(model, size):
    """Every parameter that starts as a constant made random, so that a wrong name or a missed term
    shows in the logits: zero biases (VGG's, the squeeze-excitations'), LayerNorm's ones and zeros,
    ConvNeXt's layer scale (1e-6) and ViT's class token (zeros). BatchNorm's weight and bias away
    from 1 and 0, its statistics away from 0 and 1: the average of a few train-mode batches
    (momentum None accumulates them)."""
    batchnorms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):
                p.uniform_(0.5, 1.5)
            elif p.numel() > 1 and bool((p == p.flatten()[0]).all()):
                p.uniform_(0.5, 1.5) if p.flatten()[0] == 1 else p.uniform_(-0.2, 0.2)
        for bn in batchnorms:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
            bn.momentum = None
        model.train()
        for _ in range(3):
            model(torch.randn(2, 3, size, size) * 2 + 0.5)
        for bn in batchnorms:
            bn.momentum = 0.1


class DoubleConv(nn.Module):
    """Two rounds of 3×3 convolution (no bias), BatchNorm and relu; `mid` channels between them."""

    def __init__(self, cin, cout, mid):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(cin, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
            nn.Conv2d(mid, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(cin, cout, cout))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    """Doubles x's size, pads it with zeros to the skip's (split evenly, the extra one after), puts
    it after the skip along the channels and applies a DoubleConv."""

    def __init__(self, cin, cout, bilinear):
        super().__init__()
        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.conv = DoubleConv(cin, cout, cin // 2)
        else:
            self.up = nn.ConvTranspose2d(cin, cin // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(cin, cout, cout)

    def forward(self, x, skip):
        x = self.up(x)
        dh, dw = skip.shape[2] - x.shape[2], skip.shape[3] - x.shape[3]
        x = F.pad(x, [dw // 2, dw - dw // 2, dh // 2, dh - dh // 2])
        return self.conv(torch.cat([skip, x], dim=1))


class OutConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    """The U-Net of milesial/Pytorch-UNet (its state names), `width` channels at full size
    (milesial's: 64); bilinear upsampling halves the deepest stage's channels."""

    def __init__(self, n_channels, n_classes, bilinear, width):
        super().__init__()
        w, f = width, 2 if bilinear else 1
        self.inc = DoubleConv(n_channels, w, w)
        self.down1, self.down2 = Down(w, 2 * w), Down(2 * w, 4 * w)
        self.down3, self.down4 = Down(4 * w, 8 * w), Down(8 * w, 16 * w // f)
        self.up1, self.up2 = Up(16 * w, 8 * w // f, bilinear), Up(8 * w, 4 * w // f, bilinear)
        self.up3, self.up4 = Up(4 * w, 2 * w // f, bilinear), Up(2 * w, w, bilinear)
        self.outc = OutConv(w, n_classes)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        y = self.up1(self.down4(x4), x4)
        return self.outc(self.up4(self.up3(self.up2(y, x3), x2), x1))


# Configurations that torchvision builds through its classes but does not name, and the U-Nets
# (width 8, so that the tests stay small; "parameters" counts that width too).
BUILDERS = {
    # timm's vit_tiny_patch16_224 (ViT-Ti/16) in torchvision's VisionTransformer.
    "vit_tiny_16": lambda num_classes=1000: torchvision.models.VisionTransformer(
        image_size=224, patch_size=16, num_layers=12, num_heads=3, hidden_dim=192, mlp_dim=768, num_classes=num_classes),
    "unet_small": lambda num_classes=2: UNet(3, num_classes, bilinear=False, width=8),
    "unet_small_bilinear": lambda num_classes=2: UNet(3, num_classes, bilinear=True, width=8),
}


def parameter_count(build):
    """The parameters of the model as `build` makes it by default (1000 classes for torchvision's),
    built with torch.nn.init's functions switched off: only the count is read, and the random
    initialisation of a second VGG-16 or ViT-B/16 took seconds."""
    names = [n for n in dir(torch.nn.init) if n.endswith("_") and not n.startswith("_")]
    saved = {n: getattr(torch.nn.init, n) for n in names}
    try:
        for n in names:
            setattr(torch.nn.init, n, lambda tensor, *args, **kwargs: tensor)
        return sum(p.numel() for p in build().parameters())
    finally:
        for n, f in saved.items():
            setattr(torch.nn.init, n, f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("size", type=int)
    p.add_argument("num_classes", type=int)
    p.add_argument("out")
    p.add_argument("--grad", action="store_true")
    args = p.parse_args()

    torch.manual_seed(0)
    build = BUILDERS.get(args.name) or getattr(torchvision.models, args.name)
    model = build(num_classes=args.num_classes)
    randomise(model, args.size)
    state = model.state_dict()
    out = pathlib.Path(args.out)
    safetensors_torch.write(out / f"{args.name}.weights.safetensors", state, {"format": "pt"})

    x = torch.randn(2, 3, args.size, args.size)
    model.eval()
    with torch.no_grad():
        reference = {"x": x, "logits": model(x)}
    reference["parameters"] = torch.tensor([parameter_count(build)], dtype=torch.int64)
    if args.grad:
        model.train()
        loss = model(x).pow(2).mean()
        loss.backward()
        for name, param in model.named_parameters():
            reference["grad." + name] = param.grad
    tmp = out / f"{args.name}.reference.safetensors.{os.getpid()}"
    safetensors_torch.write(tmp, reference)
    os.replace(tmp, out / f"{args.name}.reference.safetensors")


if __name__ == "__main__":
    main()
