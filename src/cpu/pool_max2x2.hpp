// pool_max2x2.hpp — the gradient of f32 max pooling over 2×2 windows that tile the input (stride 2,
// no padding, 2·ow == w), eight windows a step in vector registers. pool.cpp takes it before its
// general passes, and fused replays (fused.hpp) use it with relu's gradient folded in.
#pragma once
#include "core/backend.hpp"

namespace fluxion::backend::cpu {

// gx from x, the pool's output y and its gradient gy, bit for bit what pool.cpp's passes compute:
// the first cell of a window in row-major order equal to its maximum (NaN matching NaN) takes
// 0 + gy, the others 0; input rows below the last window get 0. With `relu`, a cell also needs
// x > 0, which is relu's gradient applied after (x being relu's output). Returns false, having
// written nothing, for other windows, or where the library was built without AVX2.
// Whether max_pool_2x2_backward takes the windows of `s`.
bool max_pool_2x2_takes(const Pool2dShape& s);

bool max_pool_2x2_backward(const Pool2dShape& s, const float* x, const float* y, const float* gy, float* gx,
                           bool relu = false);

}  // namespace fluxion::backend::cpu
