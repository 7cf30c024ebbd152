// matmul_onednn.hpp — bf16 matrix products through oneDNN's matmul: bf16 operands and result,
// f32 accumulation, one rounding at the end. widen.cpp's gemm entry tries it first for bf16 and
// widens to f32 for OpenBLAS when it declines a call.
#pragma once
#include <cstdint>

namespace fluxion::backend::cpu {

// The gemm entry's product (core/backend.hpp) on bf16 matrices: C[i] = alpha op(A[i]) op(B[i]) +
// beta C[i] for i < batch, row-major, each operand read through its leading dimension and batch
// stride (0: one matrix for every product). Returns false, having written nothing, where
// onednn_bf16_native() is false, for empty products (k = 0 included), leading dimensions shorter
// than a row or negative strides (gemm raises for those), and products whose outputs overlap.
bool onednn_gemm_bf16(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha,
                      const void* a, std::int64_t lda, std::int64_t stride_a, const void* b, std::int64_t ldb,
                      std::int64_t stride_b, double beta, void* c, std::int64_t ldc, std::int64_t stride_c,
                      std::int64_t batch);

}  // namespace fluxion::backend::cpu
