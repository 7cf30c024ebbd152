// conv_amx.hpp — bf16 convolutions on AMX tiles, for the few-channel shapes the direct kernels
// take (LeNet-5's). oneDNN's AMX kernels block channels by 16 and 32, so that 1 or 6 input channels
// fill a fraction of each tile, and they lose to the direct kernels there; here the dot products
// run over a kernel row's taps, pairs of taps or output pixels instead, which fill the tiles
// whatever the channel count. widen.cpp tries these before the direct kernels on bf16.
#pragma once
#include <cstdint>

#include "core/backend.hpp"
#include "cpu/conv_onednn.hpp"

namespace fluxion::backend::cpu {

// Whether this library was built with AMX-BF16 (-march=native on such a CPU), the CPU has it, and
// Linux lets this process use the tiles (the first call asks, once).
bool amx_usable();

// Whether amx_conv2d takes the pass and shape: where amx_usable(), the shapes the direct kernels
// take (direct_conv2d_takes) with at most 16 filters (the input gradient: 32, kernel rows of at most
// 8 taps; the forward pass: at most 48 pairs of taps a filter).
bool amx_conv2d_takes(ConvPass pass, const Conv2dShape& s);

// The pass on bf16 cells (forward: a = x, b = w, out = y, with an optional bias and relu as
// direct_conv2d adds them; backward_input: a = gy, b = w, out = gx; backward_weight: a = x, b = gy,
// out = gw): exact products summed in f32, in another order than the f32 kernels', each result
// rounded once to bf16. AMX treats subnormal inputs as zero and flushes subnormal sums, as oneDNN's
// bf16 kernels on these CPUs do. Returns false, having written nothing, where it does not take the
// pass, and for a weight gradient whose x holds a NaN or an infinity (conv_amx.cpp says why).
bool amx_conv2d(ConvPass pass, const Conv2dShape& s, const void* a, const void* b, void* out,
                const void* bias = nullptr, bool relu = false);

// How many passes amx_conv2d has run since the process started (for tests of the routing).
std::uint64_t amx_conv_runs();

}  // namespace fluxion::backend::cpu
