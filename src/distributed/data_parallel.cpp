// data_parallel.cpp — averaging gradients across processes, and writing files from rank 0 only.
#include <exception>
#include <string>
#include <vector>

#include "distributed/overlap.hpp"
#include "distributed/runtime.hpp"
#include "fluxion/distributed.hpp"

namespace fluxion::distributed {

void AverageGradients::prepare(const std::vector<Tensor>& params) const {
    if (overlap) detail::plan_overlap(params, bucket_bytes);
}

void AverageGradients::modify(std::vector<Tensor>& grads, const std::vector<Tensor>& params) const {
    if (overlap && detail::finish_overlap(grads, params, bucket_bytes)) return;
    grads = detail::allreduce(grads, ReduceOp::mean, bucket_bytes, "AverageGradients");
    if (overlap) detail::plan_overlap(params, bucket_bytes);  // the next steps overlap
}

namespace detail {

// Rank 0 writes while the others wait in a broadcast of its outcome: the error text, empty when
// the file is complete. Rank 0 rethrows its own exception; the others throw IOError quoting it.
void on_rank0(const char* operation, const std::function<void()>& write) {
    require_init(operation);
    if (!using_mpi()) return write();
    std::exception_ptr failure;
    std::string message;
    if (rank() == 0) {
        try {
            write();
        } catch (const std::exception& e) {
            failure = std::current_exception();
            message = e.what();
            if (message.empty()) message = "an error without a message";
        }
    }
    std::int64_t length = static_cast<std::int64_t>(message.size());
    std::vector<MPI_Request> request(1);
    check(MPI_Ibcast(&length, 1, MPI_INT64_T, 0, communicator(), request.data()), operation);
    wait_all(request, operation);
    message.resize(static_cast<std::size_t>(length));
    if (length > 0) {
        check(MPI_Ibcast(message.data(), static_cast<int>(length), MPI_CHAR, 0, communicator(), request.data()),
              operation);
        wait_all(request, operation);
    }
    if (failure) std::rethrow_exception(failure);
    if (length > 0) throw IOError(std::string(operation) + ": rank 0 failed to write the file: " + message);
}

}  // namespace detail
}  // namespace fluxion::distributed
