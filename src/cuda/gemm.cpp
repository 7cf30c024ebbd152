// gemm.cpp — batched row-major GEMM through cuBLAS. cuBLAS is column-major, and a row-major matrix
// is its transpose in column-major, so C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T:
// the operands swap places and m and n swap, the transposition flags stay with their operand.
#include "cuda/check.hpp"
#include "cuda/conv.hpp"
#include "cuda/context.hpp"
#include "cuda/cublas_api.hpp"
#include "cuda/dtype.hpp"
#include "cuda/kernels.hpp"
#include "cuda/scale.hpp"

namespace fluxion::cuda {

namespace {

// The cuBLAS element type of t (DTypeError for the types gemm has no kernel for).
cudaDataType data_type(DType t) {
    switch (t) {
        case DType::f32: return CUDA_R_32F;
        case DType::f64: return CUDA_R_64F;
        case DType::f16: return CUDA_R_16F;
        case DType::bf16: return CUDA_R_16BF;
        default: throw_unsupported("gemm", t, "f32, f64, f16, bf16");
    }
}

}  // namespace

void gemm(int device, DType t, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          double alpha, const void* a, std::int64_t lda, std::int64_t stride_a, const void* b, std::int64_t ldb,
          std::int64_t stride_b, double beta, void* c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch) {
    gemm_into(device, t, t, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
              stride_c, batch);
}

void gemm_into(int device, DType t, DType c_type, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
               std::int64_t k, double alpha, const void* a, std::int64_t lda, std::int64_t stride_a, const void* b,
               std::int64_t ldb, std::int64_t stride_b, double beta, void* c, std::int64_t ldc, std::int64_t stride_c,
               std::int64_t batch) {
    const cudaDataType type = data_type(t);
    if (c_type != t && c_type != compute_type(t)) throw_unsupported("gemm into another type", c_type, "f32");
    if (m <= 0 || n <= 0 || batch <= 0) return;
    Context& ctx = activate(device);
    // An empty inner dimension leaves C = beta C (0 when beta is 0), as the CPU's BLAS path does.
    // cuBLAS is not trusted with k == 0: some versions return without touching C.
    if (k <= 0) return scale_matrices(ctx, c_type, m, n, beta, c, ldc, stride_c, batch);
    // f16 and bf16 products accumulate in f32 (tensor cores) with f32 alpha and beta, and C is rounded
    // once: the handle disallows reduced-precision split-K reductions (context.cpp).
    const bool f64 = t == DType::f64;
    const float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
    const void* alpha_ptr = f64 ? static_cast<const void*>(&alpha) : &alpha32;
    const void* beta_ptr = f64 ? static_cast<const void*>(&beta) : &beta32;
    const cublasComputeType_t compute =
        f64 ? CUBLAS_COMPUTE_64F
            : (t == DType::f32 && tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    FLUXION_CUBLAS_CHECK(cublas().gemm_strided_batched(
        ctx.blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, alpha_ptr, b,
        type, ldb, stride_b, a, type, lda, stride_a, beta_ptr, c, data_type(c_type), ldc, stride_c, batch, compute,
        CUBLAS_GEMM_DEFAULT));
}

}  // namespace fluxion::cuda
