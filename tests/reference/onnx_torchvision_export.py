# onnx_torchvision_export.py — torchvision's own architectures (the zoo's: ResNet-18, MobileNetV3-small,
# EfficientNet-B0, and a ConvNeXt and a ViT of torchvision's classes at small sizes) with random
# weights and BatchNorm statistics other than zeros and ones, exported by torch.onnx.export (opset
# 17, dynamic batch) into the folder the input names, with their outputs at batch 1 and 2 in eval mode.
# Run by tests/test_onnx_import.cpp (PyTorchsExportsOfTheZoosArchitecturesGivePyTorchsOutputs).
import json
import sys

import torch
import torchvision
from torchvision.models.convnext import CNBlockConfig

torch.manual_seed(0)


def with_statistics(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 1.5)
    return model.eval()


models = {
    "resnet18": (torchvision.models.resnet18(num_classes=10), [3, 64, 64]),
    "mobilenet_v3_small": (torchvision.models.mobilenet_v3_small(num_classes=10), [3, 64, 64]),
    "efficientnet_b0": (torchvision.models.efficientnet_b0(num_classes=10), [3, 64, 64]),
    "convnext": (torchvision.models.ConvNeXt([CNBlockConfig(16, 32, 2), CNBlockConfig(32, None, 1)],
                                             num_classes=10), [3, 32, 32]),
    "vit": (torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                 hidden_dim=32, mlp_dim=64, num_classes=10), [3, 32, 32]),
}

folder = json.load(open(sys.argv[1]))["folder"]
result = {}
for name, (model, shape) in models.items():
    model = with_statistics(model)
    path = f"{folder}/torchvision_{name}.onnx"
    torch.onnx.export(model, torch.randn([2] + shape), path, opset_version=17, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    runs = []
    for batch in (1, 2):
        x = torch.randn([batch] + shape)
        with torch.no_grad():
            y = model(x)
        runs.append({"shape": list(x.shape), "input": x.flatten().tolist(), "output": y.flatten().tolist()})
    result[name] = {"file": path, "runs": runs}

with open(sys.argv[-1], "w") as out:
    json.dump(result, out)
