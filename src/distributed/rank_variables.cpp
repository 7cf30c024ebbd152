// rank_variables.cpp — parsing the launcher's local rank strictly (std::atoi accepted "1x", " 1"
// and "-3", and overflowing text was undefined behaviour).
#include "distributed/rank_variables.hpp"

#include <charconv>
#include <cstdlib>
#include <string>
#include <system_error>

#include "fluxion/error.hpp"

namespace fluxion::distributed::detail {

int parse_local_rank(std::string_view variable, std::string_view value) {
    int rank = -1;
    const char* last = value.data() + value.size();
    const auto [end, error] = std::from_chars(value.data(), last, rank);
    const bool digits_only = !value.empty() && value.front() >= '0' && value.front() <= '9';
    if (!digits_only || error != std::errc() || end != last || rank < 0)
        throw ValueError("fx::distributed::init: " + std::string(variable) + " is '" + std::string(value) +
                         "', not a local rank (a whole number from 0); check the launcher's environment");
    return rank;
}

std::optional<int> local_rank_from_environment() {
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
        if (const char* v = std::getenv(name)) return parse_local_rank(name, v);
    return std::nullopt;
}

}  // namespace fluxion::distributed::detail
