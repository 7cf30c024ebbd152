// launch.cuh — how the plugin's kernels are launched: grid-stride loops over 64-bit element counts,
// with enough blocks to fill the device and no more.
#pragma once
#include <algorithm>
#include <cstdint>

#include "cuda/context.hpp"

namespace fluxion::cuda {

inline constexpr int kThreads = 256;

inline unsigned grid_for(const Context& ctx, std::int64_t n) {
    const std::int64_t needed = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(std::clamp<std::int64_t>(needed, 1, std::int64_t{ctx.sm_count} * 8));
}

__device__ inline std::int64_t first_index() {
    return std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t index_step() { return std::int64_t{gridDim.x} * blockDim.x; }

template <class T> __device__ inline bool is_nan(T x) { return x != x; }  // false for integers

}  // namespace fluxion::cuda
