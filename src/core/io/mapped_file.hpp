// mapped_file.hpp — a whole file mapped read-only into memory, for reading without copying it first.
#pragma once
#include <cstddef>
#include <filesystem>
#include <span>

namespace fluxion::detail {

// Maps `path` read-only (MAP_PRIVATE) for the lifetime of the object; throws IOError naming the
// file and the reason when it cannot be opened, is not a regular file, or cannot be mapped.
class MappedFile {
public:
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }

private:
    void* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace fluxion::detail
