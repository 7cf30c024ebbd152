// The convolution with its epilogue and the elementwise chain (fused.hpp); the multi-tensor
// optimiser step lives with the single one in optimiser.cpp.
#include "cpu/fused.hpp"

#include <algorithm>

#include "cpu/conv_direct.hpp"
#include "cpu/conv_onednn.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {

void conv2d_epilogue(DType t, const Conv2dShape& s, const void* x, const void* w, const void* bias,
                     const ConvEpilogue& e, void* y) {
    const bool relu = e.activation && e.op == Unary::relu;
    const float* b32 = e.bias ? static_cast<const float*>(bias) : nullptr;
    bool added = false, activated = false;
    const auto fx = static_cast<const float*>(x), fw = static_cast<const float*>(w);
    const auto fy = static_cast<float*>(y);
    if (t == DType::f32 && direct_conv2d(ConvPass::forward, s, fx, fw, fy, b32, relu)) {
        added = true;
        activated = relu;
    } else if (t == DType::f32 && onednn_conv2d(ConvPass::forward, s, fx, fw, fy, b32)) {
        // Not oneDNN's relu post-op: it turns NaN into 0 where the eager relu keeps it, which
        // would hide a diverged step from the loss.
        added = true;
    } else {
        conv2d(0, t, &s, x, w, y);
    }
    const int64_t plane = s.oh * s.ow, count = s.n * s.k * plane;
    if (e.bias && !added)
        dispatch_float(t, "conv2d with bias", [&](auto tag) {
            using T = decltype(tag);
            const T* pb = static_cast<const T*>(bias);
            T* py = static_cast<T*>(y);
            // One item per (image, channel) plane: the add of the broadcast bias, value for value.
            parallel_for(s.n * s.k, count > kParallelMin, [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                    const T v = pb[i % s.k];
                    for (T *p = py + i * plane, *stop = p + plane; p < stop; ++p) *p = *p + v;
                }
            });
        });
    if (e.activation && !activated) unary(0, e.op, t, count, y, y, e.a, e.b);
}

// Elements per block of a chain: unary runs a block of this size inline (its threshold for costly
// ops), and a block of f64 (16 KiB) stays in the L1 cache.
constexpr int64_t kChainBlock = kParallelMin / 16;

void elementwise_chain(DType t, int64_t n, const ElementwiseStep* steps, std::size_t count, void* const* ptrs) {
    const auto item = int64_t(itemsize(t));
    std::size_t others = 0;
    for (std::size_t s = 0; s < count; ++s) others += steps[s].binary ? 1 : 0;
    char* const y = static_cast<char*>(ptrs[1 + others]);
    const int64_t blocks = (n + kChainBlock - 1) / kChainBlock;
    parallel_for(blocks, n > kParallelMin, [&](int64_t begin, int64_t end) {
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
                    unary(0, step.unary_op, t, len, in, out, step.a, step.b);
                } else {
                    other.strides[0] = step.other_scalar ? 0 : 1;
                    const char* o = static_cast<const char*>(ptrs[next_other++]) + (step.other_scalar ? 0 : lo * item);
                    if (step.value_first) binary(0, step.binary_op, t, &value, in, &other, o, out);
                    else binary(0, step.binary_op, t, &other, o, &value, in, out);
                }
                in = out;
            }
        }
    });
}

}  // namespace fluxion::backend::cpu
