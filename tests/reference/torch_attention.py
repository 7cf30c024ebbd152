"""PyTorch's side of tests/test_layers_attention.cpp: loads fluxion's weights (safetensors, PyTorch's
names) into nn.MultiheadAttention or nn.TransformerEncoderLayer (batch_first, f64, no dropout), runs
the inputs fluxion wrote and writes the output and the gradients of sum(y * r).

usage: torch_attention.py KIND MODEL INPUTS OUT EMBED HEADS [FEEDFORWARD ACTIVATION NORM_FIRST]
KIND is mha or encoder. INPUTS holds q, k, v (mha) or x (encoder), r, and optionally key_padding
and mask (bool, True = masked) and causal (one element, 1 for a causal mask)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from safetensors_torch import read, write  # noqa: E402


def main():
    kind, model_path, inputs_path, out_path = sys.argv[1:5]
    embed, heads = int(sys.argv[5]), int(sys.argv[6])
    if kind == "mha":
        model = torch.nn.MultiheadAttention(embed, heads, dropout=0.0, batch_first=True)
    else:
        feedforward, activation, norm_first = int(sys.argv[7]), sys.argv[8], sys.argv[9] == "1"
        model = torch.nn.TransformerEncoderLayer(embed, heads, dim_feedforward=feedforward, dropout=0.0,
                                                 activation=activation, batch_first=True, norm_first=norm_first)
    model = model.double().train()
    state, _ = read(model_path)
    model.load_state_dict(state, strict=True)
    inputs, _ = read(inputs_path)
    mask = inputs.get("mask")
    if "causal" in inputs and int(inputs["causal"].item()) == 1:
        length = (inputs["q"] if kind == "mha" else inputs["x"]).shape[1]
        causal = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
        mask = causal if mask is None else (mask | causal)
    padding = inputs.get("key_padding")
    if kind == "mha":
        args = [inputs[n].clone().requires_grad_(True) for n in ("q", "k", "v")]
        y, _ = model(*args, key_padding_mask=padding, attn_mask=mask, need_weights=False)
        names = ("q", "k", "v")
    else:
        args = [inputs["x"].clone().requires_grad_(True)]
        y = model(args[0], src_mask=mask, src_key_padding_mask=padding)
        names = ("x",)
    (y * inputs["r"]).sum().backward()
    out = {"y": y.detach()}
    for name, a in zip(names, args):
        out["grad." + name] = a.grad
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad
    write(out_path, out)


if __name__ == "__main__":
    main()
