"""Writes the seed corpora in fuzz/corpus/NAME/, one per fuzz target: small valid files and near misses.

Run from anywhere with any Python 3: python3 fuzz/seed_corpus.py. The fuzzers start from these;
tests/test_io_malformed.cpp (safetensors) and tests/test_fuzz_corpora.cpp (idx, preferences) run
every file through the reader as a regression check: files named valid_* must be accepted, the
others refused with an IOError.
"""
import gzip
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


SAFETENSORS = {
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
    "int64_overflowing_product": safetensors({"a": entry("U8", [3037000500, 3037000500], 0, 0)}),
    "uint64_overflowing_product": safetensors({"a": entry("F32", [2**31, 2**31, 2**31], 0, 16)}, bytes(16)),
    "offsets_past_the_file": safetensors({"a": entry("F32", [1], 2**62, 2**62 + 4)}, bytes(4)),
}
ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1}
for _dtype, _size in ITEMSIZE.items():
    _data = bytes(i % 2 for i in range(3)) if _dtype == "BOOL" else bytes(range(1, 3 * _size + 1))
    SAFETENSORS[f"valid_{_dtype.lower()}_three"] = safetensors({"t": entry(_dtype, [3], 0, 3 * _size)}, _data)
    SAFETENSORS[f"huge_2p60_{_dtype.lower()}"] = safetensors({"t": entry(_dtype, [2**60], 0, 2**60 * _size)}, bytes(16))



def idx(code, dims, data):
    return bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


def gz(content):
    return gzip.compress(content, mtime=0)  # mtime 0: the same bytes on every run


IDX = {
    "valid_u8_images": idx(0x08, [2, 2, 3], bytes(range(12))),
    "valid_u8_labels_gz": gz(idx(0x08, [5], bytes([0, 9, 3, 3, 1]))),
    "valid_i8": idx(0x09, [3], b"\xfb\x07\x80"),
    "valid_i16": idx(0x0B, [2], b"\xfe\xd4\x01\x2c"),
    "valid_i32_gz": gz(idx(0x0C, [1, 2], b"\xff\xff\xff\xfe\x00\x01\x11\x70")),
    "valid_f32": idx(0x0D, [2], struct.pack(">2f", 1.5, -0.25)),
    "valid_f64_gz": gz(idx(0x0E, [1], struct.pack(">d", 3.25))),
    "valid_empty_dim": idx(0x08, [0, 7], b""),
    "valid_eight_dims": idx(0x08, [1] * 8, b"\x2a"),
    "truncated_data": idx(0x08, [10, 4], bytes(37)),
    "truncated_header": idx(0x08, [10, 4], b"")[:10],
    "extra_data": idx(0x08, [2], bytes(3)),
    "huge_shape": idx(0x0E, [0xFFFFFFFF] * 8, bytes(16)),
    "huge_shape_gz": gz(idx(0x08, [0xFFFFFFFF, 0xFFFFFFFF], bytes(64))),
    "nine_dims": idx(0x08, [1] * 9, b"\x01"),
    "zero_dims": idx(0x08, [], b""),
    "unknown_type": idx(0x07, [1], b"\x00"),
    "not_idx": b"\x89PNG\r\n\x1a\n",
    "gz_corrupt": (lambda z: z[:20] + bytes([z[20] ^ 0xFF]) + z[21:])(gz(idx(0x08, [64], bytes(range(64))))),
    "gz_truncated": gz(idx(0x08, [64], bytes(range(64))))[:30],
    "short": b"\x00\x00",
}

PREFERENCES = {
    "valid_backend": b'[fluxion]\ngpu_backend = "CUDA"\n',
    "valid_other_sections": b'# a comment\n[Flux]\ngpu_backend = "AMDGPU"\n\n[fluxion]\ngpu_backend = "Vulkan"\n'
                            b'other = [1, 2.5, "x", {a = 1}]\n',
    "valid_no_section": b'title = "x"\n[other.nested]\nwhen = 1979-05-27T07:32:00Z\n',
    "valid_empty": b"",
    "valid_inline_table": b'fluxion = { gpu_backend = "CPU" }\n',
    "valid_dotted_keys": b'fluxion.gpu_backend = "CUDA"\n"quoted key" = \'\'\'multi\nline\'\'\'\n',
    "valid_arrays_of_tables": b'[[fluxion.models]]\nname = "a"\n[[fluxion.models]]\nname = "b"\n',
    "valid_keys_toml_pp_writes_bare": b'"it\'s" = 1\n"a\\tb" = 2\n[fluxion]\ngpu_backend = "CPU"\n',
    "backend_not_string": b"[fluxion]\ngpu_backend = 3\n",
    "fluxion_not_table": b'fluxion = "CUDA"\n',
    "fluxion_array": b"fluxion = [1, 2]\n",
    "duplicate_key": b'[fluxion]\ngpu_backend = "CUDA"\ngpu_backend = "CPU"\n',
    "unterminated_string": b'[fluxion]\ngpu_backend = "CUDA\n',
    "bad_header": b"[fluxion\ngpu_backend = 1\n",
    "bad_utf8": b'[fluxion]\ngpu_backend = "\xff\xfe"\n',
    "nul_byte": b'[fluxion]\ngpu_backend = "CU\x00DA"\n',
}

# The rest of a temporary file's name after ".NAME.tmp-HOST-": valid ones name a writer's pid.
TEMPORARY_NAMES = {
    "valid_pid_counter": b"12345-0",
    "valid_leading_zeros": b"007-12",
    "no_counter": b"12345-",
    "no_dash": b"12345",
    "negative_pid": b"-5-1",
    "plus_sign": b"+5-1",
    "zero_pid": b"0-1",
    "wider_than_pid_t": b"4294967297-1",
    "text_after_counter": b"12345-0.bak",
    "empty": b"",
}



def checkpoint(eta=b"0.10000000000000001", step=3, frozen=b"\x00", marker=True, extra=None, step_dtype="I64"):
    """A checkpoint of fx::Dense(2, 1) and fx::Descent, as fx::save_checkpoint writes it; eta is the metadata's text."""
    metadata = {"fluxion.checkpoint": "1"} if marker else {}
    if eta is not None:
        metadata["fluxion.optimiser.eta"] = eta.decode("latin-1")
    metadata.update(extra or {})
    step_bytes = struct.pack("<q", step) if step_dtype == "I64" else struct.pack("<i", step)
    step_size = len(step_bytes)
    tensors = [("model.weight", "F32", [1, 2], struct.pack("<2f", 0.5, -0.25)), ("model.bias", "F32", [1], struct.pack("<f", 0.125)),
               ("optimiser.weight.step", step_dtype, [], step_bytes), ("optimiser.weight.frozen", "BOOL", [], frozen),
               ("optimiser.bias.step", "I64", [], struct.pack("<q", 3)), ("optimiser.bias.frozen", "BOOL", [], b"\x01")]
    header, data = {"__metadata__": metadata}, b""
    for name, dtype, shape, content in tensors:
        header[name] = entry(dtype, shape, len(data), len(data) + len(content))
        data += content
    return safetensors(header, data)


# Checkpoints (fuzz_checkpoint; tests/test_fuzz_corpora.cpp loads them into fx::Dense(2, 1) and fx::Descent).
CHECKPOINT = {
    "valid_checkpoint": checkpoint(),
    "valid_exponent_eta": checkpoint(eta=b"1e-3"),
    "valid_extra_entries": checkpoint(extra={"extra.epoch": "7", "extra.": "", "extra.extra.x": "y"}),
    "valid_zero_step": checkpoint(step=0),
    "bool_byte_two": checkpoint(frozen=b"\x02"),
    "bool_byte_ff": checkpoint(frozen=b"\xff"),
    "negative_step": checkpoint(step=-1),
    "most_negative_step": checkpoint(step=-2**63),
    "step_as_i32": checkpoint(step_dtype="I32"),
    "eta_nan": checkpoint(eta=b"nan"),
    "eta_inf": checkpoint(eta=b"inf"),
    "eta_overflowing": checkpoint(eta=b"1e400"),
    "eta_empty": checkpoint(eta=b""),
    "eta_leading_space": checkpoint(eta=b" 0.1"),
    "eta_plus_sign": checkpoint(eta=b"+0.1"),
    "eta_trailing_text": checkpoint(eta=b"0.1x"),
    "eta_hex": checkpoint(eta=b"0x1p-3"),
    "no_eta": checkpoint(eta=None),
    "no_marker": checkpoint(marker=False),
    "plain_model_file": safetensors({"weight": entry("F32", [1, 2], 0, 8), "bias": entry("F32", [1], 8, 12)}, bytes(12)),
}

# The examples' command lines (fuzz_command_line): arguments separated by NUL bytes. Valid ones parse
# with fuzz_command_line's options; tests/test_examples.cpp runs the examples themselves.
COMMAND_LINE = {
    "valid_empty": b"",
    "valid_flags": b"--epochs\x003\x00--batchsize\x0064\x00--eager\x00--device\x00CPU",
    "valid_positional": b"2000",
    "valid_eta": b"--eta\x001e-3\x00--limit\x00007",
    "valid_help": b"--help\x00--epochs\x000",
    "help_after_a_bad_value": b"--epochs\x000\x00--help",
    "epochs_zero": b"--epochs\x000",
    "epochs_wider_than_int": b"--epochs\x004294967297",
    "batchsize_past_int64": b"--batchsize\x0099999999999999999999",
    "plus_sign": b"--epochs\x00+3",
    "leading_space": b"--epochs\x00 3",
    "trailing_text": b"--limit\x003x",
    "eta_nan": b"--eta\x00nan",
    "eta_hex": b"--eta\x000x1p-3",
    "missing_value": b"--epochs",
    "unknown": b"--epoch\x003",
    "two_positionals": b"1\x002",
}

# Values of OMPI_COMM_WORLD_LOCAL_RANK (and MPICH's, Slurm's): valid ones are local ranks.
RANK_VARIABLES = {
    "valid_zero": b"0",
    "valid_three": b"3",
    "valid_leading_zeros": b"007",
    "negative": b"-1",
    "plus_sign": b"+1",
    "space": b" 1",
    "trailing_text": b"1x",
    "overflow": b"99999999999999999999",
    "empty": b"",
}

# Any bytes are a valid file to map: the empty file, one byte, a page and a byte.
MAPPED_FILE = {
    "valid_empty": b"",
    "valid_one_byte": b"\x00",
    "valid_page_and_a_byte": bytes(range(256)) * 16 + b"\xff",
}

CORPORA = {"safetensors": SAFETENSORS, "checkpoint": CHECKPOINT, "command_line": COMMAND_LINE, "idx": IDX, "preferences": PREFERENCES, "temporary_names": TEMPORARY_NAMES,
           "rank_variables": RANK_VARIABLES, "mapped_file": MAPPED_FILE}

if __name__ == "__main__":
    for folder, seeds in CORPORA.items():
        (CORPUS / folder).mkdir(parents=True, exist_ok=True)
        for name, content in seeds.items():
            (CORPUS / folder / f"{name}.bin").write_bytes(content)
