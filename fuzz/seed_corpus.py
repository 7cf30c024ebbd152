"""Writes the seed corpus in fuzz/corpus/: small valid safetensors files and near misses.

Run from anywhere with any Python 3: python3 fuzz/seed_corpus.py. The fuzzer starts from these;
tests/test_io_malformed.cpp runs every file here through the reader as a regression check.
"""
import json
import pathlib
import struct

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"


def safetensors(header, data=b"", pad=True):
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


SEEDS = {
    "valid_two_f32": safetensors({"__metadata__": {"format": "pt"}, "a.weight": entry("F32", [2, 2], 0, 16),
                                  "a.bias": entry("F32", [2], 16, 24)}, bytes(range(24))),
    "valid_all_dtypes": safetensors({
        "f64": entry("F64", [1], 0, 8), "i64": entry("I64", [1], 8, 16), "f32": entry("F32", [1], 16, 20),
        "i32": entry("I32", [1], 20, 24), "f16": entry("F16", [1], 24, 26), "bf16": entry("BF16", [1], 26, 28),
        "u8": entry("U8", [1], 28, 29), "bool": entry("BOOL", [1], 29, 30)}, bytes(30)),
    "valid_scalar_and_empty": safetensors({"s": entry("F32", [], 0, 4), "e": entry("F32", [0, 3], 4, 4)}, bytes(4)),
    "valid_no_tensors": safetensors({"__metadata__": {"k": "v"}}),
    "overlap": safetensors({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, bytes(12)),
    "gap": safetensors({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}, bytes(12)),
    "size_mismatch": safetensors({"a": entry("F32", [3], 0, 8)}, bytes(8)),
    "truncated_data": safetensors({"a": entry("F32", [4], 0, 16)}, bytes(10)),
    "huge_shape": safetensors({"a": entry("F32", [2**62, 4], 0, 16)}, bytes(16)),
    "negative_shape": safetensors({"a": entry("F32", [-1, 4], 0, 16)}, bytes(16)),
    "unknown_dtype": safetensors({"a": entry("I8", [4], 0, 4)}, bytes(4)),
    "reversed_offsets": safetensors({"a": entry("U8", [0], 4, 0)}, bytes(4)),
    "metadata_not_strings": safetensors({"__metadata__": {"epoch": 3}}),
    "missing_keys": safetensors({"a": {"dtype": "F32", "shape": [1]}}, bytes(4)),
    "header_too_long": struct.pack("<Q", 1 << 40) + b"{}",
    "header_past_end": struct.pack("<Q", 64) + b"{}",
    "not_json": struct.pack("<Q", 8) + b"{\"a\":[1,",
    "json_array": safetensors([1, 2, 3]),
    "short": b"\x10\x00\x00",
}

if __name__ == "__main__":
    CORPUS.mkdir(exist_ok=True)
    for name, content in SEEDS.items():
        (CORPUS / f"{name}.bin").write_bytes(content)
