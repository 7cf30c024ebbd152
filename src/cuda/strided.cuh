// strided.cuh — element offsets of N strided views that share one shape (copy_strided, binary,
// where). The host merges dimensions the views traverse contiguously and drops size-1 ones, so a
// contiguous view becomes one dimension and costs no division per element.
#pragma once
#include <cstdint>
#include <string>

#include "core/backend.hpp"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

using backend::kMaxDims;
using backend::Strided;

template <int N> struct Indexer {
    int ndim = 0;
    std::int64_t shape[kMaxDims] = {};
    std::int64_t strides[N][kMaxDims] = {};

    // off[k] = offset in view k of the element with row-major index `linear`
    __device__ void offsets(std::int64_t linear, std::int64_t (&off)[N]) const {
        if (ndim <= 1) {
            for (int k = 0; k < N; ++k) off[k] = ndim == 0 ? 0 : linear * strides[k][0];
            return;
        }
        for (int k = 0; k < N; ++k) off[k] = 0;
        for (int d = ndim - 1; d >= 0; --d) {
            const std::int64_t i = linear % shape[d];
            linear /= shape[d];
            for (int k = 0; k < N; ++k) off[k] += i * strides[k][d];
        }
    }

    // Whether every view is the plain row-major layout of the shape.
    bool contiguous() const {
        if (ndim == 0) return true;
        if (ndim > 1) return false;
        for (int k = 0; k < N; ++k)
            if (strides[k][0] != 1) return false;
        return true;
    }
};

inline std::int64_t element_count(const Strided& view) {
    std::int64_t n = 1;
    for (int d = 0; d < view.ndim; ++d) n *= view.shape[d];
    return n;
}

inline void check_view(const char* op, const Strided& view) {
    if (view.ndim < 0 || view.ndim > kMaxDims)
        throw ShapeError(std::string(op) + " on CUDA: a view has " + std::to_string(view.ndim) +
                         " dimensions, at most " + std::to_string(kMaxDims) + " are supported");
}

// The indexer over `shape` (ndim dimensions) for N views whose strides are strides[0..N).
template <int N>
Indexer<N> make_indexer(int ndim, const std::int64_t* shape, const std::int64_t* const (&strides)[N]) {
    Indexer<N> ix;
    for (int d = 0; d < ndim; ++d) {
        if (shape[d] == 1) continue;
        const int last = ix.ndim - 1;
        bool merge = last >= 0;
        for (int k = 0; merge && k < N; ++k) merge = ix.strides[k][last] == strides[k][d] * shape[d];
        if (merge) {
            ix.shape[last] *= shape[d];
            for (int k = 0; k < N; ++k) ix.strides[k][last] = strides[k][d];
        } else {
            ix.shape[ix.ndim] = shape[d];
            for (int k = 0; k < N; ++k) ix.strides[k][ix.ndim] = strides[k][d];
            ++ix.ndim;
        }
    }
    return ix;
}

// The indexer for views that must all have the shape of the first (ShapeError otherwise).
template <int N> Indexer<N> make_indexer(const char* op, const Strided* const (&views)[N]) {
    const Strided& first = *views[0];
    const std::int64_t* strides[N];
    for (int k = 0; k < N; ++k) {
        check_view(op, *views[k]);
        bool same = views[k]->ndim == first.ndim;
        for (int d = 0; same && d < first.ndim; ++d) same = views[k]->shape[d] == first.shape[d];
        if (!same)
            throw ShapeError(std::string(op) + " on CUDA: the operand views do not share one shape "
                             "(broadcast them to the output shape first)");
        strides[k] = views[k]->strides;
    }
    return make_indexer<N>(first.ndim, first.shape, strides);
}

}  // namespace fluxion::cuda
