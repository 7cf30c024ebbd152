// plugin.cpp — the CUDA backend's kernel table and the plugin's exported functions.
#include "cuda/allocator.hpp"
#include "cuda/capture.hpp"
#include "cuda/context.hpp"
#include "cuda/exports.hpp"
#include "cuda/kernels.hpp"

namespace fluxion::cuda {

namespace {

constexpr backend::Backend kTable{
    .abi_version = backend::kAbiVersion,
    .name = "CUDA",
    .priority = 100,
    .functional = functional,
    .device_count = device_count,
    .device_properties = device_properties,
    .supports = supports,
    .synchronize = synchronize,
    .alloc = allocate,
    .free = deallocate,
    .copy_from_host = copy_from_host,
    .copy_to_host = copy_to_host,
    .copy_device = copy_device,
    .fill = fill,
    .copy_strided = copy_strided,
    .cast = cast,
    .index_select = index_select,
    .index_add = index_add,
    .unary = unary,
    .unary_backward = unary_backward,
    .binary = binary,
    .where = where,
    .reduce = reduce,
    .gemm = gemm,
    .conv2d = conv2d,
    .conv2d_backward_input = conv2d_backward_input,
    .conv2d_backward_weight = conv2d_backward_weight,
    .pool2d = pool2d,
    .pool2d_backward = pool2d_backward,
    .softmax = softmax,
    .softmax_backward = softmax_backward,
    .lstm_cell = lstm_cell,  // f32 and f64 (recurrent.cu)
    .lstm_cell_backward = lstm_cell_backward,
    .optimiser_step = optimiser_step,
    // Fused entries (fused.cu).
    .elementwise_chain = elementwise_chain,
    .conv2d_epilogue = conv2d_epilogue,
    .pool2d_backward_activation = pool2d_backward_activation,
    .optimiser_steps = optimiser_steps,
    // Compiled steps replay each phase as one CUDA graph (capture.hpp).
    .capture_begin = capture_begin,
    .capture_end = capture_end,
    .capture_run = capture_run,
    .capture_free = capture_free,
    // Mixed precision's multi-tensor kernels (mixed_precision.cu).
    .nonfinite_check = nonfinite_check,
    .mixed_optimiser_steps = mixed_optimiser_steps,
    .batch_norm = batch_norm,
    .batch_norm_backward = batch_norm_backward,
};

}  // namespace

}  // namespace fluxion::cuda

extern "C" {

const fluxion::backend::Backend* fluxion_backend_entry(int abi_version) {
    return abi_version == fluxion::backend::kAbiVersion ? &fluxion::cuda::kTable : nullptr;
}

bool fluxion_cuda_memory_stats(int device, std::size_t* allocated, std::size_t* reserved, std::size_t* peak) {
    const fluxion::cuda::Probe& probe = fluxion::cuda::probe();
    if (device < 0 || device >= probe.device_count) return false;
    const fluxion::cuda::MemoryStats stats = fluxion::cuda::memory_stats(device);
    if (allocated) *allocated = stats.allocated;
    if (reserved) *reserved = stats.reserved;
    if (peak) *peak = stats.peak;
    return true;
}

void fluxion_cuda_empty_cache(int device) { fluxion::cuda::empty_cache(device); }

void fluxion_allow_tf32(bool allowed) { fluxion::cuda::allow_tf32(allowed); }

}  // extern "C"
