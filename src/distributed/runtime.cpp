// runtime.cpp — starting and stopping MPI, who this process is, and the timeout that turns a
// collective stuck on a dead or diverged peer into an error instead of a hang.
#include "distributed/runtime.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "distributed/rank_variables.hpp"
#include "fluxion/distributed.hpp"

namespace fluxion::distributed {
namespace {

struct Runtime {
    std::mutex mutex;
    bool ready = false;
    bool mpi = false;        // false: a world of one without a launcher
    bool owns_mpi = false;   // init() started MPI, so it finalises it at exit
    std::string broken;      // why the processes are out of step, after a failed collective
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = 0, size = 1, local_rank = 0;
    std::chrono::duration<double> timeout{600};
};

Runtime& runtime() {
    static Runtime r;
    return r;
}

// mpirun (Open MPI), mpiexec.hydra (MPICH), srun and PMIx launchers each set one of these.
bool launched_by_mpi() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"})
        if (std::getenv(name)) return true;
    return false;
}

int local_rank_of(MPI_Comm comm) {
    if (const auto rank = detail::local_rank_from_environment()) return *rank;
    MPI_Comm node;
    detail::check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "init");
    int r = 0;
    MPI_Comm_rank(node, &r);
    MPI_Comm_free(&node);
    return r;
}

std::chrono::duration<double> timeout_from_environment() {
    const char* v = std::getenv("FLUXION_DISTRIBUTED_TIMEOUT");
    if (!v) return std::chrono::duration<double>(600);
    char* end = nullptr;
    const double seconds = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(seconds > 0))
        throw ValueError(std::string("fx::distributed::init: FLUXION_DISTRIBUTED_TIMEOUT is '") + v +
                         "'; it must be a positive number of seconds");
    return std::chrono::duration<double>(seconds);
}

std::string seconds(std::chrono::duration<double> d) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", d.count());
    return text;
}

// At exit: a clean finalize, unless a collective failed; then the peers may be blocked in one that
// will never complete, and only aborting the job ends them.
// A program that started MPI itself may also have finalised it already.
void finish() {
    Runtime& r = runtime();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (!r.broken.empty()) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Comm_free(&r.comm);
    if (r.owns_mpi) MPI_Finalize();
}

}  // namespace

void init() {
    Runtime& r = runtime();
    std::lock_guard lock(r.mutex);
    if (r.ready) return;
    r.timeout = timeout_from_environment();
    int already = 0;
    MPI_Initialized(&already);
    if (!already && !launched_by_mpi()) {
        r.ready = true;
        return;
    }
    if (!already) {
        int provided = 0;
        if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            throw CommunicationError("fx::distributed::init: MPI_Init_thread failed; is the program started by mpirun?");
        r.owns_mpi = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    detail::check(MPI_Comm_dup(MPI_COMM_WORLD, &r.comm), "init");
    MPI_Comm_set_errhandler(r.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(r.comm, &r.rank);
    MPI_Comm_size(r.comm, &r.size);
    r.local_rank = local_rank_of(r.comm);
    r.mpi = true;
    r.ready = true;
    std::atexit(finish);
}

bool initialized() { return runtime().ready; }

int rank() {
    detail::require_init("rank");
    return runtime().rank;
}
int world_size() {
    detail::require_init("world_size");
    return runtime().size;
}
int local_rank() {
    detail::require_init("local_rank");
    return runtime().local_rank;
}

void barrier() {
    detail::require_init("barrier");
    if (!detail::using_mpi()) return;
    std::vector<MPI_Request> request(1);
    detail::check(MPI_Ibarrier(detail::communicator(), request.data()), "barrier");
    detail::wait_all(request, "barrier");
}

namespace detail {

void require_init(const char* operation) {
    if (!runtime().ready)
        throw ValueError(std::string("fx::distributed::") + operation +
                         ": fx::distributed::init() has not been called; call it first, at the start of main");
    if (!runtime().broken.empty())
        throw CommunicationError(std::string("fx::distributed::") + operation + ": an earlier collective failed (" +
                                 runtime().broken + "), so the processes are out of step; restart the job");
}

bool using_mpi() { return runtime().mpi; }
MPI_Comm communicator() { return runtime().comm; }

std::chrono::duration<double> timeout() { return runtime().timeout; }

void fail(const char* operation, const std::string& why) {
    runtime().broken = std::string(operation) + ": " + why;
    throw CommunicationError(std::string("fx::distributed::") + operation + " on rank " +
                             std::to_string(runtime().rank) + ": " + why);
}

void check(int code, const char* operation) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    fail(operation, "MPI error: " + std::string(text, static_cast<std::size_t>(length)));
}

// Polls rather than blocking in MPI_Waitall, which has no timeout. Yielding between polls keeps
// oversubscribed processes (more ranks than cores) from starving the ones they wait for.
void wait_all(std::vector<MPI_Request>& requests, const char* operation) {
    Runtime& r = runtime();
    const auto deadline = std::chrono::steady_clock::now() + r.timeout;
    for (;;) {
        int done = 0;
        check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE), operation);
        if (done) return;
        if (std::chrono::steady_clock::now() > deadline)
            fail(operation, "the other processes did not take part within " + seconds(r.timeout) +
                                " s (FLUXION_DISTRIBUTED_TIMEOUT); one has probably failed or stopped, or they make "
                                "different collective calls");
        std::this_thread::yield();
    }
}

}  // namespace detail
}  // namespace fluxion::distributed
