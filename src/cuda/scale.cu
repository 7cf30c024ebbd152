// scale.cu — scaling strided row-major matrices, for GEMMs whose inner dimension is empty: cuBLAS
// is not relied on for k == 0 (some versions leave C untouched instead of writing beta * C).
#include "cuda/check.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/launch.cuh"
#include "cuda/scale.hpp"

namespace fluxion::cuda {

namespace {

template <class T>
__global__ void scale_kernel(std::int64_t m, std::int64_t n, Compute<T> beta, T* c, std::int64_t ldc,
                             std::int64_t stride_c, std::int64_t total) {
    for (std::int64_t i = first_index(); i < total; i += index_step()) {
        const std::int64_t j = i % n, row = i / n % m, b = i / n / m;
        T& x = c[b * stride_c + row * ldc + j];
        x = narrow<T>(beta == 0 ? Compute<T>(0) : beta * widen(x));
    }
}

}  // namespace

void scale_matrices(const Context& ctx, DType t, std::int64_t m, std::int64_t n, double beta, void* c,
                    std::int64_t ldc, std::int64_t stride_c, std::int64_t batch) {
    const std::int64_t total = m * n * batch;
    if (total <= 0 || beta == 1.0) return;
    dispatch_floating(t, "gemm", [&](auto tag) {
        using T = decltype(tag);
        scale_kernel<T><<<grid_for(ctx, total), kThreads, 0, ctx.stream>>>(m, n, Compute<T>(beta), static_cast<T*>(c),
                                                                           ldc, stride_c, total);
    });
    FLUXION_CUDA_CHECK_LAUNCH("scale_kernel");
}

}  // namespace fluxion::cuda
