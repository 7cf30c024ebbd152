// fuzz_temporary_names.cpp — libFuzzer target for the parsing of a writer's process id out of the
// names of temporary files (src/core/io/atomic_file.cpp), which deletes the files of writers that
// are gone: any name must give 0 (not a temporary) or a process id that the name spells exactly as
// "PID-N", so that no other file is taken for a stale temporary and no number is cut down to
// another process (or, negative, a process group).
// Built by fuzz/CMakeLists.txt with clang's -fsanitize=fuzzer,address; see that file for how to run it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/io/atomic_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string rest(reinterpret_cast<const char*>(data), size);
    const pid_t pid = fluxion::detail::temporary_writer(rest);
    if (pid < 0) std::abort();
    if (pid == 0) return 0;
    // Accepted: the digits before the one '-' read back as the pid (leading zeros allowed), and the
    // counter after it is digits only.
    const std::size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0 || dash + 1 == rest.size()) std::abort();
    if (std::strtoll(rest.substr(0, dash).c_str(), nullptr, 10) != pid) std::abort();
    for (std::size_t i = 0; i < rest.size(); ++i)
        if (i != dash && (rest[i] < '0' || rest[i] > '9')) std::abort();
    return 0;
}
