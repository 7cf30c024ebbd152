// The convolution with its epilogue (fused.hpp); the multi-tensor optimiser step lives with the
// single one in optimiser.cpp.
#include "cpu/fused.hpp"

#include "cpu/conv_onednn.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {

void conv2d_epilogue(DType t, const Conv2dShape& s, const void* x, const void* w, const void* bias,
                     const ConvEpilogue& e, void* y) {
    const bool relu = e.activation && e.op == Unary::relu;
    const float* b32 = e.bias ? static_cast<const float*>(bias) : nullptr;
    bool added = false, activated = false;
    if (t == DType::f32 && onednn_conv2d(ConvPass::forward, s, static_cast<const float*>(x),
                                         static_cast<const float*>(w), static_cast<float*>(y), b32, relu)) {
        added = true;
        activated = relu;
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

}  // namespace fluxion::backend::cpu
