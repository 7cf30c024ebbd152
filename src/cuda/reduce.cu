// reduce.cu — sum, mean, max, min, argmax and argmin along the middle axis of {outer, n, inner},
// with the CPU's semantics: floats sum in double and integers in 64 bits (wrapping); max, min and
// the arg reductions let a NaN win and keep the first of equal extremes. f16 and bf16 reduce as the
// CPU's f32 kernel does on their widened values: the result is rounded to f32, then to 16 bits.
// With inner == 1 each row is contiguous and one warp or block reduces it; otherwise one thread
// per output walks down its column, neighbouring threads reading neighbouring elements. When that
// leaves most of the GPU idle (a few long rows, as a full reduction is; a few long columns), the
// reduced axis is cut into chunks that blocks reduce at once into partial results, which a second
// kernel combines in a fixed order: the same result on every run.
#include <algorithm>
#include <string>
#include <type_traits>

#include "cuda/allocator.hpp"
#include "cuda/block_reduce.cuh"
#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

constexpr std::int64_t kNone = INT64_MAX;  // the index of a partial result that has seen no element

// What a partial result holds: sums and extremes alike fit this type exactly.
template <class T> using Acc = std::conditional_t<std::is_floating_point_v<Compute<T>>, double, std::int64_t>;

template <class T> struct Partial {
    Acc<T> value;
    std::int64_t index;  // where an extreme was found; kNone before any element
};

template <class T> __device__ Partial<T> shuffle_down(Partial<T> p, int offset) {
    return {cuda::shuffle_down(p.value, offset), cuda::shuffle_down(p.index, offset)};
}
template <class T> __device__ Partial<T> shuffle_from(Partial<T> p, int lane) {
    return {cuda::shuffle_from(p.value, lane), cuda::shuffle_from(p.index, lane)};
}

__device__ bool is_sum(Reduce op) { return op == Reduce::sum || op == Reduce::mean; }

template <class T> struct Combine {
    Reduce op;

    // Whether `c` replaces `best`: the larger (or smaller) value, a NaN over any number, the
    // earlier index among equals.
    __device__ bool better(const Partial<T>& c, const Partial<T>& best) const {
        if (c.index == kNone) return false;
        if (best.index == kNone) return true;
        if (is_nan(best.value)) return is_nan(c.value) && c.index < best.index;
        if (is_nan(c.value)) return true;
        if (c.value == best.value) return c.index < best.index;
        return op == Reduce::max || op == Reduce::argmax ? c.value > best.value : c.value < best.value;
    }

    __device__ Partial<T> operator()(const Partial<T>& a, const Partial<T>& b) const {
        if (!is_sum(op)) return better(b, a) ? b : a;
        if constexpr (std::is_floating_point_v<Acc<T>>) return {a.value + b.value, 0};
        else return {static_cast<std::int64_t>(static_cast<std::uint64_t>(a.value) + static_cast<std::uint64_t>(b.value)), 0};
    }
};

template <class T> __device__ Partial<T> empty_partial(Reduce op) { return {Acc<T>(0), is_sum(op) ? 0 : kNone}; }

template <class T> __device__ void store(Reduce op, const Partial<T>& p, std::int64_t n, void* dst, std::int64_t i) {
    using C = Compute<T>;
    switch (op) {
        case Reduce::argmax:
        case Reduce::argmin: static_cast<std::int64_t*>(dst)[i] = p.index; break;
        case Reduce::mean:
            static_cast<T*>(dst)[i] = narrow<T>(static_cast<C>(static_cast<double>(p.value) / double(n)));
            break;
        default: static_cast<T*>(dst)[i] = narrow<T>(static_cast<C>(p.value));
    }
}

// Each block reduces rows blockIdx.x, blockIdx.x + gridDim.x, ... of a {rows, n} matrix.
template <class T>
__global__ void reduce_rows_kernel(Reduce op, std::int64_t rows, std::int64_t n, const T* src, void* dst) {
    const Combine<T> combine{op};
    for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* x = src + row * n;
        Partial<T> acc = empty_partial<T>(op);
        for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) acc = combine(acc, {Acc<T>(widen(x[j])), j});
        acc = block_reduce(acc, combine);
        if (threadIdx.x == 0) store(op, acc, n, dst, row);
    }
}

template <class T>
__global__ void reduce_columns_kernel(Reduce op, std::int64_t outer, std::int64_t n, std::int64_t inner, const T* src,
                                      void* dst) {
    const Combine<T> combine{op};
    for (std::int64_t i = first_index(); i < outer * inner; i += index_step()) {
        const T* x = src + i / inner * n * inner + i % inner;
        Partial<T> acc = empty_partial<T>(op);
        for (std::int64_t j = 0; j < n; ++j) acc = combine(acc, {Acc<T>(widen(x[j * inner])), j});
        store(op, acc, n, dst, i);
    }
}

// A chunk of a contiguous row: 256 threads, 16 elements each.
constexpr std::int64_t kRowChunk = 4096;
// The shortest chunk of a column worth a block of its own.
constexpr std::int64_t kColumnChunk = 64;
// Partial results per output at most (gridDim.y stays far below its limit of 65,535).
constexpr std::int64_t kMaxChunks = 1024;

// Block (x, y) reduces chunk x of row y into partials[y * chunks + x].
template <class T>
__global__ void reduce_row_chunks_kernel(Reduce op, std::int64_t n, std::int64_t chunk, const T* src,
                                         Partial<T>* partials) {
    const Combine<T> combine{op};
    const std::int64_t row = blockIdx.y, begin = std::int64_t{blockIdx.x} * chunk;
    const std::int64_t end = begin + chunk < n ? begin + chunk : n;
    const T* x = src + row * n;
    Partial<T> acc = empty_partial<T>(op);
    for (std::int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) acc = combine(acc, {Acc<T>(widen(x[j])), j});
    acc = block_reduce(acc, combine);
    if (threadIdx.x == 0) partials[row * gridDim.x + blockIdx.x] = acc;
}

// Thread i of block row y reduces chunk y of output i's column into partials[i * chunks + y].
template <class T>
__global__ void reduce_column_chunks_kernel(Reduce op, std::int64_t outer, std::int64_t n, std::int64_t inner,
                                            std::int64_t chunk, const T* src, Partial<T>* partials) {
    const Combine<T> combine{op};
    const std::int64_t begin = std::int64_t{blockIdx.y} * chunk, end = begin + chunk < n ? begin + chunk : n;
    for (std::int64_t i = first_index(); i < outer * inner; i += index_step()) {
        const T* x = src + i / inner * n * inner + i % inner;
        Partial<T> acc = empty_partial<T>(op);
        for (std::int64_t j = begin; j < end; ++j) acc = combine(acc, {Acc<T>(widen(x[j * inner])), j});
        partials[i * gridDim.y + blockIdx.y] = acc;
    }
}

// Block i combines output i's partials; threads take chunks in a fixed pattern and the block's
// warps combine in order, so the result does not depend on timing.
template <class T>
__global__ void reduce_partials_kernel(Reduce op, std::int64_t outputs, std::int64_t chunks, std::int64_t n,
                                       const Partial<T>* partials, void* dst) {
    const Combine<T> combine{op};
    for (std::int64_t i = blockIdx.x; i < outputs; i += gridDim.x) {
        Partial<T> acc = empty_partial<T>(op);
        for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) acc = combine(acc, partials[i * chunks + c]);
        acc = block_reduce(acc, combine);
        if (threadIdx.x == 0) store(op, acc, n, dst, i);
    }
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// How many chunks to cut the reduced axis of `outputs` outputs into: 1 where one block per row (or
// one thread per column) already fills the device.
std::int64_t chunks_for(const Context& ctx, bool rows, std::int64_t outputs, std::int64_t n) {
    if (rows) {  // aim for two blocks per multiprocessor
        const std::int64_t blocks = 2 * std::int64_t{ctx.sm_count};
        if (outputs >= blocks) return 1;
        return std::clamp<std::int64_t>(std::min(ceil_div(n, kRowChunk), ceil_div(blocks, outputs)), 1, kMaxChunks);
    }
    const std::int64_t threads = 1024 * std::int64_t{ctx.sm_count};  // half of what an SM holds
    if (outputs >= threads) return 1;
    return std::clamp<std::int64_t>(std::min(ceil_div(n, kColumnChunk), ceil_div(threads, outputs)), 1, kMaxChunks);
}

// The reduction in chunks (chunks > 1): partial results in scratch memory, then combined.
template <class T>
void reduce_in_chunks(Context& ctx, Reduce op, std::int64_t outer, std::int64_t n, std::int64_t inner,
                      std::int64_t chunks, const T* src, void* dst) {
    const std::int64_t chunk = ceil_div(n, chunks), outputs = outer * inner;
    chunks = ceil_div(n, chunk);  // no chunk left empty
    Scratch partials(ctx.device, static_cast<std::size_t>(outputs * chunks) * sizeof(Partial<T>));
    if (inner == 1) {
        reduce_row_chunks_kernel<T><<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(outer)), kThreads, 0,
                                      ctx.stream>>>(op, n, chunk, src, partials.as<Partial<T>>());
    } else {
        reduce_column_chunks_kernel<T><<<dim3(grid_for(ctx, outputs), static_cast<unsigned>(chunks)), kThreads, 0,
                                         ctx.stream>>>(op, outer, n, inner, chunk, src, partials.as<Partial<T>>());
    }
    FLUXION_CUDA_CHECK_LAUNCH("reduce kernel (chunks)");
    reduce_partials_kernel<T><<<row_blocks(outputs), threads_per_row(chunks), 0, ctx.stream>>>(
        op, outputs, chunks, n, partials.as<Partial<T>>(), dst);
}

const char* const kNames[] = {"reduce sum", "reduce mean", "reduce max", "reduce min", "reduce argmax", "reduce argmin"};

}  // namespace

void reduce(int device, Reduce op, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner, const void* src,
            void* dst) {
    if (static_cast<int>(op) < 0 || op > Reduce::argmin)
        throw ValueError("reduce: unknown op code " + std::to_string(static_cast<int>(op)));
    const char* name = kNames[static_cast<int>(op)];
    if (op == Reduce::sum && t == DType::boolean) throw_unsupported(name, t, "f32, f64, f16, bf16, i32, i64, u8");
    if (op == Reduce::mean && t != DType::f32 && t != DType::f64 && t != DType::f16 && t != DType::bf16)
        throw_unsupported(name, t, "f32, f64, f16, bf16");
    if (n == 0 && op != Reduce::sum && op != Reduce::mean)
        throw ValueError(std::string(name) + ": cannot reduce an axis of length 0; there is no extreme to return");
    if (outer * inner <= 0) return;
    Context& ctx = activate(device);
    dispatch_all(t, name, [&](auto tag) {
        using T = decltype(tag);
        if (const std::int64_t chunks = chunks_for(ctx, inner == 1, outer * inner, n); chunks > 1) {
            reduce_in_chunks<T>(ctx, op, outer, n, inner, chunks, static_cast<const T*>(src), dst);
        } else if (inner == 1) {
            reduce_rows_kernel<T><<<row_blocks(outer), threads_per_row(n), 0, ctx.stream>>>(
                op, outer, n, static_cast<const T*>(src), dst);
        } else {
            reduce_columns_kernel<T><<<grid_for(ctx, outer * inner), kThreads, 0, ctx.stream>>>(
                op, outer, n, inner, static_cast<const T*>(src), dst);
        }
    });
    FLUXION_CUDA_CHECK_LAUNCH("reduce kernel");
}

}  // namespace fluxion::cuda
