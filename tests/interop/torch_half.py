"""The PyTorch side of tests/test_half_models.cpp.

  torch_half.py DIR
      Reads DIR/bf16.safetensors and DIR/f16.safetensors, which fluxion wrote from fx::bf16(model)
      and fx::f16(model), checks that torch sees every tensor as torch.bfloat16 and torch.float16,
      and writes each file's tensors converted to float32 by torch to DIR/<name>_as_f32.safetensors.
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import safetensors_torch  # noqa: E402


def main():
    folder = pathlib.Path(sys.argv[1])
    for name, dtype in (("bf16", torch.bfloat16), ("f16", torch.float16)):
        tensors, _ = safetensors_torch.read(folder / f"{name}.safetensors")
        wrong = {key: str(t.dtype) for key, t in tensors.items() if t.dtype != dtype}
        if wrong or not tensors:
            sys.exit(f"{name}.safetensors: expected every tensor as {dtype}, found {wrong or 'none'}")
        safetensors_torch.write(folder / f"{name}_as_f32.safetensors", {k: v.float() for k, v in tensors.items()})


if __name__ == "__main__":
    main()
