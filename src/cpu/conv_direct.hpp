// conv_direct.hpp — f32 convolutions with few channels computed directly on the NCHW tensors, eight
// output pixels of a row in a vector, without reorders or column matrices. They take the shapes
// where oneDNN's blocked kernels spend more time reordering and on padded channel blocks than
// multiplying (LeNet-5's 1 => 6 and 6 => 16 channels); conv.cpp and fused.cpp try them first.
#pragma once
#include "core/backend.hpp"
#include "cpu/conv_onednn.hpp"

namespace fluxion::backend::cpu {

// The passes and arguments of onednn_conv2d (forward: a = x, b = w, out = y; backward_input:
// a = gy, b = w, out = gx; backward_weight: a = x, b = gy, out = gw), a forward pass with an
// optional bias and relu. Returns false, having written nothing, for a call it does not take:
// stride, dilation, padding or groups; output rows that are not a whole number of 8-pixel vectors;
// rows over 32 pixels; channel counts and sizes where oneDNN was measured faster (conv_direct.cpp
// lists them).
bool direct_conv2d(ConvPass pass, const Conv2dShape& s, const float* a, const float* b, float* out,
                   const float* bias = nullptr, bool relu = false);

// Whether direct_conv2d takes this pass and shape (without running it).
bool direct_conv2d_takes(ConvPass pass, const Conv2dShape& s);

}  // namespace fluxion::backend::cpu
