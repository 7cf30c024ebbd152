// fuzz_rank_variables.cpp — libFuzzer target for the launcher's local-rank variables
// (src/distributed/rank_variables.cpp): any value must give a rank that is exactly its decimal
// text, or raise ValueError naming the variable; never crash or wrap.
// Built by fuzz/CMakeLists.txt with clang's -fsanitize=fuzzer,address; see that file for how to run it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "distributed/rank_variables.hpp"
#include "fluxion/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string value(reinterpret_cast<const char*>(data), size);
    try {
        const int rank = fluxion::distributed::detail::parse_local_rank("OMPI_COMM_WORLD_LOCAL_RANK", value);
        if (rank < 0) std::abort();
        // Accepted: digits only, reading back as the rank (leading zeros allowed).
        for (char c : value)
            if (c < '0' || c > '9') std::abort();
        if (std::strtoll(value.c_str(), nullptr, 10) != rank) std::abort();
    } catch (const fluxion::ValueError& e) {
        if (std::string(e.what()).find("OMPI_COMM_WORLD_LOCAL_RANK") == std::string::npos) std::abort();
    }
    return 0;
}
