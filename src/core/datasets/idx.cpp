// idx.cpp — reading IDX files (the format of MNIST and its relatives): a 4-byte magic number
// (0, 0, element type code, number of dimensions), one big-endian u32 per dimension, then the
// elements in big-endian, row-major order. zlib reads plain and gzip-compressed files alike.
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "fluxion/datasets.hpp"

namespace fluxion::datasets {
namespace fs = std::filesystem;

namespace {

// A file read through zlib, which passes files that are not gzip-compressed through unchanged.
class Reader {
public:
    Reader(const fs::path& path, std::string where) : where_(std::move(where)), file_(gzopen(path.c_str(), "rb")) {
        if (!file_) throw IOError(where_ + ": cannot open the file: " + std::strerror(errno));
        gzbuffer(file_, 1 << 17);
    }
    ~Reader() { gzclose(file_); }
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;

    // Up to n bytes; fewer only where the data ends. Throws on data zlib cannot decompress.
    std::size_t read(void* dst, std::size_t n) {
        auto* out = static_cast<unsigned char*>(dst);
        std::size_t got = 0;
        while (got < n) {
            const auto chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, INT_MAX));
            const int r = gzread(file_, out + got, chunk);
            if (r < 0) fail();
            if (r == 0) break;
            got += static_cast<std::size_t>(r);
        }
        if (got < n) {
            int code = Z_OK;
            gzerror(file_, &code);
            if (code != Z_OK) fail();  // a gzip stream that ends before its end marker: truncated
        }
        return got;
    }

private:
    [[noreturn]] void fail() {
        int code = Z_OK;
        const char* message = gzerror(file_, &code);
        throw IOError(where_ + ": the compressed data is corrupt or truncated (zlib: " + message +
                      "); download the file again");
    }

    std::string where_;
    gzFile file_;
};

struct ElementType {
    const char* name;   // as the IDX format names it
    std::size_t bytes;  // per element in the file
    DType dtype;        // what it is read as
};

ElementType element_type(unsigned code, const std::string& where) {
    switch (code) {
        case 0x08: return {"unsigned byte", 1, DType::u8};
        case 0x09: return {"signed byte", 1, DType::i32};
        case 0x0B: return {"short", 2, DType::i32};
        case 0x0C: return {"int", 4, DType::i32};
        case 0x0D: return {"float", 4, DType::f32};
        case 0x0E: return {"double", 8, DType::f64};
        default: {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02X", code);
            throw IOError(where + ": unknown element type code " + hex +
                          " in the magic number; IDX defines 0x08 (u8), 0x09 (i8), 0x0B (i16), 0x0C (i32), "
                          "0x0D (f32) and 0x0E (f64). The file is corrupt or not an IDX file");
        }
    }
}

std::uint64_t load_big_endian(const unsigned char* p, std::size_t bytes) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < bytes; ++i) v = v << 8 | p[i];
    return v;
}

// The file's big-endian elements as T, the type the tensor holds.
template <class T> void decode(const ElementType& type, const std::vector<unsigned char>& bytes, T* out) {
    const std::size_t n = bytes.size() / type.bytes;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t v = load_big_endian(&bytes[i * type.bytes], type.bytes);
        if constexpr (std::is_same_v<T, float>) out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(v));
        else if constexpr (std::is_same_v<T, double>) out[i] = std::bit_cast<double>(v);
        else if (type.bytes == 1) out[i] = static_cast<std::int8_t>(v);    // sign-extends
        else if (type.bytes == 2) out[i] = static_cast<std::int16_t>(v);
        else out[i] = static_cast<std::int32_t>(v);
    }
}

Tensor to_tensor(const ElementType& type, const Shape& shape, const std::vector<unsigned char>& bytes) {
    Tensor t = empty(shape, {.dtype = type.dtype});
    switch (type.dtype) {
        case DType::u8: std::copy(bytes.begin(), bytes.end(), t.data<std::uint8_t>()); break;  // no byte order
        case DType::i32: decode(type, bytes, t.data<std::int32_t>()); break;
        case DType::f32: decode(type, bytes, t.data<float>()); break;
        default: decode(type, bytes, t.data<double>()); break;
    }
    return t;
}

std::string describe(const Shape& shape, const ElementType& type) {
    return to_string(shape) + " " + type.name + " elements";
}

// The data after the header, grown as it arrives so a corrupt header cannot ask for a huge buffer.
std::vector<unsigned char> read_data(Reader& in, std::uint64_t expected, const std::string& where,
                                     const std::string& what) {
    constexpr std::size_t kChunk = 1 << 20;
    std::vector<unsigned char> data;
    while (data.size() < expected) {
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, expected - data.size()));
        const std::size_t old = data.size();
        data.resize(old + want);
        const std::size_t got = in.read(data.data() + old, want);
        if (got < want)
            throw IOError(where + ": the file is truncated: its header promises " + what + " (" +
                          std::to_string(expected) + " bytes of data), it holds " + std::to_string(old + got) +
                          "; download it again");
    }
    unsigned char extra;
    if (in.read(&extra, 1) != 0)
        throw IOError(where + ": the file holds more data than its header describes (" + what +
                      "); it is corrupt or not an IDX file");
    return data;
}

}  // namespace

Tensor read_idx(const fs::path& path) {
    const std::string where = "read_idx(\"" + path.string() + "\")";
    std::error_code ec;
    if (!fs::exists(path, ec)) throw IOError(where + ": no such file");
    if (fs::is_directory(path, ec)) throw IOError(where + ": this is a folder; pass the path of an IDX file");
    Reader in(path, where);

    unsigned char magic[4];
    const std::size_t got = in.read(magic, 4);
    if (got < 4)
        throw IOError(where + ": the file holds " + std::to_string(got) +
                      " bytes; an IDX file starts with a 4-byte magic number");
    if (magic[0] != 0 || magic[1] != 0) {
        char hex[16];
        std::snprintf(hex, sizeof hex, "0x%02X%02X%02X%02X", magic[0], magic[1], magic[2], magic[3]);
        throw IOError(where + ": not an IDX file: the magic number is " + hex +
                      ", while an IDX file starts with two zero bytes (e.g. 0x00000803 for u8 images)");
    }
    const ElementType type = element_type(magic[2], where);
    const int ndim = magic[3];
    if (ndim == 0 || ndim > backend::kMaxDims)
        throw IOError(where + ": the header gives " + std::to_string(ndim) + " dimensions; fluxion reads 1 to " +
                      std::to_string(backend::kMaxDims) + ". The file is corrupt or not an IDX file");

    unsigned char dims[4 * backend::kMaxDims];
    if (in.read(dims, 4 * static_cast<std::size_t>(ndim)) < 4 * static_cast<std::size_t>(ndim))
        throw IOError(where + ": the file is truncated inside its header (" + std::to_string(ndim) +
                      " dimension sizes expected); download it again");
    Shape shape;
    std::uint64_t bytes = type.bytes;
    bool too_big = false;
    for (int i = 0; i < ndim; ++i) {
        const std::uint64_t d = load_big_endian(&dims[4 * i], 4);
        shape.push_back(static_cast<std::int64_t>(d));
        too_big = too_big || (d != 0 && bytes > (std::uint64_t{1} << 62) / d);
        bytes *= d;
    }
    if (too_big)
        throw IOError(where + ": the header gives an impossible size " + to_string(shape) + "; the file is corrupt");
    return to_tensor(type, shape, read_data(in, bytes, where, describe(shape, type)));
}

}  // namespace fluxion::datasets
