"""The PyTorch side of tests/test_io_interop.cpp: torch.nn.Sequential(Linear, ReLU, ..., Linear).

  torch_mlp.py run WEIGHTS INPUTS OUTPUTS
      Loads weights fluxion wrote into the equivalent Sequential. Names are agreed by order: the
      file's tensors, in data order, are (weight, bias) pairs of successive Linear layers, and are
      loaded under torch's own state_dict keys (strictly). Writes "y" = model(INPUTS["x"]) and
      "state.<torch key>" = the loaded state_dict to OUTPUTS.
  torch_mlp.py export WEIGHTS INPUTS OUTPUTS SIZE... [--names NAME...]
      Builds Sequential(Linear(SIZE0, SIZE1), ReLU(), ...) with torch.manual_seed(0) and writes its
      state_dict to WEIGHTS under NAMES (in state_dict order; torch's keys if not given), and
      "y" = model(INPUTS["x"]) to OUTPUTS.
  torch_mlp.py dtypes IN OUT
      Writes every tensor of IN converted to float64 by torch, under the same name, to OUT.
"""
import argparse
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import safetensors_torch  # noqa: E402


def sequential(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        if i:
            layers.append(torch.nn.ReLU())
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
    return torch.nn.Sequential(*layers)


def run(args):
    tensors, _ = safetensors_torch.read(args.weights)
    values = list(tensors.values())
    if len(values) % 2:
        sys.exit(f"expected (weight, bias) pairs, found {len(values)} tensors: {list(tensors)}")
    weights = values[0::2]
    sizes = [weights[0].shape[1]] + [w.shape[0] for w in weights]
    model = sequential(sizes)
    keys = list(model.state_dict().keys())
    model.load_state_dict(dict(zip(keys, values)), strict=True)
    inputs, _ = safetensors_torch.read(args.inputs)
    with torch.no_grad():
        y = model(inputs["x"])
    out = {"y": y}
    out.update({"state." + k: v for k, v in model.state_dict().items()})
    safetensors_torch.write(args.outputs, out)


def export(args):
    torch.manual_seed(0)
    model = sequential(args.sizes)
    state = model.state_dict()
    names = args.names or list(state.keys())
    if len(names) != len(state):
        sys.exit(f"{len(names)} names for {len(state)} tensors")
    safetensors_torch.write(args.weights, dict(zip(names, state.values())), {"format": "pt"})
    inputs, _ = safetensors_torch.read(args.inputs)
    with torch.no_grad():
        safetensors_torch.write(args.outputs, {"y": model(inputs["x"])})


def dtypes(args):
    tensors, _ = safetensors_torch.read(args.inputs)
    safetensors_torch.write(args.outputs, {k: v.to(torch.float64) for k, v in tensors.items()})


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run")
    p.add_argument("weights")
    p.add_argument("inputs")
    p.add_argument("outputs")
    p.set_defaults(func=run)
    p = sub.add_parser("export")
    p.add_argument("weights")
    p.add_argument("inputs")
    p.add_argument("outputs")
    p.add_argument("sizes", type=int, nargs="+")
    p.add_argument("--names", nargs="+")
    p.set_defaults(func=export)
    p = sub.add_parser("dtypes")
    p.add_argument("inputs")
    p.add_argument("outputs")
    p.set_defaults(func=dtypes)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
