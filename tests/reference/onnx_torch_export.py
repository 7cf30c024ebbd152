# onnx_torch_export.py — small models exported by PyTorch's torch.onnx.export (opset 17, a dynamic
# batch axis) with their outputs at two batch sizes, for tests/test_onnx_import.cpp. Written as JSON:
# {name: {"onnx": base64 of the file, "runs": [{"shape", "input", "output_shape", "output"}, ...]}}.
# Usage: /usr/bin/python3 onnx_torch_export.py <out.json>
import base64
import io
import json
import math
import sys

import torch
from torch import nn

torch.manual_seed(0)


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.pool = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.bn(self.conv1(x))), 2)
        x = self.pool(nn.functional.elu(self.conv2(x)))
        x = nn.functional.leaky_relu(self.up(x), 0.1)
        return self.fc(x.reshape(x.shape[0], -1))  # Shape, Gather, Unsqueeze, Concat, Reshape


class Attention(nn.Module):
    """Self-attention written out, as transformer exports are: heads split by reshapes of the runtime shape."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.heads, self.qkv, self.out = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))

    def forward(self, x):
        n, l, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        split = lambda t: t.reshape(n, l, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
        x = x + self.out((w @ v).transpose(1, 2).reshape(n, l, d))
        return x + self.ff(self.norm2(x))


class Recurrent(nn.Module):
    """LSTM (two bidirectional layers, batch-first), GRU (bidirectional, a learned initial state) and a relu RNN."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(4, 5, bidirectional=True)
        self.h0 = nn.Parameter(torch.randn(2, 1, 5))
        self.rnn = nn.RNN(4, 3, nonlinearity="relu")

    def forward(self, x):
        y1, (h1, c1) = self.lstm(x)
        t = x.transpose(0, 1)
        y2, h2 = self.gru(t, self.h0.expand(-1, x.shape[0], -1).contiguous())
        y3, h3 = self.rnn(t)
        parts = [y1, h1.transpose(0, 1), c1.transpose(0, 1), y2.transpose(0, 1), h2.transpose(0, 1), y3.transpose(0, 1)]
        return torch.cat([p.flatten(1) for p in parts], 1)


class Resize(nn.Module):
    def forward(self, x):
        f = nn.functional.interpolate
        parts = [f(x, scale_factor=2, mode="nearest"), f(x, size=(5, 7), mode="bilinear", align_corners=False),
                 f(x, scale_factor=2, mode="bilinear", align_corners=True), f(x, size=(6, 6), mode="bicubic")]
        return torch.cat([p.flatten(1) for p in parts], 1)


class Volume(nn.Module):
    """3-d convolutions and pools."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(2, 4, 3, stride=(1, 2, 2), padding=1)
        self.up = nn.ConvTranspose3d(4, 3, 3, stride=2, padding=1, output_padding=1)
        self.avg = nn.AvgPool3d(2, stride=1, padding=1, count_include_pad=False)

    def forward(self, x):
        return self.avg(self.up(nn.functional.max_pool3d(torch.relu(self.conv(x)), 2))).flatten(1)


def models():
    mlp = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 16), nn.Sigmoid(),
                        nn.Linear(16, 5), nn.LogSoftmax(dim=-1))
    cnn = Cnn()
    with torch.no_grad():  # running statistics other than zeros and ones
        cnn.bn.running_mean.uniform_(-0.5, 0.5)
        cnn.bn.running_var.uniform_(0.5, 2.0)
    conv1d = nn.Sequential(nn.Conv1d(2, 4, 3, padding=2, dilation=2), nn.Softplus(), nn.MaxPool1d(2), nn.Flatten(),
                           nn.Linear(24, 3))
    return {"mlp": (mlp, [6]), "cnn": (cnn, [3, 16, 16]), "conv1d": (conv1d, [2, 12]),
            "attention": (Attention(), [5, 16]), "recurrent": (Recurrent(), [7, 4]), "resize": (Resize(), [2, 4, 4]),
            "volume": (Volume(), [2, 6, 8, 8]),
            "dilated_pool": (nn.Sequential(nn.Conv2d(2, 3, 3), nn.MaxPool2d(3, stride=2, padding=1, dilation=2),
                                           nn.Flatten()), [2, 12, 12])}


result = {}
for name, (model, shape) in models().items():
    model.eval()
    f = io.BytesIO()
    torch.onnx.export(model, torch.randn([2] + shape), f, opset_version=17, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    runs = []
    for batch in (2, 3):
        x = torch.randn([batch] + shape)
        with torch.no_grad():
            y = model(x)
        runs.append({"shape": list(x.shape), "input": x.flatten().tolist(), "output_shape": list(y.shape),
                     "output": y.flatten().tolist()})
    result[name] = {"onnx": base64.b64encode(f.getvalue()).decode(), "runs": runs}

with open(sys.argv[-1], "w") as out:
    json.dump(result, out)
