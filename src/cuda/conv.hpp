// conv.hpp — the two implementations behind the convolution kernels (conv.cpp chooses): cuDNN when
// it is loaded, im2col + GEMM otherwise.
#pragma once
#include "cuda/kernels.hpp"

namespace fluxion::cuda {

// Each returns false, having done nothing, when cuDNN is not loaded or offers no algorithm for the
// shape; t is f32 or f64.
bool cudnn_conv2d(int device, DType t, const Conv2dShape& s, const void* x, const void* w, void* y);
bool cudnn_conv2d_backward_input(int device, DType t, const Conv2dShape& s, const void* gy, const void* w, void* gx);
bool cudnn_conv2d_backward_weight(int device, DType t, const Conv2dShape& s, const void* x, const void* gy, void* gw);

void im2col_conv2d(int device, DType t, const Conv2dShape& s, const void* x, const void* w, void* y);
void im2col_conv2d_backward_input(int device, DType t, const Conv2dShape& s, const void* gy, const void* w, void* gx);
void im2col_conv2d_backward_weight(int device, DType t, const Conv2dShape& s, const void* x, const void* gy,
                                   void* gw);

}  // namespace fluxion::cuda
