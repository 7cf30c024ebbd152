// idx_format.hpp — the IDX file format (MNIST and its relatives) as bytes: reading and checking the
// header and the data of a plain or gzip-compressed file, and decoding the big-endian elements.
// Knows nothing about tensors, so the fuzzer (fuzz/fuzz_idx.cpp) can build it alone; read_idx
// (idx.cpp) puts the result in a tensor.
//
// Layout: a 4-byte magic number (0, 0, element type code, number of dimensions), one big-endian
// u32 per dimension, then the elements in big-endian, row-major order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fluxion/dtype.hpp"

namespace fluxion::detail {

struct IdxElementType {
    const char* name;   // as the IDX format names it
    std::size_t bytes;  // per element in the file
    DType dtype;        // what it is read as
};

struct IdxContents {
    IdxElementType type;
    std::vector<std::int64_t> shape;  // 1 to backend::kMaxDims sizes, each below 2^32
    std::vector<unsigned char> data;  // exactly (product of shape) × type.bytes bytes, as in the file
};

// Reads the whole file. Throws IOError starting with `where` when the file cannot be opened, is not
// IDX, is truncated, holds more data than its header describes, or its gzip stream is corrupt. The
// buffer grows with the data actually read, so a header declaring a huge shape allocates nothing
// beyond what the file holds.
IdxContents read_idx_contents(const std::filesystem::path& path, const std::string& where);

// Writes the elements to `out` as contents.type.dtype values (one per element, in order).
void decode_idx(const IdxContents& contents, void* out);

}  // namespace fluxion::detail
