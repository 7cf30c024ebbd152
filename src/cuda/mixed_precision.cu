// mixed_precision.cu — mixed precision's multi-tensor kernels (core/backend.hpp): the overflow
// check, one launch per gradient writing NaN into the flag where an element (divided by the loss
// scale) is not finite, and the update, one launch of optimiser.cu's kernel per parameter. Either
// replaces about ten launches per tensor of the composed step.
#include <cstdint>
#include <string>

#include "core/optimiser_constants.hpp"
#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/kernels.hpp"
#include "cuda/launch.cuh"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

// Every thread that meets a value that is not finite writes the same NaN bits: the flag was 0.
template <class T>
__global__ void nonfinite_kernel(std::int64_t n, const T* x, Compute<T> divisor, std::uint32_t* flag) {
    using C = Compute<T>;
    for (std::int64_t i = first_index(); i < n; i += index_step()) {
        C v = widen(x[i]);
        if (divisor != C(1)) v = v / divisor;
        if (!isfinite(v)) *flag = 0x7fc00000u;
    }
}

}  // namespace

void nonfinite_check(int device, DType t, std::size_t count, const std::int64_t* n, const void* const* ptrs,
                     double divisor, void* flag) {
    Context& ctx = activate(device);
    FLUXION_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(float), ctx.stream));  // 0.0f
    dispatch_floating(t, "nonfinite_check", [&](auto tag) {
        using T = decltype(tag);
        for (std::size_t i = 0; i < count; ++i) {
            if (n[i] <= 0) continue;
            nonfinite_kernel<T><<<grid_for(ctx, n[i]), kThreads, 0, ctx.stream>>>(
                n[i], static_cast<const T*>(ptrs[i]), Compute<T>(divisor), static_cast<std::uint32_t*>(flag));
            FLUXION_CUDA_CHECK_LAUNCH("nonfinite_kernel");
        }
    });
}

void mixed_optimiser_steps(int device, Optimiser rule, DType t, std::size_t count, const std::int64_t* n,
                           const OptimiserStep* const* hp, double divisor, void* const* ptrs) {
    backend::check_mixed_gradients(t);
    for (std::size_t i = 0; i < count; ++i) {
        void* const* p = ptrs + 6 * i;
        optimiser_step_mixed(device, rule, t, n[i], p[0], p[1], p[2], p[3], p[4], p[5], divisor, hp[i]);
    }
}

}  // namespace fluxion::cuda
