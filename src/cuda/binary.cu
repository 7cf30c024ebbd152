// binary.cu — elementwise functions of two tensors with broadcasting (stride-0 views), and where,
// with the formulas of core/elementwise_formulas.def. One kernel per dtype with the op as a
// run-time switch; contiguous operands cost no index arithmetic (see strided.cuh). Integer
// semantics are the CPU's: +, -, * wrap, division by zero gives 0, powers are exact (by squaring);
// f16 and bf16 compute in f32 (dtype_dispatch.cuh).
#include <type_traits>

#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/formulas.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"
#include "cuda/strided.cuh"

namespace fluxion::cuda {

namespace {

template <class T>
__global__ void binary_kernel(Binary op, std::int64_t n, Indexer<2> ix, const T* a, const T* b, void* out) {
    const bool comparison = op >= Binary::eq;
    for (std::int64_t i = first_index(); i < n; i += index_step()) {
        std::int64_t off[2];
        ix.offsets(i, off);
        const Compute<T> x = widen(a[off[0]]), y = widen(b[off[1]]);
        if (comparison) static_cast<bool*>(out)[i] = binary_compare(op, x, y);
        else static_cast<T*>(out)[i] = narrow<T>(binary_arithmetic(op, x, y));
    }
}

template <class U>
__global__ void where_kernel(std::int64_t n, Indexer<3> ix, const std::uint8_t* c, const U* a, const U* b, U* out) {
    for (std::int64_t i = first_index(); i < n; i += index_step()) {
        std::int64_t off[3];
        ix.offsets(i, off);
        out[i] = c[off[0]] ? a[off[1]] : b[off[2]];
    }
}

}  // namespace

void binary(int device, Binary op, DType t, const Strided* a_view, const void* a, const Strided* b_view,
            const void* b, void* out) {
    const Strided* views[2] = {a_view, b_view};
    const Indexer<2> ix = make_indexer<2>("binary", views);
    if (t == DType::boolean && (op == Binary::sub || op == Binary::div || op == Binary::pow))
        throw_unsupported("binary sub, div and pow", t, "f32, f64, f16, bf16, i32, i64, u8");
    const std::int64_t n = element_count(*a_view);
    if (n == 0) return;
    Context& ctx = activate(device);
    dispatch_all(t, "binary", [&](auto tag) {
        using T = decltype(tag);
        binary_kernel<T><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(op, n, ix, static_cast<const T*>(a),
                                                                         static_cast<const T*>(b), out);
    });
    FLUXION_CUDA_CHECK_LAUNCH("binary_kernel");
}

void where(int device, DType t, const Strided* c_view, const void* c, const Strided* a_view, const void* a,
           const Strided* b_view, const void* b, void* out) {
    const Strided* views[3] = {c_view, a_view, b_view};
    const Indexer<3> ix = make_indexer<3>("where", views);
    const std::int64_t n = element_count(*a_view);
    if (n == 0) return;
    Context& ctx = activate(device);
    dispatch_bytes(t, [&](auto tag) {
        using U = decltype(tag);
        where_kernel<U><<<grid_for(ctx, n), kThreads, 0, ctx.stream>>>(
            n, ix, static_cast<const std::uint8_t*>(c), static_cast<const U*>(a), static_cast<const U*>(b),
            static_cast<U*>(out));
    });
    FLUXION_CUDA_CHECK_LAUNCH("where_kernel");
}

}  // namespace fluxion::cuda
