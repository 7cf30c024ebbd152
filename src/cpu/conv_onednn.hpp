// conv_onednn.hpp — f32 and bf16 convolutions through oneDNN's JIT kernels. conv.cpp (f32) and
// widen.cpp (bf16) try these first and fall back to im2col + GEMM (on widened copies for bf16) when
// they decline a call: a libfluxion built without oneDNN, a CPU without bf16 instructions (for
// bf16), an empty or invalid shape, or a shape oneDNN does not take.
#pragma once
#include "core/backend.hpp"

namespace fluxion::backend::cpu {

enum class ConvPass { forward, backward_input, backward_weight };

// forward: a = x, b = w, out = y; backward_input: a = gy, b = w, out = gx; backward_weight: a = x,
// b = gy, out = gw. Returns false, having written nothing, when oneDNN does not take the call.
// A forward pass may add `bias` (one value per output channel) to the result, in the same
// primitive (fused replays, fused.hpp).
bool onednn_conv2d(ConvPass pass, const Conv2dShape& s, const float* a, const float* b, float* out,
                   const float* bias = nullptr);

// The same passes on bf16 operands and result (f32 accumulation inside oneDNN, one rounding at the
// end), without bias or activation. False, having written nothing, where onednn_bf16_native() is false.
bool onednn_conv2d_bf16(ConvPass pass, const Conv2dShape& s, const void* a, const void* b, void* out);

}  // namespace fluxion::backend::cpu
