// gemm.cpp — the tiled GEMM (shader gemm.comp) and the choice of its tile sizes from the device's
// limits: the workgroup is the largest square of power-of-two sides within the invocation limits
// (256 at most) that holds whole subgroups; each invocation computes 4 x 4 elements of C; the depth
// of the shared tiles is what the shared memory holds, at most 16. A product whose operands do not
// fit one storage-buffer binding runs in parts that do.
#include <algorithm>
#include <limits>
#include <mutex>
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

const void* advance(const void* p, std::int64_t elements, std::size_t size) {
    return static_cast<const char*>(p) + elements * std::int64_t(size);
}

}  // namespace

void gemm(int device, DType t, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          double alpha, const void* a, std::int64_t lda, std::int64_t stride_a, const void* b, std::int64_t ldb,
          std::int64_t stride_b, double beta, void* c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch) {
    if (m <= 0 || n <= 0 || batch <= 0) return;
    std::lock_guard lock(plugin_mutex());  // recursive: the parts below take it again
    const Context& ctx = context(device);
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

    // Whether an operand binds as one storage buffer (Launch::buffer widens the range by up to the
    // offset alignment and a word) and the kernel can index it.
    const auto& lim = ctx.properties.limits;
    const auto align = std::int64_t(std::max<VkDeviceSize>(4, lim.minStorageBufferOffsetAlignment));
    const auto fits = [&](std::int64_t elements) {
        return elements <= std::numeric_limits<std::int32_t>::max() &&
               elements * std::int64_t(size) + align + 8 <= std::int64_t(lim.maxStorageBufferRange);
    };
    if (!fits(a_span) || !fits(b_span) || !fits(c_span)) {
        // Parts, halving until each fits: the batch first, then the dimension along which the
        // operand that is too large is stored in blocks — C's rows (m); A's rows, or its depth when
        // it is transposed; B's depth, or its columns (n) when it is transposed. The second half of
        // a split depth adds to C what the first wrote (in C's type: f16 and bf16 round once more).
        const auto part = [&](std::int64_t m_, std::int64_t n_, std::int64_t k_, const void* a_, const void* b_,
                              double beta_, void* c_, std::int64_t batch_) {
            gemm(device, t, trans_a, trans_b, m_, n_, k_, alpha, a_, lda, stride_a, b_, ldb, stride_b, beta_, c_, ldc,
                 stride_c, batch_);
        };
        const auto out = [&](std::int64_t elements) { return const_cast<void*>(advance(c, elements, size)); };
        if (batch > 1) {
            const std::int64_t h = batch / 2;
            part(m, n, k, a, b, beta, c, h);
            part(m, n, k, advance(a, h * stride_a, size), advance(b, h * stride_b, size), beta, out(h * stride_c),
                 batch - h);
            return;
        }
        char dim;
        if (!fits(c_span)) dim = m > 1 ? 'm' : 'n';
        else if (!fits(a_span)) dim = trans_a ? (k > 1 ? 'k' : 'm') : (m > 1 ? 'm' : 'k');
        else dim = trans_b ? (n > 1 ? 'n' : 'k') : (k > 1 ? 'k' : 'n');
        if (dim == 'm') {
            const std::int64_t h = m / 2;
            part(h, n, k, a, b, beta, c, 1);
            part(m - h, n, k, advance(a, trans_a ? h : h * lda, size), b, beta, out(h * ldc), 1);
        } else if (dim == 'n') {
            const std::int64_t h = n / 2;
            part(m, h, k, a, b, beta, c, 1);
            part(m, n - h, k, a, advance(b, trans_b ? h * ldb : h, size), beta, out(h), 1);
        } else {
            const std::int64_t h = k / 2;
            part(m, n, h, a, b, beta, c, 1);
            part(m, n, k - h, advance(a, trans_a ? h * lda : h, size), advance(b, trans_b ? h : h * ldb, size), 1.0, c,
                 1);
        }
        return;
    }

    Launch launch(device, "gemm");
    require(launch.ctx(), backend::Op::gemm, t, "gemm");
    const std::string type = suffix(t, launch.ctx(), "gemm");
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
    const std::int64_t bm = tl.ty * tl.tm, bn = tl.tx * tl.tn;
    const auto gx = std::uint32_t((n + bn - 1) / bn), gy = std::uint32_t((m + bm - 1) / bm);
    if (gx > lim.maxComputeWorkGroupCount[0] || gy > lim.maxComputeWorkGroupCount[1])
        throw ShapeError("gemm on " + launch.ctx().label() + ": " + std::to_string(m) + " x " + std::to_string(n) +
                         " needs more workgroups than the device dispatches");
    const auto gz = std::uint32_t(std::min<std::int64_t>(batch, lim.maxComputeWorkGroupCount[2]));
    launch.run("gemm_" + type, gx, gy, gz, {tl.ty, tl.bk, tl.tm, tl.tn}, tl.tx);
}

}  // namespace fluxion::vulkan
