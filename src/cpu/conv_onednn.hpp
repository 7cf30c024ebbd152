// conv_onednn.hpp — f32 convolutions through oneDNN's JIT kernels. conv.cpp tries these first and
// falls back to its own im2col + GEMM (every float type) when they decline a call: a libfluxion
// built without oneDNN, an empty shape, or a shape oneDNN does not take.
#pragma once
#include "core/backend.hpp"

namespace fluxion::backend::cpu {

enum class ConvPass { forward, backward_input, backward_weight };

// forward: a = x, b = w, out = y; backward_input: a = gy, b = w, out = gx; backward_weight: a = x,
// b = gy, out = gw. Returns false, having written nothing, when oneDNN does not take the call.
// A forward pass may add `bias` (one value per output channel) and apply relu to the result, in
// the same primitive (fused replays, fused.hpp).
bool onednn_conv2d(ConvPass pass, const Conv2dShape& s, const float* a, const float* b, float* out,
                   const float* bias = nullptr, bool relu = false);

}  // namespace fluxion::backend::cpu
