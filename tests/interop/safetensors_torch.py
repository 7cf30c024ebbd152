"""Reads and writes safetensors files with json and torch alone (Debian's PyTorch has no
`safetensors` package): the reference side of fluxion's interop tests."""
import json
import struct

import torch

DTYPES = {
    "F32": torch.float32, "F64": torch.float64, "I32": torch.int32, "I64": torch.int64,
    "U8": torch.uint8, "BOOL": torch.bool, "F16": torch.float16, "BF16": torch.bfloat16,
}
NAMES = {dtype: name for name, dtype in DTYPES.items()}


def read(path):
    """Returns ({name: tensor} in data order, metadata)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors = {}
    for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        begin, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        if end > begin:
            flat = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype)
        else:
            flat = torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(entry["shape"])
    return tensors, metadata


def write(path, tensors, metadata=None):
    """Writes {name: tensor} in the dict's order, the header padded to a multiple of 8. Each tensor's
    bytes go to the file from its own memory: no copies of the whole (VGG's half a gigabyte)."""
    header = {"__metadata__": metadata} if metadata else {}
    chunks, offset = [], 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + raw.nbytes]}
        chunks.append(raw)
        offset += raw.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for raw in chunks:
            f.write(memoryview(raw))
