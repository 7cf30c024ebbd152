// strided.hpp — walking K strided operands of one shape together, row by row along the last axis.
// Unit axes are dropped and axes that are contiguous with their inner neighbour in every operand
// are merged first, so contiguous operands and broadcast scalars become one long row: those are
// the fast paths, and everything else is a loop over rows with the innermost axis inside.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"
#include "fluxion/error.hpp"

namespace fluxion::backend::cpu {

template <int K>
struct Walk {
    int ndim = 0;
    int64_t shape[kMaxDims];
    int64_t strides[K][kMaxDims];  // strides[k][d]: operand k along axis d
};

// `strides[k]` holds operand k's strides for the `ndim` axes of `shape`.
template <int K>
Walk<K> simplify(int ndim, const int64_t* shape, const int64_t* const (&strides)[K]) {
    if (ndim < 0 || ndim > kMaxDims)
        throw ShapeError("strided view with " + std::to_string(ndim) + " dimensions; at most " +
                         std::to_string(kMaxDims) + " are supported");
    Walk<K> w;
    for (int d = 0; d < ndim; ++d) {
        if (shape[d] == 1) continue;
        const int p = w.ndim - 1;
        bool merges = p >= 0 && shape[d] != 0 && w.shape[p] != 0;
        for (int k = 0; k < K && merges; ++k) merges = w.strides[k][p] == strides[k][d] * shape[d];
        if (merges) {
            w.shape[p] *= shape[d];
            for (int k = 0; k < K; ++k) w.strides[k][p] = strides[k][d];
            continue;
        }
        w.shape[w.ndim] = shape[d];
        for (int k = 0; k < K; ++k) w.strides[k][w.ndim] = strides[k][d];
        ++w.ndim;
    }
    if (w.ndim == 0) {  // a single element
        w.ndim = 1;
        w.shape[0] = 1;
        for (int k = 0; k < K; ++k) w.strides[k][0] = 0;
    }
    return w;
}

// Calls row(offsets, length) for pieces of the innermost axis; offsets[k] is operand k's element
// offset of the piece's first element, and its elements are w.strides[k][w.ndim - 1] apart.
// Threads take contiguous runs of rows; rows are cut into pieces only when there are too few of
// them to share among the threads.
template <int K, class Row>
void for_each_row(const Walk<K>& w, Row&& row) {
    const int outer = w.ndim - 1;
    const int64_t length = w.shape[outer];
    int64_t rows = 1;
    for (int d = 0; d < outer; ++d) rows *= w.shape[d];
    const int64_t total = rows * length;
    if (total == 0) return;
    const int64_t team = team_for(total);

    const auto offsets_of = [&](int64_t r, int64_t* index, int64_t* offset) {
        for (int k = 0; k < K; ++k) offset[k] = 0;
        for (int d = outer - 1; d >= 0; --d) {
            index[d] = r % w.shape[d];
            r /= w.shape[d];
            for (int k = 0; k < K; ++k) offset[k] += index[d] * w.strides[k][d];
        }
    };

    if (team > 1 && rows < std::min<int64_t>(team, threads())) {  // few long rows: split each one
        const int64_t pieces = std::min((std::min<int64_t>(team, threads()) + rows - 1) / rows, length);
        parallel_for(rows * pieces, team, [&](int64_t first, int64_t last) {
            for (int64_t p = first; p < last; ++p) {
                int64_t index[kMaxDims], offset[K];
                offsets_of(p / pieces, index, offset);
                const int64_t begin = length * (p % pieces) / pieces, end = length * (p % pieces + 1) / pieces;
                for (int k = 0; k < K; ++k) offset[k] += begin * w.strides[k][outer];
                row(static_cast<const int64_t*>(offset), end - begin);
            }
        });
        return;
    }

    parallel_for(rows, team, [&](int64_t first, int64_t last) {
        int64_t index[kMaxDims], offset[K];
        offsets_of(first, index, offset);
        for (int64_t r = first; r < last; ++r) {
            row(static_cast<const int64_t*>(offset), length);
            for (int d = outer - 1; d >= 0; --d) {  // advance to the next row like an odometer
                for (int k = 0; k < K; ++k) offset[k] += w.strides[k][d];
                if (++index[d] < w.shape[d]) break;
                for (int k = 0; k < K; ++k) offset[k] -= w.strides[k][d] * w.shape[d];
                index[d] = 0;
            }
        }
    });
}

// Strides of a contiguous row-major array of `shape`.
inline void contiguous_strides(int ndim, const int64_t* shape, int64_t* strides) {
    int64_t step = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        strides[d] = step;
        step *= shape[d];
    }
}

}  // namespace fluxion::backend::cpu
