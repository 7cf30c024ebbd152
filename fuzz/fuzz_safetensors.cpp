// fuzz_safetensors.cpp — libFuzzer target for the safetensors reader: any bytes must either parse
// into ranges that lie inside the input or raise IOError, never crash or read out of bounds.
// Built by fuzz/CMakeLists.txt with clang's -fsanitize=fuzzer,address; see that file for how to run it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/io/safetensors_format.hpp"
#include "fluxion/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
    try {
        const auto header = fluxion::detail::parse_safetensors(file, "<fuzz>");
        // What an accepted header promises: ranges in bounds, tiling the data section in order,
        // each exactly shape × dtype bytes long.
        if (header.data_start > size) std::abort();
        std::uint64_t covered = 0;
        for (const auto& t : header.tensors) {
            if (t.begin != covered || t.end < t.begin || t.end > size - header.data_start) std::abort();
            std::uint64_t bytes = fluxion::itemsize(t.dtype);
            for (auto d : t.shape)
                if (d < 0 || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes)) std::abort();
            if (bytes != t.end - t.begin) std::abort();
            covered = t.end;
        }
        if (covered != size - header.data_start) std::abort();
        // Read every claimed byte, as a loader would: ASan reports any read outside the input.
        std::uint8_t checksum = 0;
        for (const auto& t : header.tensors)
            for (std::uint64_t i = header.data_start + t.begin; i < header.data_start + t.end; ++i) checksum ^= data[i];
        asm volatile("" : : "r"(checksum));  // keeps the reads from being optimised away
        return 0;
    } catch (const fluxion::IOError&) {
        return 0;  // a clear rejection is the expected outcome for most inputs
    }
}
