// safetensors_format.hpp — the safetensors container, as bytes: reading and checking a header,
// and encoding one. Knows nothing about tensors or devices, so the fuzzer can build it alone.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {string: string}, "name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...}
// then the tensor bytes; offsets count from the first byte after the header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fluxion/dtype.hpp"

namespace fluxion::detail {

// Headers larger than this are refused as corrupt before any parsing (the format's own limit).
inline constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

struct TensorRecord {
    std::string name;
    DType dtype = DType::f32;
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0;  // byte range [begin, end) relative to the data section
    std::uint64_t end = 0;
};

struct SafetensorsHeader {
    std::vector<TensorRecord> tensors;  // in data order (ascending offsets)
    std::map<std::string, std::string> metadata;
    std::uint64_t data_start = 0;  // offset of the data section in the file
};

const char* format_dtype_name(DType t);  // "F32", "BF16", ...

// Checks the whole header against the bytes that follow it: every tensor's range lies inside the
// data section, ranges tile it without gaps or overlaps, and each range holds exactly
// shape × dtype bytes. Throws IOError naming `source` and the problem; never reads out of bounds.
SafetensorsHeader parse_safetensors(std::span<const std::byte> file, std::string_view source);

// The 8-byte length and the JSON header for `tensors` (whose offsets must already be set), padded
// with spaces so that the data section starts at a multiple of 8. Tensors keep their given order.
// BOOL holds the bytes 0 and 1 only: any other byte, read as C++'s bool, is undefined behaviour.
// Throws IOError beginning with `where` and naming the tensor `name` and its first other byte.
void check_bool_bytes(std::span<const std::byte> bytes, const std::string& name, const std::string& where);

std::string encode_safetensors_header(const std::vector<TensorRecord>& tensors,
                                      const std::map<std::string, std::string>& metadata);

}  // namespace fluxion::detail
