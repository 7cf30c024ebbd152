// rank_variables.hpp — the launcher's environment variables that give a process its rank on its
// machine (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, Slurm's SLURM_LOCALID):
// outside input, read without MPI so that it can be tested and fuzzed on its own.
#pragma once
#include <optional>
#include <string_view>

namespace fluxion::distributed::detail {

// The local rank that `variable` holds as `value`: a decimal int from 0, nothing else (no sign, no
// spaces, no trailing text). Anything else throws ValueError naming the variable and its value:
// a garbled rank would pick another process's GPU without a word.
int parse_local_rank(std::string_view variable, std::string_view value);

// The first of the variables above that is set, parsed; none where no launcher set one.
std::optional<int> local_rank_from_environment();

}  // namespace fluxion::distributed::detail
