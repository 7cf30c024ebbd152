// batch_norm.cpp — BatchNorm's training pass and its gradient, each in one kernel call: the
// statistics, the normalisation, the affine step and relu forward; the two channel sums and the
// input gradient backward. Composed from reductions and elementwise ops the same layer took about
// 7 passes over x forward and 8 backward, each a kernel call with its own output, and the relu
// after it two more; here x is read three times forward (sum, squared deviations, output) and gy
// and x twice backward, a channel at a time so that the second and third reads come from the cache.
// Sums are kept in double, so a channel of many values loses nothing to f32's accumulation.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"
#include "fluxion/error.hpp"

namespace fluxion::backend::cpu {
namespace {

// A channel's values: `outer` rows of `inner` values, one row in each of x's `outer` blocks.
struct Rows {
    int64_t outer, inner;
};

template <class T> T relu_of(T v) { return v < T(0) ? T(0) : v; }  // the relu kernel's formula

// g = gy, or relu's gradient of it (gy where y > 0) where the pass had relu.
template <class T> T masked(const T* y, const T* gy, int64_t i) { return y ? (y[i] > T(0) ? gy[i] : T(0)) : gy[i]; }

// A thread's scratch of n doubles, kept between calls so that a compiled step's replays allocate
// nothing once it has grown.
double* scratch(int64_t n) {
    thread_local std::vector<double> buffer;
    if (buffer.size() < static_cast<std::size_t>(n)) buffer.resize(static_cast<std::size_t>(n));
    return buffer.data();
}

// The forward pass of channels [first, last), one channel at a time (inner of 16 and more).
template <class T> void forward_by_channel(Rows r, int64_t c, int64_t first, int64_t last, const T* x, const T* w,
                                           const T* b, double eps, bool relu, T* y, T* mean, T* var, T* rstd) {
    const double m = double(r.outer * r.inner);
    for (int64_t j = first; j < last; ++j) {
        double s = 0;
        for (int64_t o = 0; o < r.outer; ++o) {
            const T* xr = x + (o * c + j) * r.inner;
#pragma omp simd reduction(+ : s)
            for (int64_t i = 0; i < r.inner; ++i) s += double(xr[i]);
        }
        const double mu = s / m;
        double q = 0;
        for (int64_t o = 0; o < r.outer; ++o) {
            const T* xr = x + (o * c + j) * r.inner;
#pragma omp simd reduction(+ : q)
            for (int64_t i = 0; i < r.inner; ++i) {
                const double d = double(xr[i]) - mu;
                q += d * d;
            }
        }
        const double v = q / m, rs = 1 / std::sqrt(v + eps);
        mean[j] = T(mu), var[j] = T(v), rstd[j] = T(rs);
        const T mt = T(mu), scale = w ? T(rs * double(w[j])) : T(rs), shift = b ? b[j] : T(0);
        for (int64_t o = 0; o < r.outer; ++o) {
            const T* xr = x + (o * c + j) * r.inner;
            T* yr = y + (o * c + j) * r.inner;
            if (relu) {
#pragma omp simd
                for (int64_t i = 0; i < r.inner; ++i) yr[i] = relu_of((xr[i] - mt) * scale + shift);
            } else {
#pragma omp simd
                for (int64_t i = 0; i < r.inner; ++i) yr[i] = (xr[i] - mt) * scale + shift;
            }
        }
    }
}

// The same for few values per row (inner below 16, as {N, C} inputs and 2×2 images): each row's
// run of the slice's channels at once, sums kept per channel, so that the loops run along memory.
template <class T> void forward_by_row(Rows r, int64_t c, int64_t first, int64_t last, const T* x, const T* w,
                                       const T* b, double eps, bool relu, T* y, T* mean, T* var, T* rstd) {
    const int64_t k = last - first, len = k * r.inner;
    const double m = double(r.outer * r.inner);
    double* acc = scratch(len + 4 * k);  // then mu, and the mean, scale and shift in T's values
    double *mu = acc + len, *mt = mu + k, *scale = mt + k, *shift = scale + k;
    std::fill(acc, acc + len, 0.0);
    for (int64_t o = 0; o < r.outer; ++o) {
        const T* xr = x + (o * c + first) * r.inner;
#pragma omp simd
        for (int64_t e = 0; e < len; ++e) acc[e] += double(xr[e]);
    }
    for (int64_t jj = 0; jj < k; ++jj) {
        double s = 0;
        for (int64_t i = 0; i < r.inner; ++i) s += acc[jj * r.inner + i];
        mu[jj] = s / m;
    }
    std::fill(acc, acc + len, 0.0);
    for (int64_t o = 0; o < r.outer; ++o) {
        const T* xr = x + (o * c + first) * r.inner;
        for (int64_t jj = 0; jj < k; ++jj)
            for (int64_t i = 0; i < r.inner; ++i) {
                const double d = double(xr[jj * r.inner + i]) - mu[jj];
                acc[jj * r.inner + i] += d * d;
            }
    }
    for (int64_t jj = 0; jj < k; ++jj) {
        const int64_t j = first + jj;
        double q = 0;
        for (int64_t i = 0; i < r.inner; ++i) q += acc[jj * r.inner + i];
        const double v = q / m, rs = 1 / std::sqrt(v + eps);
        mean[j] = T(mu[jj]), var[j] = T(v), rstd[j] = T(rs);
        mt[jj] = double(T(mu[jj])), scale[jj] = double(w ? T(rs * double(w[j])) : T(rs));
        shift[jj] = double(b ? b[j] : T(0));
    }
    for (int64_t o = 0; o < r.outer; ++o) {
        const T* xr = x + (o * c + first) * r.inner;
        T* yr = y + (o * c + first) * r.inner;
        for (int64_t jj = 0; jj < k; ++jj)
            for (int64_t i = 0; i < r.inner; ++i) {
                const T v = (xr[jj * r.inner + i] - T(mt[jj])) * T(scale[jj]) + T(shift[jj]);
                yr[jj * r.inner + i] = relu ? relu_of(v) : v;
            }
    }
}

template <class T> void backward_by_channel(Rows r, int64_t c, int64_t first, int64_t last, const T* x, const T* y,
                                            const T* gy, const T* mean, const T* rstd, const T* w, T* gx, T* gw,
                                            T* gb) {
    const double m = double(r.outer * r.inner);
    for (int64_t j = first; j < last; ++j) {
        const T mt = mean[j];
        double sg = 0, sgc = 0;  // Σ g and Σ g (x - mean)
        for (int64_t o = 0; o < r.outer; ++o) {
            const int64_t at = (o * c + j) * r.inner;
            const T *xr = x + at, *gr = gy + at, *yr = y ? y + at : nullptr;
#pragma omp simd reduction(+ : sg, sgc)
            for (int64_t i = 0; i < r.inner; ++i) {
                const double g = double(masked(yr, gr, i));
                sg += g;
                sgc += g * double(xr[i] - mt);
            }
        }
        const double rs = double(rstd[j]), sgx = sgc * rs;
        if (gb) gb[j] = T(sg);
        if (gw) gw[j] = T(sgx);
        if (!gx) continue;
        const T rt = rstd[j], a = T(sg / m), bx = T(sgx / m), k = w ? T(rs * double(w[j])) : rt;
        for (int64_t o = 0; o < r.outer; ++o) {
            const int64_t at = (o * c + j) * r.inner;
            const T *xr = x + at, *gr = gy + at, *yr = y ? y + at : nullptr;
            T* gxr = gx + at;
#pragma omp simd
            for (int64_t i = 0; i < r.inner; ++i) gxr[i] = (masked(yr, gr, i) - a - (xr[i] - mt) * rt * bx) * k;
        }
    }
}

template <class T> void backward_by_row(Rows r, int64_t c, int64_t first, int64_t last, const T* x, const T* y,
                                        const T* gy, const T* mean, const T* rstd, const T* w, T* gx, T* gw, T* gb) {
    const int64_t k = last - first, len = k * r.inner;
    const double m = double(r.outer * r.inner);
    double* sg = scratch(2 * len + 3 * k);  // then Σ g (x - mean), and each channel's coefficients in T's values
    double *sgc = sg + len, *a = sgc + len, *bx = a + k, *scale = bx + k;
    std::fill(sg, sg + 2 * len, 0.0);
    for (int64_t o = 0; o < r.outer; ++o) {
        const int64_t at = (o * c + first) * r.inner;
        const T *xr = x + at, *gr = gy + at, *yr = y ? y + at : nullptr;
        for (int64_t jj = 0; jj < k; ++jj)
            for (int64_t i = 0; i < r.inner; ++i) {
                const int64_t e = jj * r.inner + i;
                const double g = double(masked(yr, gr, e));
                sg[e] += g;
                sgc[e] += g * double(xr[e] - mean[first + jj]);
            }
    }
    for (int64_t jj = 0; jj < k; ++jj) {
        const int64_t j = first + jj;
        double s = 0, sc = 0;
        for (int64_t i = 0; i < r.inner; ++i) s += sg[jj * r.inner + i], sc += sgc[jj * r.inner + i];
        const double rs = double(rstd[j]), sgx = sc * rs;
        if (gb) gb[j] = T(s);
        if (gw) gw[j] = T(sgx);
        a[jj] = double(T(s / m)), bx[jj] = double(T(sgx / m)), scale[jj] = double(w ? T(rs * double(w[j])) : rstd[j]);
    }
    if (!gx) return;
    for (int64_t o = 0; o < r.outer; ++o) {
        const int64_t at = (o * c + first) * r.inner;
        const T *xr = x + at, *gr = gy + at, *yr = y ? y + at : nullptr;
        T* gxr = gx + at;
        for (int64_t jj = 0; jj < k; ++jj) {
            const T mt = mean[first + jj], rt = rstd[first + jj];
            for (int64_t i = 0; i < r.inner; ++i) {
                const int64_t e = jj * r.inner + i;
                gxr[e] = (masked(yr, gr, e) - T(a[jj]) - (xr[e] - mt) * rt * T(bx[jj])) * T(scale[jj]);
            }
        }
    }
}

// Channels share the threads; each channel's work stays on one thread.
int64_t team(int64_t outer, int64_t c, int64_t inner) { return team_for(double(outer) * double(c * inner) * 3); }
bool by_channel(int64_t inner) { return inner >= 16; }

void require_f32_or_f64(DType t, const char* op) {
    if (t != DType::f32 && t != DType::f64)
        throw DTypeError(std::string(op) + ": the CPU kernel takes f32 and f64, got " + name(t));
}

template <class T> void run_forward(int64_t outer, int64_t c, int64_t inner, const void* x, const void* w,
                                    const void* b, double eps, bool relu, void* y, void* mean, void* var, void* rstd) {
    const Rows r{outer, inner};
    parallel_for(c, team(outer, c, inner), [&](int64_t first, int64_t last) {
        auto* f = by_channel(inner) ? forward_by_channel<T> : forward_by_row<T>;
        f(r, c, first, last, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b), eps, relu,
          static_cast<T*>(y), static_cast<T*>(mean), static_cast<T*>(var), static_cast<T*>(rstd));
    });
}

template <class T> void run_backward(int64_t outer, int64_t c, int64_t inner, const void* x, const void* y,
                                     const void* gy, const void* mean, const void* rstd, const void* w, void* gx,
                                     void* gw, void* gb) {
    const Rows r{outer, inner};
    parallel_for(c, team(outer, c, inner), [&](int64_t first, int64_t last) {
        auto* f = by_channel(inner) ? backward_by_channel<T> : backward_by_row<T>;
        f(r, c, first, last, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(gy),
          static_cast<const T*>(mean), static_cast<const T*>(rstd), static_cast<const T*>(w), static_cast<T*>(gx),
          static_cast<T*>(gw), static_cast<T*>(gb));
    });
}

}  // namespace

void batch_norm(int, DType t, int64_t outer, int64_t c, int64_t inner, const void* x, const void* weight,
                const void* bias, double epsilon, bool relu, void* y, void* mean, void* var, void* rstd) {
    require_f32_or_f64(t, "batch_norm");
    if (outer * c * inner == 0) return;
    if (t == DType::f32) run_forward<float>(outer, c, inner, x, weight, bias, epsilon, relu, y, mean, var, rstd);
    else run_forward<double>(outer, c, inner, x, weight, bias, epsilon, relu, y, mean, var, rstd);
}

void batch_norm_backward(int, DType t, int64_t outer, int64_t c, int64_t inner, const void* x, const void* y,
                         const void* gy, const void* mean, const void* rstd, const void* weight, void* gx,
                         void* gweight, void* gbias) {
    require_f32_or_f64(t, "batch_norm_backward");
    if (outer * c * inner == 0) return;
    if (t == DType::f32) run_backward<float>(outer, c, inner, x, y, gy, mean, rstd, weight, gx, gweight, gbias);
    else run_backward<double>(outer, c, inner, x, y, gy, mean, rstd, weight, gx, gweight, gbias);
}

}  // namespace fluxion::backend::cpu
