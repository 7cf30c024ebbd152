// pool_max2x2.hpp — f32 (and bf16, f16) max pooling and its gradient over 2×2 windows that tile
// the input (stride 2, no padding, 2·ow == w), eight windows a step in vector registers. pool.cpp
// and widen.cpp take them before their general passes, and fused replays (fused.cpp) use the
// gradient with relu's folded in.
#pragma once
#include "core/backend.hpp"

namespace fluxion::backend::cpu {

// Whether the kernels below take the windows of `s`.
bool max_pool_2x2_takes(const Pool2dShape& s);

// y from x, bit for bit what pool.cpp's passes compute (NaN wins). False, having written nothing,
// where max_pool_2x2_takes is false.
bool max_pool_2x2_forward(const Pool2dShape& s, const float* x, float* y);

// gx from x, the pool's output y and its gradient gy, bit for bit what pool.cpp's passes compute:
// the first cell of a window in row-major order equal to its maximum (NaN matching NaN) takes
// 0 + gy, the others 0; input rows below the last window get 0. With `relu`, a cell also needs
// x > 0, which is relu's gradient applied after (x being relu's output). Returns false, having
// written nothing, for other windows, or where the library was built without AVX2.
bool max_pool_2x2_backward(const Pool2dShape& s, const float* x, const float* y, const float* gy, float* gx,
                           bool relu = false);

// The same for bf16 and f16 (t) cells, read and written in their own type: bit for bit what the f32
// kernels compute on widened copies. False for other types, and for f16 where built without F16C.
bool max_pool_2x2_forward(DType t, const Pool2dShape& s, const void* x, void* y);
bool max_pool_2x2_backward(DType t, const Pool2dShape& s, const void* x, const void* y, const void* gy, void* gx,
                           bool relu);

}  // namespace fluxion::backend::cpu
