// pool.cpp — 2-d max and mean pooling and their gradients, the latter also with an activation's
// gradient folded in (shaders pool.comp, pool_backward.comp).
#include "fluxion/error.hpp"
#include "vulkan/capabilities.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

namespace {

void put_shape(Launch& launch, const Pool2dShape& s, Pool op) {
    for (std::int64_t v : {s.n, s.c, s.h, s.w, s.oh, s.ow, s.kh, s.kw, s.stride_h, s.stride_w, s.pad_h, s.pad_w})
        launch.param(std::int32_t(v));
    launch.param(std::int32_t(op));
}

std::string checked_type(Launch& launch, backend::Op which, DType t, const char* op, const Pool2dShape& s) {
    require(launch.ctx(), which, t, op);
    if (s.kh < 1 || s.kw < 1 || s.stride_h < 1 || s.stride_w < 1 || s.pad_h < 0 || s.pad_w < 0)
        throw ValueError(std::string(op) + " on " + launch.ctx().label() +
                         ": windows and strides must be positive, padding non-negative");
    check_count(s.n * s.c * std::max(s.h * s.w, s.oh * s.ow), launch.ctx(), op);
    return suffix(t, launch.ctx(), op);
}

}  // namespace

void pool2d(int device, Pool op, DType t, const Pool2dShape* sp, const void* x, void* y) {
    const Pool2dShape& s = *sp;
    const std::int64_t outputs = s.n * s.c * s.oh * s.ow;
    if (outputs <= 0) return;
    Launch launch(device, "pool2d");
    const std::string type = checked_type(launch, backend::Op::pool2d, t, "pool2d", s);
    const std::size_t size = itemsize(t);
    const std::int32_t off0 = launch.buffer(x, std::size_t(s.n * s.c * s.h * s.w) * size, size, false);
    const std::int32_t off1 = launch.buffer(y, std::size_t(outputs) * size, size, true);
    put_shape(launch, s, op);
    launch.param(off0);
    launch.param(off1);
    launch.param(std::int32_t(0));
    launch.param(std::int32_t(0));
    launch.param(std::int32_t(-1));
    launch.run("pool_" + type, launch.groups(outputs));
}

void pool2d_backward(int device, Pool op, DType t, const Pool2dShape* sp, const void* x, const void* y,
                     const void* gy, void* gx) {
    pool2d_backward_activation(device, op, t, sp, x, y, gy, Unary(-1), gx);
}

// act -1: the pool's gradient alone.
void pool2d_backward_activation(int device, Pool op, DType t, const Pool2dShape* sp, const void* x, const void* y,
                                const void* gy, Unary act, void* gx) {
    const Pool2dShape& s = *sp;
    const std::int64_t inputs = s.n * s.c * s.h * s.w, outputs = s.n * s.c * s.oh * s.ow;
    if (inputs <= 0) return;
    Launch launch(device, "pool2d_backward");
    const std::string type = checked_type(launch, backend::Op::pool2d_backward, t, "pool2d_backward", s);
    const std::size_t size = itemsize(t);
    const std::size_t in_bytes = std::size_t(inputs) * size, out_bytes = std::size_t(std::max<std::int64_t>(outputs, 1)) * size;
    const std::int32_t off0 = launch.buffer(x, in_bytes, size, false);
    const std::int32_t off1 = launch.buffer(y, outputs ? out_bytes : 0, size, false);
    const std::int32_t off2 = launch.buffer(gy, outputs ? out_bytes : 0, size, false);
    const std::int32_t off3 = launch.buffer(gx, in_bytes, size, true);
    put_shape(launch, s, op);
    launch.param(off0);
    launch.param(off1);
    launch.param(off2);
    launch.param(off3);
    launch.param(std::int32_t(act));
    launch.run("pool_backward_" + type, launch.groups(inputs));
}

}  // namespace fluxion::vulkan
