// record_writer.hpp — appends records to a file in TensorFlow's record framing, which TensorBoard's
// event files use: each record is its length, a checksum of the length, the bytes, a checksum of
// the bytes (CRC-32C, masked).
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string_view>

namespace fluxion::detail {

// CRC-32C (Castagnoli), as iSCSI and TFRecord use it; crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(const void* data, std::size_t bytes);
// TFRecord's masking of a stored CRC (so that a CRC of bytes holding CRCs stays well mixed).
std::uint32_t masked_crc32c(const void* data, std::size_t bytes);

class RecordWriter {
public:
    // Creates `path` (IOError naming it and the system's reason when it cannot).
    explicit RecordWriter(const std::filesystem::path& path);
    ~RecordWriter();
    RecordWriter(const RecordWriter&) = delete;
    RecordWriter& operator=(const RecordWriter&) = delete;

    void write(std::string_view record);  // the whole record reaches the OS before it returns
    void flush();                          // and the disk (fsync)

private:
    std::filesystem::path path_;
    std::FILE* file_ = nullptr;
};

}  // namespace fluxion::detail
