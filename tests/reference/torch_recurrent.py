"""PyTorch's side of tests/test_layers_recurrent.cpp: loads fluxion's weights (safetensors,
PyTorch's names) into nn.RNN, nn.LSTM, nn.GRU (batch_first, f64) or their cells, runs the inputs
fluxion wrote and writes the outputs and the gradients of sum(y * r) + sum(h * rh) (+ sum(c * rc) for the LSTM).

usage: torch_recurrent.py KIND MODEL INPUTS OUT INPUT HIDDEN LAYERS BIDIRECTIONAL BIAS NONLINEARITY
KIND is rnn, lstm, gru, rnncell, lstmcell or grucell. INPUTS holds x, r, rh (and rc for the LSTM),
and optionally h0 (and c0). Cells ignore LAYERS and BIDIRECTIONAL; their output is h (and c)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from safetensors_torch import read, write  # noqa: E402


def build(kind, size, hidden, layers, bidirectional, bias, nonlinearity):
    if kind == "rnn":
        return torch.nn.RNN(size, hidden, layers, nonlinearity=nonlinearity, bias=bias,
                            batch_first=True, bidirectional=bidirectional)
    if kind in ("lstm", "gru"):
        cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
        return cls(size, hidden, layers, bias=bias, batch_first=True, bidirectional=bidirectional)
    if kind == "rnncell":
        return torch.nn.RNNCell(size, hidden, bias=bias, nonlinearity=nonlinearity)
    return (torch.nn.LSTMCell if kind == "lstmcell" else torch.nn.GRUCell)(size, hidden, bias=bias)


def outputs(kind, model, x, h0, c0):
    """(y or None, h, c or None) of any of the kinds."""
    if kind == "lstm":
        y, (h, c) = model(x, None if h0 is None else (h0, c0))
        return y, h, c
    if kind == "lstmcell":
        h, c = model(x, None if h0 is None else (h0, c0))
        return None, h, c
    if kind in ("rnn", "gru"):
        y, h = model(x, h0)
        return y, h, None
    return None, model(x, h0), None


def main():
    kind, model_path, inputs_path, out_path = sys.argv[1:5]
    size, hidden, layers = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    bidirectional, bias, nonlinearity = sys.argv[8] == "1", sys.argv[9] == "1", sys.argv[10]
    args = (kind, size, hidden, layers, bidirectional, bias, nonlinearity)
    model = build(*args).double()
    state, _ = read(model_path)
    model.load_state_dict(state, strict=True)
    inputs, _ = read(inputs_path)
    x = inputs["x"].clone().requires_grad_(True)
    h0 = inputs["h0"].clone().requires_grad_(True) if "h0" in inputs else None
    c0 = inputs["c0"].clone().requires_grad_(True) if "c0" in inputs else None
    y, h, c = outputs(kind, model, x, h0, c0)
    loss = (h * inputs["rh"]).sum()
    out = {"h": h.detach()}
    if y is not None:
        loss = loss + (y * inputs["r"]).sum()
        out["y"] = y.detach()
    if c is not None:
        loss = loss + (c * inputs["rc"]).sum()
        out["c"] = c.detach()
    loss.backward()
    out["grad.x"] = x.grad
    if h0 is not None:
        out["grad.h0"] = h0.grad
    if c0 is not None:
        out["grad.c0"] = c0.grad
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad
    # The other way: PyTorch's own initial weights, for fluxion to load and run.
    torch.manual_seed(0)
    fresh = build(*args).double()
    with torch.no_grad():
        y, h, _ = outputs(kind, fresh, inputs["x"], inputs.get("h0"), inputs.get("c0"))
    out["torch.h"] = h
    if y is not None:
        out["torch.y"] = y
    torch_model = os.path.join(os.path.dirname(out_path), "torch_model.safetensors")
    write(torch_model, dict(fresh.state_dict()))
    write(out_path, out)


if __name__ == "__main__":
    main()
