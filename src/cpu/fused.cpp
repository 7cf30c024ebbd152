// The fused entries of fused.hpp; the multi-tensor optimiser step lives with the single one in
// optimiser.cpp.
#include "cpu/fused.hpp"

#include <algorithm>

#include "cpu/conv_direct.hpp"
#include "cpu/conv_onednn.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/parallel.hpp"
#include "cpu/pool_max2x2.hpp"

namespace fluxion::backend::cpu {
namespace {

// The types the convolution kernels take as they are; f16 and bf16 go through widen.cpp.
bool one_pass(DType t) { return t == DType::f32 || t == DType::f64; }

// The broadcast add of a {1, k, 1, 1} bias to y {n, k, oh, ow}, in place, as binary's add.
void add_bias(DType t, const Conv2dShape& s, const void* bias, void* y) {
    const Strided yv{4, {s.n, s.k, s.oh, s.ow}, {s.k * s.oh * s.ow, s.oh * s.ow, s.ow, 1}};
    const Strided bv{4, {s.n, s.k, s.oh, s.ow}, {0, 1, 0, 0}};
    binary(0, Binary::add, t, &yv, y, &bv, bias, y);
}

}  // namespace

void conv2d_epilogue(int device, DType t, const Conv2dShape* sp, const void* x, const void* w, const void* bias,
                     const ConvEpilogue* ep, void* y) {
    const Conv2dShape& s = *sp;
    const ConvEpilogue& e = *ep;
    const int64_t plane = s.oh * s.ow, count = s.n * s.k * plane;
    if (!one_pass(t)) {
        const bool relu = e.activation && e.op == Unary::relu;
        if (widen::direct_conv2d(t, &s, x, w, e.bias ? bias : nullptr, relu, y)) {
            if (e.activation && !relu) unary(device, e.op, t, count, y, y, e.a, e.b);
            return;
        }
        widen::conv2d(device, t, &s, x, w, y);
        if (e.bias) add_bias(t, s, bias, y);
        if (e.activation) unary(device, e.op, t, count, y, y, e.a, e.b);
        return;
    }
    const bool relu = e.activation && e.op == Unary::relu;
    const float* b32 = e.bias ? static_cast<const float*>(bias) : nullptr;
    bool added = false, activated = false;
    const auto fx = static_cast<const float*>(x), fw = static_cast<const float*>(w);
    const auto fy = static_cast<float*>(y);
    if (t == DType::f32 && direct_conv2d(ConvPass::forward, s, fx, fw, fy, b32, relu)) {
        added = true;
        activated = relu;
    } else if (t == DType::f32 && onednn_conv2d(ConvPass::forward, s, fx, fw, fy, nullptr)) {
        // Neither oneDNN's bias nor its relu post-op. Its AVX2 kernels add the bias in another order
        // than the sum's last rounding (1 to 2 units in the last place from the eager calls, AMD Zen 3;
        // its AVX-512 kernels matched), and its relu turns NaN into 0 where the eager relu keeps it,
        // which would hide a diverged step from the loss. The bias is added below, value for value.
    } else {
        conv2d(device, t, &s, x, w, y);
    }
    if (e.bias && !added)
        dispatch_float(t, "conv2d with bias", [&](auto tag) {
            using T = decltype(tag);
            const T* pb = static_cast<const T*>(bias);
            T* py = static_cast<T*>(y);
            // One item per (image, channel) plane: the add of the broadcast bias, value for value.
            parallel_for(s.n * s.k, team_for(count), [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                    const T v = pb[i % s.k];
                    for (T *p = py + i * plane, *stop = p + plane; p < stop; ++p) *p = *p + v;
                }
            });
        });
    if (e.activation && !activated) unary(device, e.op, t, count, y, y, e.a, e.b);
}

void pool2d_backward_activation(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                                const void* gy, Unary act, void* gx) {
    if (t == DType::f32 && op == Pool::max && act == Unary::relu &&
        max_pool_2x2_backward(*s, static_cast<const float*>(x), static_cast<const float*>(y),
                              static_cast<const float*>(gy), static_cast<float*>(gx), true))
        return;
    if (op == Pool::max && act == Unary::relu && max_pool_2x2_backward(t, *s, x, y, gy, gx, true)) return;
    widen::pool2d_backward(device, op, t, s, x, y, gy, gx);
    unary_backward(device, act, t, s->n * s->c * s->h * s->w, x, x, gx, gx, 0, 0);
}

// Elements per block of a chain: unary runs a block of this size inline (its threshold for costly
// ops), and a block of f64 (16 KiB) stays in the L1 cache. Every type goes block by block: unary and
// binary compute f16 and bf16 in registers, rounding after each step as the eager ops do.
constexpr int64_t kChainBlock = kParallelMin / 16;

void elementwise_chain(int device, DType t, int64_t n, const ElementwiseStep* steps, std::size_t count,
                       void* const* ptrs) {
    const auto item = int64_t(itemsize(t));
    std::size_t others = 0;
    for (std::size_t s = 0; s < count; ++s) others += steps[s].binary ? 1 : 0;
    char* const y = static_cast<char*>(ptrs[1 + others]);
    // The chain's work in cheap element operations: it takes threads where its ops one by one would
    // take them together (an LSTM's sigmoid and tanh on 64 × 128 values take two threads each).
    int64_t cost = 0;
    for (std::size_t s = 0; s < count; ++s)
        cost += !steps[s].binary && !unary_is_cheap(steps[s].unary_op) ? kCostlyOp : 1;
    const int64_t blocks = (n + kChainBlock - 1) / kChainBlock;
    parallel_for(blocks, team_for(double(n) * double(cost)), [&](int64_t begin, int64_t end) {
        for (int64_t block = begin; block < end; ++block) {
            const int64_t lo = block * kChainBlock, len = std::min(kChainBlock, n - lo);
            char* out = y + lo * item;
            const void* in = static_cast<const char*>(ptrs[0]) + lo * item;
            Strided value{}, other{};
            value.ndim = other.ndim = 1;
            value.shape[0] = other.shape[0] = len;
            value.strides[0] = 1;
            std::size_t next_other = 1;
            for (std::size_t s = 0; s < count; ++s) {
                const ElementwiseStep& step = steps[s];
                if (!step.binary) {
                    unary(device, step.unary_op, t, len, in, out, step.a, step.b);
                } else {
                    other.strides[0] = step.other_scalar ? 0 : 1;
                    const char* o = static_cast<const char*>(ptrs[next_other++]) + (step.other_scalar ? 0 : lo * item);
                    if (step.value_first) binary(device, step.binary_op, t, &value, in, &other, o, out);
                    else binary(device, step.binary_op, t, &other, o, &value, in, out);
                }
                in = out;
            }
        }
    });
}

}  // namespace fluxion::backend::cpu
