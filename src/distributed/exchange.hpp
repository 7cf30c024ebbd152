// exchange.hpp — reductions of host memory over every process with MPI's nonblocking collectives,
// in buckets of at most bucket_bytes that are all in flight at once. A reduction can be started and
// finished apart, so that other work runs between (AverageGradients during the backward pass).
#pragma once
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "fluxion/distributed.hpp"

namespace fluxion::distributed::detail {

// MPI has no half-precision types: f16 and bf16 travel, and are summed, as f32.
DType wire_dtype(DType d);
MPI_Datatype mpi_type(DType d);
// Throws DTypeError for a reduction the element type does not have.
MPI_Op mpi_op(ReduceOp op, DType d, const char* operation);

// Starts one nonblocking collective per bucket of at most bucket_bytes of `count` elements of
// `wire` at `data`, appending its requests.
using Start = std::function<int(void* data, int count, MPI_Datatype type, MPI_Request* request)>;
void start_buckets(void* data, std::size_t count, DType wire, std::size_t bucket_bytes, const Start& start,
                   std::vector<MPI_Request>& requests, const char* operation);

// The in-place allreduce of `count` elements of `wire` at `data`: started, then finished (the
// requests waited for under the collective timeout, and the sum divided for a mean).
void start_allreduce(void* data, std::size_t count, DType wire, ReduceOp op, std::size_t bucket_bytes,
                     std::vector<MPI_Request>& requests, const char* operation);
void finish_allreduce(void* data, std::size_t count, DType wire, ReduceOp op, std::vector<MPI_Request>& requests,
                      const char* operation);
// Both at once.
void exchange(void* data, std::size_t count, DType wire, ReduceOp op, std::size_t bucket_bytes, const char* operation);

// Every rank must pass the same number of tensors with the same shapes and dtypes (devices may
// differ): one small allreduce of a digest, compared by its maximum and minimum; CommunicationError
// naming this rank's tensors otherwise (collectives.cpp).
void check_same_everywhere(const std::vector<Tensor>& tensors, const char* operation);

}  // namespace fluxion::distributed::detail
