// scale.hpp — C[b] = beta * C[b] for strided row-major matrices: what a GEMM with k == 0 computes.
#pragma once
#include <cstdint>

#include "cuda/context.hpp"
#include "fluxion/dtype.hpp"

namespace fluxion::cuda {

// t is f32, f64, f16 or bf16; beta == 0 writes zeros without reading C (as BLAS does, so NaNs do not survive).
void scale_matrices(const Context& ctx, DType t, std::int64_t m, std::int64_t n, double beta, void* c,
                    std::int64_t ldc, std::int64_t stride_c, std::int64_t batch);

}  // namespace fluxion::cuda
