// state_reader.hpp — loading a file into existing tensors, shared by fx::load and load_checkpoint.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "fluxion/io.hpp"

namespace fluxion::detail {

using MetadataCheck = std::function<void(const std::map<std::string, std::string>& metadata)>;
// Sees a matched tensor's bytes in the file (its name, then the bytes) and throws to refuse them.
using ValueCheck = std::function<void(const std::string& name, std::span<const std::byte> bytes)>;

// Words for the strict-mismatch error: "<operation>("path"): the file does not match the <target>, ...", then <fix>.
struct ReadTarget {
    const char* operation;
    const char* target;
    const char* fix;
};

// Copies the file's tensors into `targets` (handles on existing storage, any device). Names,
// shapes and dtypes are compared first, `check_metadata` (if set) sees the file's metadata, BOOL
// tensors must hold only the bytes 0 and 1, and `check_values` (if set) sees each matched tensor's
// bytes; each throws to refuse the file, all before the first byte is copied.
LoadReport read_into(const std::filesystem::path& path, const State& targets, LoadOptions options,
                     const ReadTarget& what, const MetadataCheck& check_metadata, const ValueCheck& check_values = {});

}  // namespace fluxion::detail
