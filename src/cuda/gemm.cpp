// gemm.cpp — batched row-major GEMM through cuBLAS. cuBLAS is column-major, and a row-major matrix
// is its transpose in column-major, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T:
// the operands swap places and m and n swap, the transposition flags stay with their operand.
#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "cuda/dtype.hpp"
#include "cuda/kernels.hpp"
#include "cuda/precision.hpp"
#include "cuda/scale.hpp"

namespace fluxion::cuda {

void gemm(int device, DType t, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          double alpha, const void* a, std::int64_t lda, std::int64_t stride_a, const void* b, std::int64_t ldb,
          std::int64_t stride_b, double beta, void* c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch) {
    if (t != DType::f32 && t != DType::f64) throw_unsupported("gemm", t, "f32, f64");
    if (m <= 0 || n <= 0 || batch <= 0) return;
    Context& ctx = activate(device);
    // An empty inner dimension leaves C = beta C (0 when beta is 0), as the CPU's BLAS path does.
    // cuBLAS is not trusted with k == 0: some versions return without touching C.
    if (k <= 0) return scale_matrices(ctx, t, m, n, beta, c, ldc, stride_c, batch);
    const bool single = t == DType::f32;
    const float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
    const void* alpha_ptr = single ? static_cast<const void*>(&alpha32) : &alpha;
    const void* beta_ptr = single ? static_cast<const void*>(&beta32) : &beta;
    const cudaDataType type = single ? CUDA_R_32F : CUDA_R_64F;
    const cublasComputeType_t compute =
        !single ? CUBLAS_COMPUTE_64F : (tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    FLUXION_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
        ctx.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, alpha_ptr, b,
        type, ldb, stride_b, a, type, lda, stride_a, beta_ptr, c, type, ldc, stride_c, batch, compute,
        CUBLAS_GEMM_DEFAULT));
}

}  // namespace fluxion::cuda
