// fused.cpp — the Vulkan backend's fused entries (core/backend.hpp, "fused kernels"): an elementwise
// chain in one pass (shader elementwise_chain.comp), a convolution's bias and activation in one pass
// over its output (conv_epilogue.comp), a pool's gradient with an activation's gradient folded in
// (pool_backward.comp), and an optimiser rule's steps recorded back to back (independent buffers, so
// the stream puts no barrier between them).
#include <algorithm>
#include <string>

#include "fluxion/error.hpp"
#include "vulkan/capabilities.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

namespace {

constexpr std::size_t kChainSteps = 8;   // steps[] of elementwise_chain.comp
constexpr std::size_t kChainOthers = 3;  // its slots S1..S3

bool is_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }

// A scalar parameter in the kernel's compute type (f32 for f16 and bf16).
void put_real(ParamBlock& p, DType t, double v) {
    if (t == DType::f64) p.param(v);
    else p.param(float(v));
}

// One dispatch of up to kChainSteps steps with up to kChainOthers other operands: y = steps(x).
void chain_dispatch(int device, DType t, std::int64_t n, const backend::ElementwiseStep* steps, std::size_t count,
                    const void* x, const void* const* others, void* y) {
    Launch launch(device, "elementwise_chain");
    const std::string type = suffix(t, launch.ctx(), "elementwise_chain");
    check_count(n, launch.ctx(), "elementwise_chain");
    const std::int64_t invocations = std::int64_t(launch.groups(n)) * launch.ctx().workgroup_size;
    check_loop_limit((n + invocations - 1) / invocations * std::int64_t(count + 1), launch.ctx(), "elementwise_chain");
    const std::size_t size = itemsize(t), bytes = std::size_t(n) * size;
    std::int32_t off[5];
    off[0] = launch.buffer(x, bytes, size, false);
    std::size_t slot = 0;
    for (std::size_t s = 0; s < count; ++s)
        if (steps[s].binary) {
            off[1 + slot] = launch.buffer(others[slot], steps[s].other_scalar ? size : bytes, size, false);
            ++slot;
        }
    for (; slot < kChainOthers; ++slot) off[1 + slot] = launch.buffer(x, bytes, size, false);  // unread
    off[4] = launch.buffer(y, bytes, size, true);
    ParamBlock& p = launch.params();
    p.param(std::int32_t(n));
    p.param(std::int32_t(count));
    for (std::int32_t o : off) p.param(o);
    p.param(std::int32_t(0));  // steps[] starts at 32 bytes
    std::size_t other = 0;
    for (std::size_t s = 0; s < kChainSteps; ++s) {
        const backend::ElementwiseStep e = s < count ? steps[s] : backend::ElementwiseStep{};
        std::int32_t flags = 0;
        if (s < count && e.binary)
            flags = 1 | (e.value_first ? 2 : 0) | (e.other_scalar ? 4 : 0) | std::int32_t((1 + other++) << 4);
        // std430: the struct's members at their natural alignment, the struct at its largest.
        p.param(std::int32_t(e.binary ? int(e.binary_op) : int(e.unary_op)));
        p.param(flags);
        put_real(p, t, e.binary ? 0.0 : e.a);
        put_real(p, t, e.binary ? 0.0 : e.b);
    }
    launch.run("elementwise_chain_" + type, launch.groups(n));
}

}  // namespace

void elementwise_chain(int device, DType t, std::int64_t n, const backend::ElementwiseStep* steps, std::size_t count,
                       void* const* ptrs) {
    if (n <= 0 || count == 0) return;
    if (!is_float(t))
        throw DTypeError(std::string("elementwise_chain on Vulkan does not support ") + fluxion::name(t) +
                         " (f32, f64, f16, bf16)");
    std::size_t others = 0;
    for (std::size_t s = 0; s < count; ++s) others += steps[s].binary ? 1 : 0;
    void* y = ptrs[1 + others];
    // Pieces of at most kChainSteps steps and kChainOthers operands; each after the first reads y.
    const void* in = ptrs[0];
    std::size_t first = 0, next_other = 1;
    while (first < count) {
        std::size_t last = first, used = 0;
        while (last < count && last - first < kChainSteps && (!steps[last].binary || used < kChainOthers))
            used += steps[last++].binary ? 1 : 0;
        chain_dispatch(device, t, n, steps + first, last - first, in, ptrs + next_other, y);
        next_other += used;
        in = y;
        first = last;
    }
}

void conv2d_epilogue(int device, DType t, const Conv2dShape* s, const void* x, const void* w, const void* bias,
                     const backend::ConvEpilogue* e, void* y) {
    conv2d(device, t, s, x, w, y);
    const std::int64_t plane = s->oh * s->ow, n = s->n * s->k * plane;
    if (n <= 0 || (!e->bias && !e->activation)) return;
    Launch launch(device, "conv2d_epilogue");
    const std::string type = suffix(t, launch.ctx(), "conv2d_epilogue");
    check_count(n, launch.ctx(), "conv2d_epilogue");
    const std::size_t size = itemsize(t);
    const std::int32_t off0 = launch.buffer(e->bias ? bias : y, e->bias ? std::size_t(s->k) * size : size, size, false);
    const std::int32_t off1 = launch.buffer(y, std::size_t(n) * size, size, true);
    ParamBlock& p = launch.params();
    for (std::int64_t v : {n, plane, s->k}) p.param(std::int32_t(v));
    p.param(std::int32_t(e->bias ? 1 : 0));
    p.param(std::int32_t(e->activation ? int(e->op) : -1));
    p.param(off0);
    p.param(off1);
    put_real(p, t, e->a);
    put_real(p, t, e->b);
    launch.run("conv_epilogue_" + type, launch.groups(n));
}

void optimiser_steps(int device, Optimiser rule, DType t, std::size_t count, const std::int64_t* n,
                     const OptimiserStep* const* hp, void* const* ptrs) {
    for (std::size_t i = 0; i < count; ++i) {
        void* const* p = ptrs + 5 * i;
        optimiser_step(device, rule, t, n[i], p[0], p[1], p[2], p[3], p[4], hp[i]);
    }
}

}  // namespace fluxion::vulkan
