// checkpoint_format.hpp — what a checkpoint file holds beyond safetensors, as text and bytes: its
// metadata (the marker, the learning rate, the caller's entries) and its step counts. Knows nothing
// about tensors, so the fuzzer builds it alone with safetensors_format.cpp (fuzz/fuzz_checkpoint.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>

namespace fluxion::detail {

inline constexpr const char* kCheckpointMarker = "fluxion.checkpoint";  // metadata: the layout's version
inline constexpr const char* kCheckpointEta = "fluxion.optimiser.eta";  // metadata: the learning rate
inline constexpr const char* kCheckpointExtra = "extra.";               // metadata: the caller's entries, prefixed

struct CheckpointMetadata {
    double eta = 0;                            // the learning rate in effect, finite
    std::map<std::string, std::string> extra;  // the caller's entries, without their prefix
};

// The file's metadata for `eta` and the caller's `extra` entries (the learning rate written with
// enough digits to read back the same double).
std::map<std::string, std::string> checkpoint_metadata(double eta, const std::map<std::string, std::string>& extra);

// Reads what checkpoint_metadata wrote. Throws IOError beginning with `where` (`load_checkpoint("path"): `)
// where the marker or the learning rate is missing, or the learning rate is not exactly the text of
// a finite number.
CheckpointMetadata read_checkpoint_metadata(const std::map<std::string, std::string>& metadata, const std::string& where);

// A step count's 8 bytes (a native int64). Throws IOError beginning with `where` and naming the
// tensor `name` where it is negative.
std::int64_t read_step_count(std::span<const std::byte> bytes, const std::string& name, const std::string& where);

}  // namespace fluxion::detail
