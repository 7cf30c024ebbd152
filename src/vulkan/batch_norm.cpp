// batch_norm.cpp — BatchNorm's training pass and its gradient, one dispatch each way
// (batch_norm.comp), in f32 and f64 (the types the core passes; f16 and bf16 compose the pass).
#include <algorithm>
#include <string>

#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

namespace {

// batch_norm.comp's FLAG_*.
enum Flags : std::int32_t { kRelu = 1, kAffine = 2, kGx = 4, kGweight = 8, kGbias = 16 };

// The workgroups (one per channel, as many as the device takes at once), after checking the loop
// limit: each invocation takes ceil(outer·inner / workgroup) values a pass, for `passes` passes, and
// two combines of 32 steps at most, for each of its workgroup's channels.
std::uint32_t channel_groups(Launch& launch, std::int64_t c, std::int64_t m, int passes, const char* op) {
    const auto groups =
        std::uint32_t(std::min<std::int64_t>(c, launch.ctx().properties.limits.maxComputeWorkGroupCount[0]));
    const std::int64_t wg = launch.ctx().workgroup_size;
    check_loop_limit((c + groups - 1) / groups * (passes * ((m + wg - 1) / wg) + 2 * 32), launch.ctx(), op);
    return groups;
}

void epsilon_param(Launch& launch, DType t, double epsilon) {
    if (t == DType::f64) launch.param(epsilon);
    else launch.param(float(epsilon));
}

}  // namespace

void batch_norm(int device, DType t, std::int64_t outer, std::int64_t c, std::int64_t inner, const void* x,
                const void* weight, const void* bias, double epsilon, bool relu, void* y, void* mean, void* var,
                void* rstd) {
    const char* op = "batch_norm";
    const std::int64_t total = outer * c * inner;
    if (total <= 0) return;
    Launch launch(device, op);
    const std::string type = float_suffix(t, launch.ctx(), op);
    check_count(total, launch.ctx(), op);
    const std::size_t size = itemsize(t), bytes = std::size_t(total) * size, channel = std::size_t(c) * size;
    const bool affine = weight && bias;
    std::int32_t off[7];
    off[0] = launch.buffer(x, bytes, size, false);
    off[1] = affine ? launch.buffer(weight, channel, size, false) : launch.buffer(x, bytes, size, false);
    off[2] = affine ? launch.buffer(bias, channel, size, false) : launch.buffer(x, bytes, size, false);
    off[3] = launch.buffer(y, bytes, size, true);
    off[4] = launch.buffer(mean, channel, size, true);
    off[5] = launch.buffer(var, channel, size, true);
    off[6] = launch.buffer(rstd, channel, size, true);
    for (std::int64_t v : {outer, c, inner}) launch.param(std::int32_t(v));
    launch.param(std::int32_t((relu ? kRelu : 0) | (affine ? kAffine : 0)));
    for (std::int32_t o : off) launch.param(o);
    for (int unused = 0; unused < 2; ++unused) launch.param(std::int32_t(0));  // off7, off8
    epsilon_param(launch, t, epsilon);
    launch.run("batch_norm_" + type, channel_groups(launch, c, outer * inner, 3, op));
}

void batch_norm_backward(int device, DType t, std::int64_t outer, std::int64_t c, std::int64_t inner, const void* x,
                         const void* y, const void* gy, const void* mean, const void* rstd, const void* weight,
                         void* gx, void* gweight, void* gbias) {
    const char* op = "batch_norm_backward";
    const std::int64_t total = outer * c * inner;
    if (total <= 0 || (!gx && !gweight && !gbias)) return;
    Launch launch(device, op);
    const std::string type = float_suffix(t, launch.ctx(), op);
    check_count(total, launch.ctx(), op);
    const std::size_t size = itemsize(t), bytes = std::size_t(total) * size, channel = std::size_t(c) * size;
    // Slots without a tensor are bound to one the call has (read-only ones to x, written ones to
    // another output) and left alone by the shader.
    std::int32_t off[9];
    off[0] = launch.buffer(x, bytes, size, false);
    off[1] = launch.buffer(y ? y : x, bytes, size, false);
    off[2] = launch.buffer(gy, bytes, size, false);
    off[3] = launch.buffer(mean, channel, size, false);
    off[4] = launch.buffer(rstd, channel, size, false);
    off[5] = weight ? launch.buffer(weight, channel, size, false) : launch.buffer(x, bytes, size, false);
    const auto output = [&](void* p, std::size_t n) {
        if (p) return launch.buffer(p, n, size, true);
        if (gx) return launch.buffer(gx, bytes, size, true);
        return launch.buffer(gweight ? gweight : gbias, channel, size, true);
    };
    off[6] = output(gx, bytes);
    off[7] = output(gweight, channel);
    off[8] = output(gbias, channel);
    for (std::int64_t v : {outer, c, inner}) launch.param(std::int32_t(v));
    launch.param(std::int32_t((y ? kRelu : 0) | (weight ? kAffine : 0) | (gx ? kGx : 0) | (gweight ? kGweight : 0) |
                              (gbias ? kGbias : 0)));
    for (std::int32_t o : off) launch.param(o);
    epsilon_param(launch, t, 0.0);  // unread: the block's layout is the forward pass's
    launch.run("batch_norm_backward_" + type, channel_groups(launch, c, outer * inner, 2, op));
}

}  // namespace fluxion::vulkan
