// Softmax and log-softmax along the middle axis of {outer, n, inner}, and their gradients.
// The row maximum is subtracted before exponentiating, so no finite input overflows.
//   softmax:      y = exp(x - m) / s,        gx = y (gy - sum(gy y))
//   log-softmax:  y = (x - m) - log(s),      gx = gy - exp(y) sum(gy)
// with m = max(x) and s = sum(exp(x - m)) over the axis. x - m is exact near the maximum, so
// log-softmax is subtracted in that order: x - (m + log(s)) rounds m + log(s) at m's magnitude and
// loses about 3 digits of f32 with logits near ±1e4.
// A row's maximum and sums are taken in kLanes independent partial results, and f32 exponentials
// with vector_math.hpp's polynomial instead of calls to expf, so that the compiler vectorises a row (whose sums it
// may not reorder on its own): in attention, rows of 49 scores, the calls to expf were half of the
// softmax's time.
// GCC 12's AVX-512 intrinsics pass an uninitialised vector as the unused source of their unmasked
// forms, which -Wmaybe-uninitialized reports once they are inlined here (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"
#include "cpu/vector_math.hpp"

namespace fluxion::backend::cpu {
namespace {

// Columns handled together when the axis is strided (inner > 1): they advance row by row.
inline constexpr int64_t kColumns = 64;

// Partial results per row: one vector of f32 (AVX-512), two of f64.
inline constexpr int64_t kLanes = 16;

// f32 exponentials by vector_math.hpp's polynomial (vectorises), f64 by std::.
inline float exp_of(float x) { return vector_math::exp(x); }
inline double exp_of(double x) { return std::exp(x); }

template <class T>
T row_max(int64_t n, const T* x) {
    T m[kLanes];
    std::fill(m, m + kLanes, -std::numeric_limits<T>::infinity());
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
        for (int64_t i = 0; i < kLanes; ++i) m[i] = std::max(m[i], x[j + i]);
    for (int64_t i = 0; j + i < n; ++i) m[i] = std::max(m[i], x[j + i]);
    return *std::max_element(m, m + kLanes);
}

// Terms summed in kLanes partial sums before their total joins the row's (in f64).
inline constexpr int64_t kBlock = 1024;

// The sum of term(j) for j < n: each block of kBlock terms in kLanes partial sums, the blocks' sums
// added in f64. One pass of partial sums over a whole row of 2^20 terms lost 4e-4 of an f32 softmax
// (65,536 terms a lane); this way a term meets at most kBlock / kLanes others in f32.
template <class T, class Term>
T lane_sum(int64_t n, Term&& term) {
    double total = 0;
    for (int64_t start = 0; start < n; start += kBlock) {
        const int64_t len = std::min(kBlock, n - start);
        T s[kLanes] = {};
        int64_t j = 0;
        for (; j + kLanes <= len; j += kLanes)
            for (int64_t i = 0; i < kLanes; ++i) s[i] += term(start + j + i);
        for (int64_t i = 0; j + i < len; ++i) s[i] += term(start + j + i);
        T block = 0;
        for (const T v : s) block += v;
        total += block;
    }
    return T(total);
}

template <class T>
void forward_row(bool log, int64_t n, const T* x, T* y) {
    const T m = row_max(n, x);
    const T s = lane_sum<T>(n, [&](int64_t j) { return y[j] = exp_of(x[j] - m); });
    if (log) {
        const T log_s = std::log(s);
        for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - m) - log_s;
    } else {
        const T scale = T(1) / s;
        for (int64_t j = 0; j < n; ++j) y[j] *= scale;
    }
}

// `len` columns spaced by one element, rows `inner` apart.
template <class T>
void forward_columns(bool log, int64_t n, int64_t inner, int64_t len, const T* x, T* y) {
    T m[kColumns];
    double s[kColumns];  // in f64: a column's terms are added one by one
    for (int64_t i = 0; i < len; ++i) m[i] = x[i], s[i] = 0;
    for (int64_t j = 1; j < n; ++j)
        for (int64_t i = 0; i < len; ++i) m[i] = std::max(m[i], x[j * inner + i]);
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < len; ++i) s[i] += (y[j * inner + i] = exp_of(x[j * inner + i] - m[i]));
    T k[kColumns];  // log(s) or 1 / s
    for (int64_t i = 0; i < len; ++i) k[i] = log ? T(std::log(T(s[i]))) : T(1) / T(s[i]);
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < len; ++i) {
            if (log)
                y[j * inner + i] = (x[j * inner + i] - m[i]) - k[i];
            else
                y[j * inner + i] *= k[i];
        }
}

template <class T>
void backward_row(bool log, int64_t n, const T* y, const T* gy, T* gx) {
    if (log) {
        const T total = lane_sum<T>(n, [&](int64_t j) { return gy[j]; });
        for (int64_t j = 0; j < n; ++j) gx[j] = gy[j] - exp_of(y[j]) * total;
    } else {
        const T total = lane_sum<T>(n, [&](int64_t j) { return gy[j] * y[j]; });
        for (int64_t j = 0; j < n; ++j) gx[j] = y[j] * (gy[j] - total);
    }
}

template <class T>
void backward_columns(bool log, int64_t n, int64_t inner, int64_t len, const T* y, const T* gy, T* gx) {
    double sums[kColumns] = {};  // in f64, as forward_columns's
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < len; ++i) sums[i] += log ? gy[j * inner + i] : gy[j * inner + i] * y[j * inner + i];
    T total[kColumns];
    for (int64_t i = 0; i < len; ++i) total[i] = T(sums[i]);
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < len; ++i) {
            const int64_t at = j * inner + i;
            gx[at] = log ? gy[at] - exp_of(y[at]) * total[i] : y[at] * (gy[at] - total[i]);
        }
}

#if defined(__AVX512F__)
// f32 rows of a contiguous axis sixteen lanes at a time, the row's last vector masked, the lanes
// combined in registers. The loops above leave a row's tail and the combination of its lanes to
// scalar code, which on attention's rows of 49 scores took as long as the rest: these take 0.58 of
// their time on such rows (BENCHMARKS.md, "attention's products on every thread"). Sums keep their
// blocks of kBlock terms, added in f64; the exponential is vector_math's formula.

// Calls f(j, mask) for j = 0, 16, ... below n, the last vector's mask covering what is left of the row.
template <class F>
[[gnu::always_inline]] inline void for_each_vector(int64_t n, F&& f) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) f(j, __mmask16(0xffff));
    if (j < n) f(j, __mmask16((1u << (n - j)) - 1));
}

// max(v, m) keeps m where v is NaN, as std::max(m, v) does in row_max.
float vector_row_max(int64_t n, const float* x) {
    __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for_each_vector(n, [&](int64_t j, __mmask16 k) { m = _mm512_mask_max_ps(m, k, _mm512_maskz_loadu_ps(k, x + j), m); });
    return _mm512_reduce_max_ps(m);
}

// The sum of term(j, mask)'s lanes in the mask, over the row.
template <class Term>
float vector_sum(int64_t n, Term&& term) {
    double total = 0;
    for (int64_t start = 0; start < n; start += kBlock) {
        __m512 s = _mm512_setzero_ps();
        for_each_vector(std::min(kBlock, n - start),
                        [&](int64_t j, __mmask16 k) { s = _mm512_mask_add_ps(s, k, s, term(start + j, k)); });
        total += _mm512_reduce_add_ps(s);
    }
    return float(total);
}

void forward_row(bool log, int64_t n, const float* x, float* y) {
    const __m512 m = _mm512_set1_ps(vector_row_max(n, x));
    const float s = vector_sum(n, [&](int64_t j, __mmask16 k) {
        const __m512 e = vector_math::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), m));
        _mm512_mask_storeu_ps(y + j, k, e);
        return e;
    });
    if (log) {
        const __m512 log_s = _mm512_set1_ps(std::log(s));
        for_each_vector(n, [&](int64_t j, __mmask16 k) {
            _mm512_mask_storeu_ps(y + j, k, _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), m), log_s));
        });
    } else {
        const __m512 scale = _mm512_set1_ps(1.0f / s);
        for_each_vector(n, [&](int64_t j, __mmask16 k) {
            _mm512_mask_storeu_ps(y + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + j), scale));
        });
    }
}

void backward_row(bool log, int64_t n, const float* y, const float* gy, float* gx) {
    if (log) {
        const __m512 total =
            _mm512_set1_ps(vector_sum(n, [&](int64_t j, __mmask16 k) { return _mm512_maskz_loadu_ps(k, gy + j); }));
        for_each_vector(n, [&](int64_t j, __mmask16 k) {
            const __m512 e = vector_math::exp(_mm512_maskz_loadu_ps(k, y + j));
            _mm512_mask_storeu_ps(gx + j, k, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, gy + j), _mm512_mul_ps(e, total)));
        });
    } else {
        const __m512 total = _mm512_set1_ps(vector_sum(n, [&](int64_t j, __mmask16 k) {
            return _mm512_mul_ps(_mm512_maskz_loadu_ps(k, gy + j), _mm512_maskz_loadu_ps(k, y + j));
        }));
        for_each_vector(n, [&](int64_t j, __mmask16 k) {
            const __m512 yv = _mm512_maskz_loadu_ps(k, y + j);
            _mm512_mask_storeu_ps(gx + j, k, _mm512_mul_ps(yv, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, gy + j), total)));
        });
    }
}
#endif

// Calls body(x offset, columns) for every block of columns of every outer slice, in parallel.
template <class Body>
void for_each_block(int64_t outer, int64_t n, int64_t inner, Body&& body) {
    const int64_t width = inner == 1 ? 1 : kColumns;
    const int64_t blocks = (inner + width - 1) / width;
    parallel_for(outer * blocks, team_for(outer * n * inner, kParallelMin / 8), [&](int64_t first, int64_t last) {
        for (int64_t task = first; task < last; ++task) {
            const int64_t o = task / blocks, i0 = (task % blocks) * width;
            body(o * n * inner + i0, std::min(width, inner - i0));
        }
    });
}

}  // namespace

void softmax(int device, bool log, DType t, int64_t outer, int64_t n, int64_t inner, const void* x, void* y) {
    if (n == 0) return;
    dispatch_float(t, log ? "logsoftmax" : "softmax", [&](auto tag) {
        using T = decltype(tag);
        const T* px = static_cast<const T*>(x);
        T* py = static_cast<T*>(y);
        for_each_block(outer, n, inner, [&](int64_t offset, int64_t len) {
            if (inner == 1)
                forward_row(log, n, px + offset, py + offset);
            else
                forward_columns(log, n, inner, len, px + offset, py + offset);
        });
    });
}

void softmax_backward(int device, bool log, DType t, int64_t outer, int64_t n, int64_t inner, const void* y,
                      const void* gy, void* gx) {
    if (n == 0) return;
    dispatch_float(t, log ? "logsoftmax_backward" : "softmax_backward", [&](auto tag) {
        using T = decltype(tag);
        const T* py = static_cast<const T*>(y);
        const T* pg = static_cast<const T*>(gy);
        T* px = static_cast<T*>(gx);
        for_each_block(outer, n, inner, [&](int64_t offset, int64_t len) {
            if (inner == 1)
                backward_row(log, n, py + offset, pg + offset, px + offset);
            else
                backward_columns(log, n, inner, len, py + offset, pg + offset, px + offset);
        });
    });
}

}  // namespace fluxion::backend::cpu
