// conv.cpp — the convolution entries of the table: cuDNN when it is loaded and has an algorithm
// for the shape, im2col + GEMM otherwise.
#include "cuda/conv.hpp"

#include <string>

#include "cuda/dtype.hpp"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {
void check(const char* op, DType t, const Conv2dShape& s) {
    const bool sizes = s.n >= 0 && s.c >= 0 && s.h >= 0 && s.w >= 0 && s.k >= 0 && s.r >= 1 && s.s >= 1 &&
                       s.oh >= 0 && s.ow >= 0 && s.pad_h >= 0 && s.pad_w >= 0;
    const bool steps = s.stride_h >= 1 && s.stride_w >= 1 && s.dil_h >= 1 && s.dil_w >= 1;
    if (!sizes || !steps || s.groups < 1 || s.c % s.groups != 0 || s.k % s.groups != 0)
        throw ShapeError(std::string(op) + ": invalid shape: input {" + std::to_string(s.n) + ", " +
                         std::to_string(s.c) + ", " + std::to_string(s.h) + ", " + std::to_string(s.w) +
                         "}, weight {" + std::to_string(s.k) + ", c/groups, " + std::to_string(s.r) + ", " +
                         std::to_string(s.s) + "}, groups " + std::to_string(s.groups) +
                         "; channels and filters must divide by groups, strides and dilations must be positive");
    if (t != DType::f32 && t != DType::f64 && t != DType::f16 && t != DType::bf16)
        throw_unsupported(op, t, "f32, f64, f16, bf16");
}
bool has_outputs(const Conv2dShape& s) { return s.n > 0 && s.k > 0 && s.oh > 0 && s.ow > 0; }
}  // namespace

void conv2d(int device, DType t, const Conv2dShape* s, const void* x, const void* w, void* y) {
    check("conv2d", t, *s);
    if (!has_outputs(*s)) return;
#if FLUXION_CUDA_CUDNN
    if (cudnn_conv2d(device, t, *s, x, w, y)) return;
#endif
    im2col_conv2d(device, t, *s, x, w, y);
}

void conv2d_backward_input(int device, DType t, const Conv2dShape* s, const void* gy, const void* w, void* gx) {
    check("conv2d_backward_input", t, *s);
    if (!has_outputs(*s)) return fill(device, t, s->n * s->c * s->h * s->w, gx, 0.0);
#if FLUXION_CUDA_CUDNN
    if (cudnn_conv2d_backward_input(device, t, *s, gy, w, gx)) return;
#endif
    im2col_conv2d_backward_input(device, t, *s, gy, w, gx);
}

void conv2d_backward_weight(int device, DType t, const Conv2dShape* s, const void* x, const void* gy, void* gw) {
    check("conv2d_backward_weight", t, *s);
#if FLUXION_CUDA_CUDNN
    if (has_outputs(*s) && cudnn_conv2d_backward_weight(device, t, *s, x, gy, gw)) return;
#endif
    im2col_conv2d_backward_weight(device, t, *s, x, gy, gw);
}

}  // namespace fluxion::cuda
