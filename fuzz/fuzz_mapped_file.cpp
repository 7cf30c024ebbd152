// fuzz_mapped_file.cpp — libFuzzer target for MappedFile (src/core/io/mapped_file.cpp), through
// which every saved file is read: any file, empty included, maps to exactly its bytes, and every
// byte of the mapping is readable.
// Built by fuzz/CMakeLists.txt with clang's -fsanitize=fuzzer,address; see that file for how to run it.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/io/mapped_file.hpp"
#include "fluxion/error.hpp"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // In /dev/shm where there is one: every input is written to a file.
    static const fs::path file = (fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path()) /
                                 ("fluxion-fuzz-mapped-" + std::to_string(::getpid()));
    {
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    const fluxion::detail::MappedFile mapped(file);
    const auto bytes = mapped.bytes();
    if (bytes.size() != size) std::abort();
    if (size > 0 && std::memcmp(bytes.data(), data, size) != 0) std::abort();
    return 0;
}
