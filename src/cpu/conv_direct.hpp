// conv_direct.hpp — f32 (and bf16, f16) convolutions with few channels computed directly on the
// NCHW tensors, eight output pixels of a row in a vector, without reorders or column matrices.
// They take the shapes where oneDNN's blocked kernels spend more time reordering and on padded
// channel blocks than multiplying (LeNet-5's 1 => 6 and 6 => 16 channels); conv.cpp, widen.cpp and
// fused.cpp try them first.
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

// The same passes on bf16 or f16 (t) cells, read and written in their own type: bit for bit what
// the f32 kernels compute on widened copies, rounded back once. The forward pass's bias and relu
// follow as the eager calls in t give them: the sum rounded, the bias added and rounded, then relu.
// False, having written nothing, for other types, for what the f32 kernels decline, and where the
// library was built without F16C.
bool direct_conv2d(DType t, ConvPass pass, const Conv2dShape& s, const void* a, const void* b, void* out,
                   const void* bias = nullptr, bool relu = false);

// Whether direct_conv2d takes this pass and shape (without running it).
bool direct_conv2d_takes(ConvPass pass, const Conv2dShape& s);

// Whether a bf16 pass goes to oneDNN's bf16 kernels (onednn_conv2d_bf16) rather than to the direct
// kernels or f32 copies: where those kernels are preferred (onednn_bf16_preferred()), except for
// passes the direct kernels take with at most 3 input channels, and, on a CPU with AMX, for the
// gradients they take (conv_direct.cpp says what was measured).
bool bf16_conv_in_onednn(ConvPass pass, const Conv2dShape& s);

}  // namespace fluxion::backend::cpu
