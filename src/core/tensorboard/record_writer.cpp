// record_writer.cpp — TFRecord framing over stdio. Each record is flushed as it is written, so that
// a TensorBoard reading the file while training runs sees whole records, and a crash loses at most
// the record being written (readers stop at a truncated last record).
#include "core/tensorboard/record_writer.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <unistd.h>

#include "fluxion/error.hpp"

namespace fluxion::detail {

namespace {

// The reflected Castagnoli polynomial's table: one lookup per byte.
constexpr std::array<std::uint32_t, 256> crc32c_table() {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
    return table;
}
constexpr auto kTable = crc32c_table();

void put_le(unsigned char* out, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < bytes; ++i) c = kTable[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(const void* data, std::size_t bytes) {
    const std::uint32_t c = crc32c(data, bytes);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

RecordWriter::RecordWriter(const std::filesystem::path& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_)
        throw IOError("TensorBoardLogger: cannot create \"" + path.string() + "\": " + std::strerror(errno));
}

RecordWriter::~RecordWriter() {
    if (file_) std::fclose(file_);
}

void RecordWriter::write(std::string_view record) {
    unsigned char header[12], footer[4];
    put_le(header, record.size(), 8);
    put_le(header + 8, masked_crc32c(header, 8), 4);
    put_le(footer, masked_crc32c(record.data(), record.size()), 4);
    const bool ok = std::fwrite(header, 1, sizeof header, file_) == sizeof header &&
                    std::fwrite(record.data(), 1, record.size(), file_) == record.size() &&
                    std::fwrite(footer, 1, sizeof footer, file_) == sizeof footer && std::fflush(file_) == 0;
    if (!ok) throw IOError("TensorBoardLogger: cannot write to \"" + path_.string() + "\": " + std::strerror(errno));
}

void RecordWriter::flush() {
    if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0)
        throw IOError("TensorBoardLogger: cannot flush \"" + path_.string() + "\": " + std::strerror(errno));
}

}  // namespace fluxion::detail
