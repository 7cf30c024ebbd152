// state_reader.hpp — loading a file into existing tensors, shared by fx::load and load_checkpoint.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "fluxion/io.hpp"

namespace fluxion::detail {

using MetadataCheck = std::function<void(const std::map<std::string, std::string>& metadata)>;

// Words for the strict-mismatch error: "<operation>("path"): the file does not match the <target>, ...", then <fix>.
struct ReadTarget {
    const char* operation;
    const char* target;
    const char* fix;
};

// Copies the file's tensors into `targets` (handles on existing storage, any device). Names,
// shapes and dtypes are compared first, and `check_metadata` (if set) sees the file's metadata
// and throws to refuse it, all before the first byte is copied.
LoadReport read_into(const std::filesystem::path& path, const State& targets, LoadOptions options,
                     const ReadTarget& what, const MetadataCheck& check_metadata);

}  // namespace fluxion::detail
