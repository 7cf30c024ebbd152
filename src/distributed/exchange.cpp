// exchange.cpp — MPI's nonblocking allreduce over host memory, in buckets.
#include "distributed/exchange.hpp"

#include <algorithm>
#include <string>

#include "distributed/runtime.hpp"

namespace fluxion::distributed::detail {

DType wire_dtype(DType d) { return d == DType::f16 || d == DType::bf16 ? DType::f32 : d; }

MPI_Datatype mpi_type(DType d) {
    switch (d) {
        case DType::f32: return MPI_FLOAT;
        case DType::f64: return MPI_DOUBLE;
        case DType::i32: return MPI_INT32_T;
        case DType::i64: return MPI_INT64_T;
        case DType::u8: return MPI_UINT8_T;
        case DType::boolean: return MPI_C_BOOL;
        default: return MPI_BYTE;
    }
}

MPI_Op mpi_op(ReduceOp op, DType d, const char* operation) {
    if (op == ReduceOp::mean && !is_floating(d))
        throw DTypeError(std::string("fx::distributed::") + operation + ": the mean of a " + fluxion::name(d) +
                         " tensor is not a " + fluxion::name(d) +
                         "; use ReduceOp::sum and divide, or cast the tensor to f32 first");
    if (d == DType::boolean) return op == ReduceOp::min ? MPI_LAND : MPI_LOR;
    switch (op) {
        case ReduceOp::sum:
        case ReduceOp::mean: return MPI_SUM;
        case ReduceOp::max: return MPI_MAX;
        case ReduceOp::min: return MPI_MIN;
    }
    return MPI_SUM;
}

void start_buckets(void* data, std::size_t count, DType wire, std::size_t bucket_bytes, const Start& start,
                   std::vector<MPI_Request>& requests, const char* operation) {
    const std::size_t item = itemsize(wire);
    const std::size_t per_bucket = std::max<std::size_t>(1, bucket_bytes / item);
    for (std::size_t first = 0; first < count; first += per_bucket) {
        MPI_Request r;
        check(start(static_cast<std::byte*>(data) + first * item, static_cast<int>(std::min(per_bucket, count - first)),
                    mpi_type(wire), &r),
              operation);
        requests.push_back(r);
    }
}

namespace {
template <class T> void divide(void* data, std::size_t count, int by) {
    T* x = static_cast<T*>(data);
    for (std::size_t i = 0; i < count; ++i) x[i] /= static_cast<T>(by);
}
}  // namespace

void start_allreduce(void* data, std::size_t count, DType wire, ReduceOp op, std::size_t bucket_bytes,
                     std::vector<MPI_Request>& requests, const char* operation) {
    const MPI_Op reduce = mpi_op(op, wire, operation);
    start_buckets(
        data, count, wire, bucket_bytes,
        [&](void* at, int n, MPI_Datatype type, MPI_Request* r) {
            return MPI_Iallreduce(MPI_IN_PLACE, at, n, type, reduce, communicator(), r);
        },
        requests, operation);
}

void finish_allreduce(void* data, std::size_t count, DType wire, ReduceOp op, std::vector<MPI_Request>& requests,
                      const char* operation) {
    wait_all(requests, operation);
    requests.clear();
    if (op == ReduceOp::mean)
        wire == DType::f64 ? divide<double>(data, count, world_size()) : divide<float>(data, count, world_size());
}

void exchange(void* data, std::size_t count, DType wire, ReduceOp op, std::size_t bucket_bytes, const char* operation) {
    std::vector<MPI_Request> requests;
    start_allreduce(data, count, wire, op, bucket_bytes, requests, operation);
    finish_allreduce(data, count, wire, op, requests, operation);
}

}  // namespace fluxion::distributed::detail
