// softmax.cpp — softmax and log-softmax along the middle axis, and their gradients (softmax.comp).
#include <algorithm>

#include "fluxion/error.hpp"
#include "vulkan/capabilities.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

namespace {

void run(int device, bool backward, bool log, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner,
         const void* a, const void* b, void* out) {
    const char* op = backward ? "softmax_backward" : "softmax";
    const std::int64_t rows = outer * inner, total = rows * n;
    if (total <= 0) return;
    Launch launch(device, op);
    require(launch.ctx(), backward ? backend::Op::softmax_backward : backend::Op::softmax, t, op);
    const std::string type = suffix(t, launch.ctx(), op);
    check_count(total, launch.ctx(), op);
    const std::size_t size = itemsize(t), bytes = std::size_t(total) * size;
    const std::int32_t off0 = launch.buffer(a, bytes, size, false);
    const std::int32_t off1 = backward ? launch.buffer(b, bytes, size, false) : launch.buffer(out, bytes, size, true);
    const std::int32_t off2 = backward ? launch.buffer(out, bytes, size, true) : 0;
    for (std::int64_t v : {outer, n, inner, std::int64_t(log)}) launch.param(std::int32_t(v));
    launch.param(off0);
    launch.param(off1);
    launch.param(off2);
    // One workgroup per row (softmax.comp), as many rows at once as the device takes.
    const auto groups = std::uint32_t(std::min<std::int64_t>(rows, launch.ctx().properties.limits.maxComputeWorkGroupCount[0]));
    const std::int64_t wg = launch.ctx().workgroup_size;  // three passes over a row's share, two combines
    check_loop_limit((rows + groups - 1) / groups * (3 * ((n + wg - 1) / wg) + 2 * 32), launch.ctx(), op);
    launch.run(std::string(backward ? "softmax_backward_" : "softmax_") + type, groups);
}

}  // namespace

void softmax(int device, bool log, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner, const void* x,
             void* y) {
    run(device, false, log, t, outer, n, inner, x, nullptr, y);
}

void softmax_backward(int device, bool log, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner,
                      const void* y, const void* gy, void* gx) {
    run(device, true, log, t, outer, n, inner, y, gy, gx);
}

}  // namespace fluxion::vulkan
