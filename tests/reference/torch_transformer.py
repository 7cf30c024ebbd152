"""Reference values for test_layers_transformer.cpp, from PyTorch's nn.TransformerEncoder and
nn.TransformerDecoder (batch_first, no dropout).

Run by the tests through tests/torch_reference.hpp; by hand: /usr/bin/python3 torch_transformer.py out.json
Every parameter, taken in the order of its sorted state_dict name (the names fluxion must share),
is wave(shape, 0.1 + 0.01 i, 0.3 i) * 0.5, and the inputs are waves, as the test builds them. Written,
per model: the sorted names, the output, and the gradients of sum(y * cos(0.7 i)) with respect to the inputs.
"""
import json
import sys

import torch
import torch.nn as nn

torch.set_default_dtype(torch.float64)


def wave(shape, a, b):
    n = 1
    for d in shape:
        n *= d
    return torch.sin(a * torch.arange(n, dtype=torch.float64) + b).reshape(shape)


def fill(model):
    names = sorted(model.state_dict().keys())
    state = model.state_dict()
    with torch.no_grad():
        for i, name in enumerate(names):
            state[name].copy_(wave(list(state[name].shape), 0.1 + 0.01 * i, 0.3 * i) * 0.5)
    return names


def checksum(y):
    return (y.reshape(-1) * torch.cos(0.7 * torch.arange(y.numel(), dtype=torch.float64))).sum()


def main(dst):
    results = {}
    E, heads, ff = 8, 2, 16
    tgt = wave([2, 3, E], 0.37, 0.1).requires_grad_(True)
    memory = wave([2, 4, E], 0.23, 0.5).requires_grad_(True)
    causal = torch.triu(torch.ones(3, 3, dtype=torch.bool), 1)
    padding = torch.tensor([[False, False, False, False], [False, False, False, True]])

    for norm_first in [False, True]:
        layer = nn.TransformerDecoderLayer(E, heads, ff, dropout=0.0, batch_first=True, norm_first=norm_first)
        decoder = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(E))
        names = fill(decoder)
        y = decoder(tgt, memory, tgt_mask=causal, memory_key_padding_mask=padding)
        dt, dm = torch.autograd.grad(checksum(y), [tgt, memory])
        results["decoder_norm_first" if norm_first else "decoder"] = {
            "names": names, "out": y.detach().reshape(-1).tolist(), "dtgt": dt.reshape(-1).tolist(),
            "dmemory": dm.reshape(-1).tolist()}

    layer = nn.TransformerEncoderLayer(E, heads, ff, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(E), enable_nested_tensor=False)
    names = fill(encoder)
    y = encoder(memory, src_key_padding_mask=padding)
    (dm,) = torch.autograd.grad(checksum(y), [memory])
    results["encoder"] = {"names": names, "out": y.detach().reshape(-1).tolist(), "dx": dm.reshape(-1).tolist()}
    json.dump(results, open(dst, "w"))


if __name__ == "__main__":
    main(sys.argv[-1])
