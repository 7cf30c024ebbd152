// Kernels that set, move, gather and convert elements: fill, copy_strided, cast, index_select,
// index_add.
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "cpu/dispatch.hpp"
#include "cpu/half_simd.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"
#include "cpu/strided.hpp"

namespace fluxion::backend::cpu {
namespace {

// Element conversion as static_cast does it (to bool: x != 0); the 16-bit floats go through float.
template <class To, class From>
To convert(From x) {
    if constexpr (is_half_v<From>) return convert<To>(to_float(x));
    else if constexpr (std::is_same_v<To, Half>) return to_half(float(x));
    else if constexpr (std::is_same_v<To, BFloat16>) return to_bfloat16(float(x));
    else return static_cast<To>(x);
}

// Converts s[begin, end) into d. Between f32 and the 16-bit floats eight at a time where the build
// has AVX2 and F16C: the same bits as convert's scalar loop, which GCC does not vectorise (to_half's
// branches), at the speed of memory (a mixed-precision step rounds its masters and widens its
// gradients this way, every parameter, every step).
template <class To, class From>
void convert_range(const From* s, To* d, int64_t begin, int64_t end) {
#ifdef FLUXION_HALF_SIMD
    if constexpr (std::is_same_v<From, float> && is_half_v<To>) {
        return f32_to_cells(s + begin, d + begin, end - begin);
    } else if constexpr (is_half_v<From> && std::is_same_v<To, float>) {
        return cells_to_f32(s + begin, d + begin, end - begin);
    }
#endif
    for (int64_t i = begin; i < end; ++i) d[i] = convert<To>(s[i]);
}

// A transposing copy goes tile by tile: 64 rows read as runs, 8 columns gathered at a time. Eight
// strided lines at once fit an 8-way L1 set even when the stride is a power of two.
inline constexpr int64_t kTileRows = 64, kTileCols = 8;

// The copy whose source is unit-strided along the second-last axis and whose destination is
// unit-strided along the last: a transpose of the last two axes.
template <class T>
void transpose_copy(const Walk<2>& w, const T* src, T* dst) {
    const int nd = w.ndim;
    const int64_t rows = w.shape[nd - 2], cols = w.shape[nd - 1];
    const int64_t src_col = w.strides[0][nd - 1], dst_row = w.strides[1][nd - 2];
    int64_t outer = 1;
    for (int d = 0; d < nd - 2; ++d) outer *= w.shape[d];
    const int64_t strips = (rows + kTileRows - 1) / kTileRows;
    parallel_for(outer * strips, team_for(outer * rows * cols), [&](int64_t first, int64_t last) {
        for (int64_t task = first; task < last; ++task) {
            int64_t rest = task / strips, src_offset = 0, dst_offset = 0;
            for (int d = nd - 3; d >= 0; --d) {
                const int64_t index = rest % w.shape[d];
                rest /= w.shape[d];
                src_offset += index * w.strides[0][d];
                dst_offset += index * w.strides[1][d];
            }
            const int64_t r0 = (task % strips) * kTileRows, r1 = std::min(r0 + kTileRows, rows);
            for (int64_t c0 = 0; c0 < cols; c0 += kTileCols) {
                const int64_t c1 = std::min(c0 + kTileCols, cols);
                for (int64_t r = r0; r < r1; ++r) {
                    const T* s = src + src_offset + r;
                    T* d = dst + dst_offset + r * dst_row;
                    for (int64_t c = c0; c < c1; ++c) d[c] = s[c * src_col];
                }
            }
        }
    });
}

void check_indices(const char* kernel, const int64_t* idx, int64_t n_idx, int64_t size) {
    for (int64_t j = 0; j < n_idx; ++j)
        if (idx[j] < 0 || idx[j] >= size)
            throw ValueError(std::string(kernel) + ": index " + std::to_string(idx[j]) + " at position " +
                             std::to_string(j) + " is out of range for an axis of size " + std::to_string(size) +
                             "; indices must lie in [0, " + std::to_string(size) + ")");
}

}  // namespace

void fill(int device, DType t, int64_t n, void* dst, double value) {
    dispatch_any(t, "fill", [&](auto tag) {
        using T = decltype(tag);
        const T v = convert<T>(value);
        T* d = static_cast<T*>(dst);
        parallel_for(n, team_for(n, 4 * kParallelMin), [=](int64_t begin, int64_t end) { std::fill(d + begin, d + end, v); });
    });
}

void copy_strided(int device, DType t, const Strided* src_view, const void* src, const int64_t* dst_strides,
                  void* dst) {
    const Walk<2> w = simplify<2>(src_view->ndim, src_view->shape, {src_view->strides, dst_strides});
    const int last = w.ndim - 1;
    const int64_t ss = w.strides[0][last], ds = w.strides[1][last];
    dispatch_bytes(t, [&](auto tag) {
        using T = decltype(tag);
        const T* s = static_cast<const T*>(src);
        T* d = static_cast<T*>(dst);
        if (w.ndim >= 2 && ds == 1 && ss != 1 && w.strides[0][last - 1] == 1) return transpose_copy(w, s, d);
        for_each_row(w, [&](const int64_t* offset, int64_t n) {
            const T* rs = s + offset[0];
            T* rd = d + offset[1];
            // Separate loops for the common cases, so that each compiles to its own vector code.
            if (ss == 1 && ds == 1)
                std::memcpy(rd, rs, std::size_t(n) * sizeof(T));
            else if (ss == 0 && ds == 1)  // broadcasting one element (an expanded gradient)
                std::fill(rd, rd + n, *rs);
            else if (ds == 1)
                for (int64_t i = 0; i < n; ++i) rd[i] = rs[i * ss];
            else
                for (int64_t i = 0; i < n; ++i) rd[i * ds] = rs[i * ss];
        });
    });
}

void cast(int device, DType from, DType to, int64_t n, const void* src, void* dst) {
    if (from == to) {
        dispatch_bytes(from, [&](auto tag) { std::memcpy(dst, src, std::size_t(n) * sizeof(tag)); });
        return;
    }
    dispatch_any(from, "cast", [&](auto from_tag) {
        using From = decltype(from_tag);
        dispatch_any(to, "cast", [&](auto to_tag) {
            using To = decltype(to_tag);
            const From* s = static_cast<const From*>(src);
            To* d = static_cast<To*>(dst);
            parallel_for(n, team_for(n), [=](int64_t begin, int64_t end) { convert_range(s, d, begin, end); });
        });
    });
}

void index_select(int device, DType t, int64_t outer, int64_t n_src, int64_t inner, const void* src,
                  const int64_t* idx, int64_t n_idx, void* dst) {
    check_indices("index_select", idx, n_idx, n_src);
    dispatch_bytes(t, [&](auto tag) {
        using T = decltype(tag);
        const T* s = static_cast<const T*>(src);
        T* d = static_cast<T*>(dst);
        // Rows of the result (o, j) in runs of one o each, with no division per row: nearest
        // upsampling along the last axis gathers single elements (inner == 1), where a division and
        // a remainder per element made its forward pass 3.5x slower on the U-Net's shapes.
        parallel_for(outer * n_idx, team_for(outer * n_idx * inner), [=](int64_t first, int64_t last) {
            int64_t o = first / n_idx, j = first % n_idx;
            for (int64_t row = first; row < last; j = 0, ++o) {
                const int64_t run = std::min(n_idx - j, last - row);
                const T* from = s + o * n_src * inner;
                T* to = d + row * inner;
                if (inner == 1) {
                    for (int64_t k = 0; k < run; ++k) to[k] = from[idx[j + k]];
                } else {
                    for (int64_t k = 0; k < run; ++k, to += inner)
                        for (int64_t i = 0; i < inner; ++i) to[i] = from[idx[j + k] * inner + i];
                }
                row += run;
            }
        });
    });
}

// Repeated indices add into the same row, so threads split the outer and inner axes, never j.
void index_add(int device, DType t, int64_t outer, int64_t n_dst, int64_t inner, const void* src,
               const int64_t* idx, int64_t n_idx, void* dst) {
    check_indices("index_add", idx, n_idx, n_dst);
    dispatch_numeric(t, "index_add", [&](auto tag) {
        using T = decltype(tag);
        using W = Wrapping<T>;
        const T* s = static_cast<const T*>(src);
        T* d = static_cast<T*>(dst);
        constexpr int64_t block = 1024;
        const int64_t blocks = (inner + block - 1) / block;
        parallel_for(outer * blocks, team_for(outer * n_idx * inner), [=](int64_t first, int64_t last) {
            if (inner == 1) {  // single elements (nearest upsampling's gradient along the last axis)
                for (int64_t o = first; o < last; ++o) {
                    const T* from = s + o * n_idx;
                    T* to = d + o * n_dst;
                    for (int64_t j = 0; j < n_idx; ++j) to[idx[j]] = T(W(to[idx[j]]) + W(from[j]));
                }
                return;
            }
            for (int64_t task = first; task < last; ++task) {
                const int64_t o = task / blocks, i0 = (task % blocks) * block, len = std::min(block, inner - i0);
                for (int64_t j = 0; j < n_idx; ++j) {
                    const T* from = s + (o * n_idx + j) * inner + i0;
                    T* to = d + (o * n_dst + idx[j]) * inner + i0;
                    for (int64_t i = 0; i < len; ++i) to[i] = T(W(to[i]) + W(from[i]));
                }
            }
        });
    });
}

}  // namespace fluxion::backend::cpu
