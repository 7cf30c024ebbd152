// gemm.cpp — the tiled GEMM (shader gemm.comp) and the choice of its tile sizes from the device's
// limits: the workgroup is the largest square of power-of-two sides within the invocation limits
// (256 at most) that holds whole subgroups; each invocation computes 4 x 4 elements of C; the depth
// of the shared tiles is what the shared memory holds, at most 16.
#include <algorithm>
#include <string>

#include "fluxion/error.hpp"
#include "vulkan/capabilities.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

namespace {

struct Tiles {
    std::uint32_t tx, ty, bk, tm, tn;
};

Tiles tiles(const Context& ctx, std::size_t element) {
    const auto& lim = ctx.properties.limits;
    const std::uint32_t most = std::min(256u, lim.maxComputeWorkGroupInvocations);
    std::uint32_t side = 1;
    while ((2 * side) * (2 * side) <= most && 2 * side <= lim.maxComputeWorkGroupSize[0] &&
           2 * side <= lim.maxComputeWorkGroupSize[1])
        side *= 2;
    // Fewer invocations than a subgroup would leave lanes idle; a wider workgroup then.
    std::uint32_t tx = side, ty = side;
    while (tx * ty < ctx.subgroup_size && 2 * tx <= lim.maxComputeWorkGroupSize[0] && 2 * tx * ty <= most) tx *= 2;
    Tiles t{tx, ty, 16, 4, 4};
    const std::size_t per_depth = std::size_t(t.ty * t.tm + t.tx * t.tn) * element;
    t.bk = std::uint32_t(std::clamp<std::size_t>(lim.maxComputeSharedMemorySize / per_depth, 1, 16));
    return t;
}

}  // namespace

void gemm(int device, DType t, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          double alpha, const void* a, std::int64_t lda, std::int64_t stride_a, const void* b, std::int64_t ldb,
          std::int64_t stride_b, double beta, void* c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch) {
    if (m <= 0 || n <= 0 || batch <= 0) return;
    Launch launch(device, "gemm");
    require(launch.ctx(), backend::Op::gemm, t, "gemm");
    const std::string type = suffix(t, launch.ctx(), "gemm");
    const std::size_t size = itemsize(t);
    // The elements each operand spans from its pointer.
    const std::int64_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    const std::int64_t b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    const auto span = [&](std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t stride) {
        if (rows == 0 || cols == 0) return std::int64_t(0);
        return (batch - 1) * stride + (rows - 1) * ld + cols;
    };
    const std::int64_t a_span = span(a_rows, a_cols, lda, stride_a), b_span = span(b_rows, b_cols, ldb, stride_b);
    const std::int64_t c_span = span(m, n, ldc, stride_c);
    check_count(std::max({a_span, b_span, c_span}), launch.ctx(), "gemm");
    const std::int32_t off0 = launch.buffer(a, std::size_t(std::max<std::int64_t>(a_span, 1)) * size, size, false);
    const std::int32_t off1 = launch.buffer(b, std::size_t(std::max<std::int64_t>(b_span, 1)) * size, size, false);
    const std::int32_t off2 = launch.buffer(c, std::size_t(c_span) * size, size, true);
    for (std::int64_t v : {m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, batch}) launch.param(std::int32_t(v));
    launch.param(std::int32_t(trans_a));
    launch.param(std::int32_t(trans_b));
    launch.param(off0);
    launch.param(off1);
    launch.param(off2);
    if (t == DType::f64) {
        launch.param(alpha);
        launch.param(beta);
    } else {
        launch.param(float(alpha));
        launch.param(float(beta));
    }
    const Tiles tl = tiles(launch.ctx(), std::max<std::size_t>(size, 4));  // shared tiles hold f32 for f16, bf16
    const auto& lim = launch.ctx().properties.limits;
    const std::int64_t bm = tl.ty * tl.tm, bn = tl.tx * tl.tn;
    const auto gx = std::uint32_t((n + bn - 1) / bn), gy = std::uint32_t((m + bm - 1) / bm);
    if (gx > lim.maxComputeWorkGroupCount[0] || gy > lim.maxComputeWorkGroupCount[1])
        throw ShapeError("gemm on " + launch.ctx().label() + ": " + std::to_string(m) + " x " + std::to_string(n) +
                         " needs more workgroups than the device dispatches");
    const auto gz = std::uint32_t(std::min<std::int64_t>(batch, lim.maxComputeWorkGroupCount[2]));
    launch.run("gemm_" + type, gx, gy, gz, {tl.ty, tl.bk, tl.tm, tl.tn}, tl.tx);
}

}  // namespace fluxion::vulkan
