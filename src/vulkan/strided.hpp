// strided.hpp — the parameter block of strided views sharing one shape (copy_strided, binary,
// where; shaders/strided.glsl). Dimensions the views all traverse contiguously are merged and
// size-1 ones dropped, so that a contiguous view costs one division per element.
#pragma once
#include <cstdint>
#include <string>

#include "core/backend.hpp"
#include "fluxion/error.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

using backend::kMaxDims;
using backend::Strided;

template <int N> struct Views {
    int ndim = 0;
    std::int64_t shape[kMaxDims] = {};
    std::int64_t strides[N][kMaxDims] = {};
    std::int64_t count = 1;
};

// The merged views; fluxion::ShapeError naming `op` when they do not share the first's shape.
template <int N> Views<N> merge_views(const char* op, const Strided* const (&views)[N]) {
    const Strided& first = *views[0];
    for (int k = 0; k < N; ++k) {
        bool same = views[k]->ndim == first.ndim && first.ndim >= 0 && first.ndim <= kMaxDims;
        for (int d = 0; same && d < first.ndim; ++d) same = views[k]->shape[d] == first.shape[d];
        if (!same)
            throw ShapeError(std::string(op) + " on Vulkan: the operand views do not share one shape of at most " +
                             std::to_string(kMaxDims) + " dimensions (broadcast them to the output shape first)");
    }
    Views<N> v;
    for (int d = 0; d < first.ndim; ++d) {
        v.count *= first.shape[d];
        if (first.shape[d] == 1) continue;
        const int last = v.ndim - 1;
        bool merge = last >= 0;
        for (int k = 0; merge && k < N; ++k) merge = v.strides[k][last] == views[k]->strides[d] * first.shape[d];
        if (merge) {
            v.shape[last] *= first.shape[d];
            for (int k = 0; k < N; ++k) v.strides[k][last] = views[k]->strides[d];
        } else {
            v.shape[v.ndim] = first.shape[d];
            for (int k = 0; k < N; ++k) v.strides[k][v.ndim] = views[k]->strides[d];
            ++v.ndim;
        }
    }
    return v;
}

// The bytes a view spans from its pointer (strides may not be negative on Vulkan).
inline std::size_t span_bytes(const Strided& view, std::size_t itemsize, const char* op) {
    std::int64_t last = 0;
    for (int d = 0; d < view.ndim; ++d) {
        if (view.shape[d] == 0) return 0;
        if (view.strides[d] < 0) throw ValueError(std::string(op) + " on Vulkan: negative strides are not supported");
        last += (view.shape[d] - 1) * view.strides[d];
    }
    return std::size_t(last + 1) * itemsize;
}

// Appends shape[MAX_DIMS] and strides[N * MAX_DIMS] (32-bit) to the launch's parameter block.
template <int N> void put_views(Launch& launch, const Views<N>& v) {
    for (int d = 0; d < kMaxDims; ++d) launch.param(std::int32_t(v.shape[d]));
    for (int k = 0; k < N; ++k)
        for (int d = 0; d < kMaxDims; ++d) {
            if (v.strides[k][d] > INT32_MAX) throw ShapeError("Vulkan: a stride exceeds 2^31 - 1");
            launch.param(std::int32_t(v.strides[k][d]));
        }
}

}  // namespace fluxion::vulkan
