// conv.hpp — the two implementations behind the convolution kernels (conv.cpp chooses): cuDNN when
// it is loaded, im2col + GEMM otherwise.
#pragma once
#include "cuda/kernels.hpp"

namespace fluxion::cuda {

// Each returns false, having done nothing, when cuDNN is not loaded or offers no algorithm for the
// shape; t is f32, f64, f16 or bf16 (f16 and bf16 computed in f32).
bool cudnn_conv2d(int device, DType t, const Conv2dShape& s, const void* x, const void* w, void* y);
bool cudnn_conv2d_backward_input(int device, DType t, const Conv2dShape& s, const void* gy, const void* w, void* gx);
bool cudnn_conv2d_backward_weight(int device, DType t, const Conv2dShape& s, const void* x, const void* gy, void* gw);

// gemm (kernels.hpp) with C of type c_type: t, or f32 for f16 and bf16 operands, so that im2col's
// products and their sums over images are rounded to 16 bits once, at the end (gemm.cpp).
void gemm_into(int device, DType t, DType c_type, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
               std::int64_t k, double alpha, const void* a, std::int64_t lda, std::int64_t stride_a, const void* b,
               std::int64_t ldb, std::int64_t stride_b, double beta, void* c, std::int64_t ldc, std::int64_t stride_c,
               std::int64_t batch);

void im2col_conv2d(int device, DType t, const Conv2dShape& s, const void* x, const void* w, void* y);
void im2col_conv2d_backward_input(int device, DType t, const Conv2dShape& s, const void* gy, const void* w, void* gx);
void im2col_conv2d_backward_weight(int device, DType t, const Conv2dShape& s, const void* x, const void* gy,
                                   void* gw);

}  // namespace fluxion::cuda
