// fuzz_checkpoint.cpp — libFuzzer target for the checkpoint reader's checks of a file, in the order
// fx::load_checkpoint makes them before it copies a byte (src/core/io/checkpoint.cpp): the safetensors
// header, the metadata (the marker, the learning rate parsed from text, the caller's entries), the
// BOOL bytes (each then read as C++'s bool, which UBSan checks) and the step counts. Any bytes must
// be accepted with what a checkpoint promises, or refused with an IOError naming the file; never
// crash. Also: any finite learning rate written reads back as the same double.
// Built by fuzz/CMakeLists.txt with clang's -fsanitize=fuzzer,address; see that file for how to run it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "core/io/checkpoint_format.hpp"
#include "core/io/safetensors_format.hpp"
#include "fluxion/error.hpp"

namespace {

namespace fd = fluxion::detail;

const std::string kWhere = "load_checkpoint(\"<fuzz>\"): ";

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The step counts of a checkpoint's optimiser: scalars of I64 (the reader refuses any other shape
// or dtype for them before it looks at their bytes).
bool is_step_count(const fd::TensorRecord& r) {
    return r.dtype == fluxion::DType::i64 && r.shape.empty() && r.name.rfind("optimiser.", 0) == 0 &&
           (ends_with(r.name, ".step") || ends_with(r.name, ".accumulated_steps"));
}

void read_checkpoint(std::span<const std::byte> file) {
    const fd::SafetensorsHeader header = fd::parse_safetensors(file, "<fuzz>");
    const fd::CheckpointMetadata metadata = fd::read_checkpoint_metadata(header.metadata, kWhere);
    for (const auto& r : header.tensors) {
        const std::span<const std::byte> bytes = file.subspan(header.data_start + r.begin, r.end - r.begin);
        if (r.dtype == fluxion::DType::boolean) fd::check_bool_bytes(bytes, r.name, kWhere);
        if (is_step_count(r) && fd::read_step_count(bytes, r.name, kWhere) < 0) std::abort();
    }
    // Accepted: what the loader goes on to read is defined.
    if (!std::isfinite(metadata.eta)) std::abort();
    std::size_t ones = 0;
    for (const auto& r : header.tensors)
        if (r.dtype == fluxion::DType::boolean)
            for (std::uint64_t i = r.begin; i < r.end; ++i)  // as the loader reads `frozen`: a byte but 0 or 1
                ones += *reinterpret_cast<const bool*>(file.data() + header.data_start + i);  // fails UBSan here
    asm volatile("" : : "r"(ones));  // keeps the reads from being optimised away
    std::size_t extra = 0;
    for (const auto& [key, value] : header.metadata)
        if (key.rfind(fd::kCheckpointExtra, 0) == 0) {
            ++extra;
            const auto it = metadata.extra.find(key.substr(std::strlen(fd::kCheckpointExtra)));
            if (it == metadata.extra.end() || it->second != value) std::abort();
        }
    if (extra != metadata.extra.size()) std::abort();
    // Written again, the metadata reads back the same.
    const auto again = fd::read_checkpoint_metadata(fd::checkpoint_metadata(metadata.eta, metadata.extra), kWhere);
    if (std::memcmp(&again.eta, &metadata.eta, sizeof(double)) != 0 || again.extra != metadata.extra) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
    try {
        read_checkpoint(file);
    } catch (const fluxion::IOError& e) {
        const std::string m = e.what();  // names the file, as the reader's errors do
        if (m.rfind(kWhere, 0) != 0 && m.find("\"<fuzz>\" as safetensors") == std::string::npos) std::abort();
    }
    // The first 8 bytes as a learning rate: every finite double is written with enough digits.
    if (size >= sizeof(double)) {
        double eta;
        std::memcpy(&eta, data, sizeof eta);
        if (std::isfinite(eta)) {
            const double back = fd::read_checkpoint_metadata(fd::checkpoint_metadata(eta, {}), kWhere).eta;
            if (std::memcmp(&back, &eta, sizeof eta) != 0) std::abort();
        }
    }
    return 0;
}
