// runtime.hpp — the MPI side shared by the collectives: the job's communicator, error checking,
// and waiting for requests under the collective timeout.
#pragma once
#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

namespace fluxion::distributed::detail {

// Throws ValueError naming `operation` unless init() has run.
void require_init(const char* operation);
// False in a world of one process started without a launcher (no MPI at all).
bool using_mpi();
// fluxion's own duplicate of MPI_COMM_WORLD, with MPI_ERRORS_RETURN.
MPI_Comm communicator();
// Throws CommunicationError with MPI's message unless `code` is MPI_SUCCESS.
void check(int code, const char* operation);
// How long a collective may wait for the other processes (FLUXION_DISTRIBUTED_TIMEOUT).
std::chrono::duration<double> timeout();
// Records that the processes are out of step (later collectives refuse to run, the exit aborts
// the job) and throws CommunicationError naming `operation` and this rank.
[[noreturn]] void fail(const char* operation, const std::string& why);
// Waits for every request; CommunicationError after the timeout (the job is then out of step).
void wait_all(std::vector<MPI_Request>& requests, const char* operation);

}  // namespace fluxion::distributed::detail
