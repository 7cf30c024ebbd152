// Softmax and log-softmax along the middle axis of {outer, n, inner}, and their gradients.
// The row maximum is subtracted before exponentiating, so no finite input overflows.
//   softmax:      y = exp(x - m) / s,        gx = y (gy - sum(gy y))
//   log-softmax:  y = (x - m) - log(s),      gx = gy - exp(y) sum(gy)
// with m = max(x) and s = sum(exp(x - m)) over the axis. x - m is exact near the maximum, so
// log-softmax is subtracted in that order: x - (m + log(s)) rounds m + log(s) at m's magnitude and
// loses about 3 digits of f32 with logits near ±1e4.
#include <algorithm>
#include <cmath>

#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {
namespace {

// Columns handled together when the axis is strided (inner > 1): they advance row by row.
inline constexpr int64_t kColumns = 64;

template <class T>
void forward_row(bool log, int64_t n, const T* x, T* y) {
    T m = x[0];
    for (int64_t j = 1; j < n; ++j) m = std::max(m, x[j]);
    T s = 0;
    for (int64_t j = 0; j < n; ++j) s += (y[j] = std::exp(x[j] - m));
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
    T m[kColumns], s[kColumns];
    for (int64_t i = 0; i < len; ++i) m[i] = x[i], s[i] = 0;
    for (int64_t j = 1; j < n; ++j)
        for (int64_t i = 0; i < len; ++i) m[i] = std::max(m[i], x[j * inner + i]);
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < len; ++i) s[i] += (y[j * inner + i] = std::exp(x[j * inner + i] - m[i]));
    for (int64_t i = 0; i < len; ++i) {
        if (log)
            s[i] = std::log(s[i]);
        else
            s[i] = T(1) / s[i];
    }
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < len; ++i) {
            if (log)
                y[j * inner + i] = (x[j * inner + i] - m[i]) - s[i];
            else
                y[j * inner + i] *= s[i];
        }
}

template <class T>
void backward_row(bool log, int64_t n, const T* y, const T* gy, T* gx) {
    T total = 0;
    if (log) {
        for (int64_t j = 0; j < n; ++j) total += gy[j];
        for (int64_t j = 0; j < n; ++j) gx[j] = gy[j] - std::exp(y[j]) * total;
    } else {
        for (int64_t j = 0; j < n; ++j) total += gy[j] * y[j];
        for (int64_t j = 0; j < n; ++j) gx[j] = y[j] * (gy[j] - total);
    }
}

template <class T>
void backward_columns(bool log, int64_t n, int64_t inner, int64_t len, const T* y, const T* gy, T* gx) {
    T total[kColumns] = {};
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < len; ++i) total[i] += log ? gy[j * inner + i] : gy[j * inner + i] * y[j * inner + i];
    for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < len; ++i) {
            const int64_t at = j * inner + i;
            gx[at] = log ? gy[at] - std::exp(y[at]) * total[i] : y[at] * (gy[at] - total[i]);
        }
}

// Calls body(x offset, columns) for every block of columns of every outer slice, in parallel.
template <class Body>
void for_each_block(int64_t outer, int64_t n, int64_t inner, Body&& body) {
    const int64_t width = inner == 1 ? 1 : kColumns;
    const int64_t blocks = (inner + width - 1) / width;
    parallel_for(outer * blocks, outer * n * inner > kParallelMin / 8, [&](int64_t first, int64_t last) {
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
