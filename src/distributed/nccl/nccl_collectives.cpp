// nccl_collectives.cpp — libfluxion-nccl.so: allreduce and broadcast between CUDA devices with NCCL,
// on the GPUs' own memory. Loaded by libfluxion-distributed on the first collective over a CUDA
// tensor. Per device one NCCL communicator (its id sent from rank 0 over MPI) and one stream.
//
// Built and linked where the CUDA toolkit has NCCL; it has not yet run on GPU hardware.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "distributed/device_collectives.hpp"
#include "distributed/runtime.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::distributed::detail {
namespace {

void check_cuda(cudaError_t code, const char* operation, const char* call) {
    if (code != cudaSuccess) fail(operation, std::string(call) + ": " + cudaGetErrorString(code));
}
void check_nccl(ncclResult_t code, const char* operation, const char* call) {
    if (code != ncclSuccess && code != ncclInProgress) fail(operation, std::string(call) + ": " + ncclGetErrorString(code));
}

ncclDataType_t nccl_type(DType d) {
    switch (d) {
        case DType::f32: return ncclFloat32;
        case DType::f64: return ncclFloat64;
        case DType::f16: return ncclFloat16;
        case DType::bf16: return ncclBfloat16;
        case DType::i32: return ncclInt32;
        case DType::i64: return ncclInt64;
        default: return ncclUint8;  // u8, and bool as bytes 0 and 1
    }
}

// bool: or is max over {0, 1}, and is min.
ncclRedOp_t nccl_op(ReduceOp op, DType d) {
    if (d == DType::boolean) return op == ReduceOp::min ? ncclMin : ncclMax;
    switch (op) {
        case ReduceOp::sum: return ncclSum;
        case ReduceOp::mean: return ncclAvg;
        case ReduceOp::max: return ncclMax;
        case ReduceOp::min: return ncclMin;
    }
    return ncclSum;
}

struct Channel {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
};

// The communicator of one device: every rank creates its own at the same collective call.
Channel& channel(int device, const char* operation) {
    static std::map<int, Channel> channels;
    auto found = channels.find(device);
    if (found != channels.end()) return found->second;
    check_cuda(cudaSetDevice(device), operation, "cudaSetDevice");
    ncclUniqueId id{};
    if (rank() == 0) check_nccl(ncclGetUniqueId(&id), operation, "ncclGetUniqueId");
    std::vector<MPI_Request> request(1);
    check(MPI_Ibcast(&id, sizeof id, MPI_BYTE, 0, communicator(), request.data()), operation);
    wait_all(request, operation);
    Channel c;
    check_nccl(ncclCommInitRank(&c.comm, world_size(), id, rank()), operation, "ncclCommInitRank");
    check_cuda(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking), operation, "cudaStreamCreateWithFlags");
    return channels.emplace(device, c).first->second;
}

// Waits for the stream under the collective timeout; a peer that never joins aborts the communicator.
void wait(Channel& c, const char* operation) {
    const auto deadline = std::chrono::steady_clock::now() + timeout();
    for (;;) {
        const cudaError_t state = cudaStreamQuery(c.stream);
        if (state == cudaSuccess) return;
        if (state != cudaErrorNotReady) check_cuda(state, operation, "cudaStreamQuery");
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(c.comm, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
            ncclCommAbort(c.comm);
            check_nccl(async, operation, "NCCL");
        }
        if (std::chrono::steady_clock::now() > deadline) {
            ncclCommAbort(c.comm);
            fail(operation, "the other processes' GPUs did not take part within the timeout "
                            "(FLUXION_DISTRIBUTED_TIMEOUT); one has probably failed or stopped");
        }
        std::this_thread::yield();
    }
}

// Tensors packed by dtype into flat device buffers; `call` runs NCCL on one bucket of a buffer.
template <class Call>
std::vector<Tensor> per_dtype(const std::vector<Tensor>& tensors, std::size_t bucket_bytes, const char* operation,
                              Call&& call) {
    const Device device = tensors.front().device();
    Channel& c = channel(device.index, operation);
    std::vector<DType> dtypes;
    for (const Tensor& t : tensors)
        if (std::find(dtypes.begin(), dtypes.end(), t.dtype()) == dtypes.end()) dtypes.push_back(t.dtype());
    std::vector<std::pair<Tensor, std::vector<std::size_t>>> flats;
    for (DType d : dtypes) {
        std::vector<Tensor> parts;
        std::vector<std::size_t> members;
        for (std::size_t i = 0; i < tensors.size(); ++i)
            if (tensors[i].dtype() == d) parts.push_back(tensors[i].reshape({-1})), members.push_back(i);
        flats.emplace_back(concat(parts).contiguous().clone(), members);  // a buffer of its own to write into
    }
    synchronize(device);  // the buffers are complete before NCCL's stream reads them
    check_cuda(cudaSetDevice(device.index), operation, "cudaSetDevice");
    check_nccl(ncclGroupStart(), operation, "ncclGroupStart");
    for (auto& [flat, members] : flats) {
        const std::size_t item = itemsize(flat.dtype());
        const std::size_t per_bucket = std::max<std::size_t>(1, bucket_bytes / item);
        auto* bytes = static_cast<char*>(flat.data_ptr());
        const auto count = static_cast<std::size_t>(flat.numel());
        for (std::size_t first = 0; first < count; first += per_bucket)
            check_nccl(call(bytes + first * item, std::min(per_bucket, count - first), flat.dtype(), c),
                       operation, "NCCL collective");
    }
    check_nccl(ncclGroupEnd(), operation, "ncclGroupEnd");
    wait(c, operation);
    std::vector<Tensor> out(tensors.size());
    for (auto& [flat, members] : flats) {
        std::int64_t at = 0;
        for (std::size_t i : members) {
            const std::int64_t n = tensors[i].numel();
            out[i] = flat.slice(0, at, at + n).reshape(tensors[i].shape());
            at += n;
        }
    }
    return out;
}

std::vector<Tensor> allreduce(const std::vector<Tensor>& tensors, ReduceOp op, std::size_t bucket_bytes) {
    return per_dtype(tensors, bucket_bytes, "allreduce", [&](void* data, std::size_t count, DType d, Channel& c) {
        return ncclAllReduce(data, data, count, nccl_type(d), nccl_op(op, d), c.comm, c.stream);
    });
}

std::vector<Tensor> broadcast(const std::vector<Tensor>& tensors, int root, std::size_t bucket_bytes) {
    return per_dtype(tensors, bucket_bytes, "broadcast", [&](void* data, std::size_t count, DType d, Channel& c) {
        return ncclBroadcast(data, data, count, nccl_type(d), root, c.comm, c.stream);
    });
}

const DeviceCollectives kNccl{allreduce, broadcast};

}  // namespace
}  // namespace fluxion::distributed::detail

extern "C" const fluxion::distributed::detail::DeviceCollectives* fluxion_device_collectives() {
    return &fluxion::distributed::detail::kNccl;
}
