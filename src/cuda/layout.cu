// layout.cu — kernels that move or convert elements: fill, strided copies, casts, index_select and
// its gradient index_add.
#include <cstring>
#include <string>
#include <vector>

#include "cuda/allocator.hpp"
#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"
#include "cuda/strided.cuh"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

template <class U> __global__ void fill_kernel(std::int64_t n, U* dst, U value) {
    for (std::int64_t i = first_index(); i < n; i += index_step()) dst[i] = value;
}

// The bytes of `value` stored as an element of type t.
template <class T> std::uint64_t bits_of(T element) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &element, sizeof element);
    return bits;
}

std::uint64_t element_bits(DType t, double value) {
    switch (t) {
        case DType::f32: return bits_of(static_cast<float>(value));
        case DType::f64: return bits_of(value);
        case DType::i32: return bits_of(static_cast<std::int32_t>(value));
        case DType::i64: return bits_of(static_cast<std::int64_t>(value));
        case DType::u8: return bits_of(static_cast<std::uint8_t>(value));
        case DType::boolean: return bits_of(static_cast<std::uint8_t>(value != 0));
        case DType::f16: return bits_of(narrow<__half>(static_cast<float>(value)));
        case DType::bf16: return bits_of(narrow<__nv_bfloat16>(static_cast<float>(value)));
    }
    throw_unsupported("fill", t, "every dtype");
}

template <class U> __global__ void copy_strided_kernel(std::int64_t n, Indexer<2> ix, const U* src, U* dst) {
    for (std::int64_t i = first_index(); i < n; i += index_step()) {
        std::int64_t off[2];
        ix.offsets(i, off);
        dst[off[1]] = src[off[0]];
    }
}

// static_cast's conversions (to bool: x != 0), with the half types going through float, as the
// CPU backend converts.
template <class To, class From> __device__ To convert(From x) {
    if constexpr (is_half_v<From>) return convert<To>(widen(x));
    else if constexpr (is_half_v<To>) return narrow<To>(static_cast<float>(x));
    else return static_cast<To>(x);
}

template <class From, class To> __global__ void cast_kernel(std::int64_t n, const From* src, To* dst) {
    for (std::int64_t i = first_index(); i < n; i += index_step()) dst[i] = convert<To>(src[i]);
}

// The indices are checked on the host before launch (check_indices below): a kernel cannot throw,
// and a device-side trap would leave the CUDA context unusable.
template <class U>
__global__ void index_select_kernel(std::int64_t total, std::int64_t n_src, std::int64_t inner, const U* src,
                                    const std::int64_t* idx, std::int64_t n_idx, U* dst) {
    for (std::int64_t i = first_index(); i < total; i += index_step()) {
        const std::int64_t k = i % inner, j = i / inner % n_idx, o = i / inner / n_idx;
        dst[i] = src[(o * n_src + idx[j]) * inner + k];
    }
}

__device__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ void atomic_add(std::int32_t* p, std::int32_t v) { atomicAdd(p, v); }
__device__ void atomic_add(std::int64_t* p, std::int64_t v) {
    // Two's complement: adding the unsigned image is adding the signed value.
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}
// There are no 8-bit atomics: the byte is added within its aligned 32-bit word, which lies inside
// the allocation because blocks are 256-byte aligned and a multiple of 128 bytes long.
__device__ void atomic_add(std::uint8_t* p, std::uint8_t v) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    auto* word = reinterpret_cast<unsigned int*>(address & ~std::uintptr_t{3});
    const unsigned shift = static_cast<unsigned>(address & 3) * 8;
    unsigned int seen = *word, expected = 0;
    do {
        expected = seen;
        const unsigned int sum = ((expected >> shift) + v) & 0xffu;
        seen = atomicCAS(word, expected, (expected & ~(0xffu << shift)) | (sum << shift));
    } while (seen != expected);
}

template <class T>
__global__ void index_add_kernel(std::int64_t total, std::int64_t n_dst, std::int64_t inner, const T* src,
                                 const std::int64_t* idx, std::int64_t n_idx, Compute<T>* dst) {
    for (std::int64_t i = first_index(); i < total; i += index_step()) {
        const std::int64_t k = i % inner, j = i / inner % n_idx, o = i / inner / n_idx;
        atomic_add(&dst[(o * n_dst + idx[j]) * inner + k], widen(src[i]));
    }
}

// The indices are read back and checked on the host before a kernel uses them: an index out of
// range raises fluxion::ValueError as on the CPU, instead of reading or writing outside the tensor.
void check_indices(int device, const char* op, const std::int64_t* idx, std::int64_t n_idx, std::int64_t bound) {
    std::vector<std::int64_t> host(static_cast<std::size_t>(n_idx));
    copy_to_host(device, host.data(), idx, host.size() * sizeof(std::int64_t));
    for (std::size_t j = 0; j < host.size(); ++j)
        if (host[j] < 0 || host[j] >= bound)
            throw ValueError(std::string(op) + " on CUDA:" + std::to_string(device) + ": index " +
                             std::to_string(host[j]) + " at position " + std::to_string(j) + " is out of range [0, " +
                             std::to_string(bound) + ")");
}

}  // namespace

void fill(int device, DType t, std::int64_t n, void* dst, double value) {
    if (n <= 0) return;
    Context& ctx = activate(device);
    const std::uint64_t bits = element_bits(t, value);
    if (itemsize(t) == 1) {
        FLUXION_CUDA_CHECK(cudaMemsetAsync(dst, static_cast<int>(bits), static_cast<std::size_t>(n), ctx.stream));
        return;
    }
    dispatch_bytes(t, [&](auto tag) {
        using U = decltype(tag);
        fill_kernel<U><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(n, static_cast<U*>(dst), static_cast<U>(bits));
    });
    FLUXION_CUDA_CHECK_LAUNCH("fill_kernel");
}

void copy_strided(int device, DType t, const Strided* src_view, const void* src, const std::int64_t* dst_strides,
                  void* dst) {
    check_view("copy_strided", *src_view);
    const std::int64_t n = element_count(*src_view);
    if (n == 0) return;
    Context& ctx = activate(device);
    const std::int64_t* strides[2] = {src_view->strides, dst_strides};
    const Indexer<2> ix = make_indexer<2>(src_view->ndim, src_view->shape, strides);
    if (ix.contiguous()) {
        FLUXION_CUDA_CHECK(
            cudaMemcpyAsync(dst, src, n * itemsize(t), cudaMemcpyDeviceToDevice, ctx.stream));
        return;
    }
    dispatch_bytes(t, [&](auto tag) {
        using U = decltype(tag);
        copy_strided_kernel<U><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(n, ix, static_cast<const U*>(src),
                                                                               static_cast<U*>(dst));
    });
    FLUXION_CUDA_CHECK_LAUNCH("copy_strided_kernel");
}

void cast(int device, DType from, DType to, std::int64_t n, const void* src, void* dst) {
    if (n <= 0) return;
    Context& ctx = activate(device);
    if (from == to) {
        FLUXION_CUDA_CHECK(
            cudaMemcpyAsync(dst, src, n * itemsize(from), cudaMemcpyDeviceToDevice, ctx.stream));
        return;
    }
    dispatch_all(from, "cast", [&](auto from_tag) {
        dispatch_all(to, "cast", [&](auto to_tag) {
            using From = decltype(from_tag);
            using To = decltype(to_tag);
            cast_kernel<From, To><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(n, static_cast<const From*>(src),
                                                                                 static_cast<To*>(dst));
        });
    });
    FLUXION_CUDA_CHECK_LAUNCH("cast_kernel");
}

void index_select(int device, DType t, std::int64_t outer, std::int64_t n_src, std::int64_t inner, const void* src,
                  const std::int64_t* idx, std::int64_t n_idx, void* dst) {
    const std::int64_t total = outer * n_idx * inner;
    // Indices are checked even when nothing is moved (an empty outer or inner axis), as on the CPU.
    if (n_idx > 0) check_indices(device, "index_select", idx, n_idx, n_src);
    if (total <= 0) return;
    Context& ctx = activate(device);
    dispatch_bytes(t, [&](auto tag) {
        using U = decltype(tag);
        index_select_kernel<U><<<grid_for(ctx, total), kThreads, 0, ctx.stream>>>(
            total, n_src, inner, static_cast<const U*>(src), idx, n_idx, static_cast<U*>(dst));
    });
    FLUXION_CUDA_CHECK_LAUNCH("index_select_kernel");
}

// f16 and bf16 add into an f32 copy of dst that is rounded back once, as the CPU does: rounding at
// every atomic addition would lose the small terms of a long sum into one row.
void index_add(int device, DType t, std::int64_t outer, std::int64_t n_dst, std::int64_t inner, const void* src,
               const std::int64_t* idx, std::int64_t n_idx, void* dst) {
    const std::int64_t total = outer * n_idx * inner;
    // Indices are checked even when nothing is moved (an empty outer or inner axis), as on the CPU.
    if (n_idx > 0) check_indices(device, "index_add", idx, n_idx, n_dst);
    if (total <= 0) return;
    Context& ctx = activate(device);
    dispatch_numeric(t, "index_add", [&](auto tag) {
        using T = decltype(tag);
        using C = Compute<T>;
        const std::int64_t count = outer * n_dst * inner;
        Scratch wide(device, is_half_v<T> ? count * sizeof(C) : 0);
        C* sums = is_half_v<T> ? wide.as<C>() : static_cast<C*>(dst);
        if (is_half_v<T>) cast(device, t, DType::f32, count, dst, sums);
        index_add_kernel<T><<<grid_for(ctx, total), kThreads, 0, ctx.stream>>>(total, n_dst, inner,
                                                                               static_cast<const T*>(src), idx, n_idx,
                                                                               sums);
        FLUXION_CUDA_CHECK_LAUNCH("index_add_kernel");
        if (is_half_v<T>) cast(device, DType::f32, t, count, sums, dst);
    });
}

}  // namespace fluxion::cuda
