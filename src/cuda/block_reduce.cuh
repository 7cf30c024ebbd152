// block_reduce.cuh — combining one value per thread across a warp or a block (a multiple of 32
// threads). Every thread of the block receives the result.
#pragma once
#include <cstdint>

namespace fluxion::cuda {

inline constexpr unsigned kFullWarp = 0xffffffffu;

template <class T> __device__ T shuffle_down(T v, int offset) { return __shfl_down_sync(kFullWarp, v, offset); }
template <class T> __device__ T shuffle_from(T v, int lane) { return __shfl_sync(kFullWarp, v, lane); }

// `T` is a scalar, or a type with shuffle_down/shuffle_from overloads found by lookup.
template <class T, class Op> __device__ T block_reduce(T v, Op op) {
    for (int offset = 16; offset > 0; offset /= 2) v = op(v, shuffle_down(v, offset));
    const int warps = blockDim.x / 32;
    if (warps == 1) return shuffle_from(v, 0);
    __shared__ T per_warp[32];
    __syncthreads();  // an earlier call in the same kernel may still be reading per_warp
    if (threadIdx.x % 32 == 0) per_warp[threadIdx.x / 32] = v;
    __syncthreads();
    v = per_warp[0];
    for (int w = 1; w < warps; ++w) v = op(v, per_warp[w]);
    return v;
}

// Kernels that reduce rows give each row one warp when it is short and 256 threads when it is long,
// and loop when there are more rows than blocks.
inline unsigned threads_per_row(std::int64_t n) { return n <= 1024 ? 32 : 256; }
inline unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>(rows < (1 << 30) ? rows : 1 << 30); }

}  // namespace fluxion::cuda
