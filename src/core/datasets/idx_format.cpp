// idx_format.cpp — reading IDX headers and data through zlib, which passes files that are not
// gzip-compressed through unchanged. Every size in a header is untrusted: their product is checked
// for overflow and the data is read in chunks, so only bytes that exist are ever allocated.
#include "core/datasets/idx_format.hpp"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "core/backend.hpp"
#include "fluxion/error.hpp"

namespace fluxion::detail {
namespace fs = std::filesystem;

namespace {

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

IdxElementType element_type(unsigned code, const std::string& where) {
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
template <class T> void decode(const IdxContents& c, T* out) {
    const std::size_t size = c.type.bytes;
    const std::size_t n = c.data.size() / size;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t v = load_big_endian(&c.data[i * size], size);
        if constexpr (std::is_same_v<T, float>) out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(v));
        else if constexpr (std::is_same_v<T, double>) out[i] = std::bit_cast<double>(v);
        else if (size == 1) out[i] = static_cast<std::int8_t>(v);  // sign-extends
        else if (size == 2) out[i] = static_cast<std::int16_t>(v);
        else out[i] = static_cast<std::int32_t>(v);
    }
}

std::string describe(const std::vector<std::int64_t>& shape, const IdxElementType& type) {
    std::string s = "{";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "} " + type.name + " elements";
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

IdxContents read_idx_contents(const fs::path& path, const std::string& where) {
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
    IdxContents c{.type = element_type(magic[2], where), .shape = {}, .data = {}};
    const int ndim = magic[3];
    if (ndim == 0 || ndim > backend::kMaxDims)
        throw IOError(where + ": the header gives " + std::to_string(ndim) + " dimensions; fluxion reads 1 to " +
                      std::to_string(backend::kMaxDims) + ". The file is corrupt or not an IDX file");

    unsigned char dims[4 * backend::kMaxDims];
    if (in.read(dims, 4 * static_cast<std::size_t>(ndim)) < 4 * static_cast<std::size_t>(ndim))
        throw IOError(where + ": the file is truncated inside its header (" + std::to_string(ndim) +
                      " dimension sizes expected); download it again");
    std::uint64_t bytes = c.type.bytes;
    bool too_big = false;
    for (int i = 0; i < ndim; ++i) {
        const std::uint64_t d = load_big_endian(&dims[4 * i], 4);
        c.shape.push_back(static_cast<std::int64_t>(d));
        too_big = too_big || (d != 0 && bytes > (std::uint64_t{1} << 62) / d);
        bytes *= d;
    }
    if (too_big)
        throw IOError(where + ": the header gives an impossible size " + describe(c.shape, c.type) +
                      "; the file is corrupt");
    c.data = read_data(in, bytes, where, describe(c.shape, c.type));
    return c;
}

void decode_idx(const IdxContents& c, void* out) {
    switch (c.type.dtype) {
        case DType::u8: std::copy(c.data.begin(), c.data.end(), static_cast<std::uint8_t*>(out)); break;  // as is
        case DType::i32: decode(c, static_cast<std::int32_t*>(out)); break;
        case DType::f32: decode(c, static_cast<float*>(out)); break;
        default: decode(c, static_cast<double*>(out)); break;
    }
}

}  // namespace fluxion::detail
