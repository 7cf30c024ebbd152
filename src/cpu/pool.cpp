// 2-d max and mean pooling over NCHW planes with zero padding. Max ignores padded cells (a NaN
// wins, the first maximum takes the gradient); mean counts them as zeros, as PyTorch's
// count_include_pad=True does: the divisor is the window clipped to the padded input.
#include <algorithm>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"
#include "cpu/pool_max2x2.hpp"

namespace fluxion::backend::cpu {
namespace {

void check(const char* kernel, const Pool2dShape& s) {
    const bool sizes = s.n >= 0 && s.c >= 0 && s.h >= 0 && s.w >= 0 && s.oh >= 0 && s.ow >= 0 && s.kh >= 1 &&
                       s.kw >= 1 && s.pad_h >= 0 && s.pad_w >= 0;
    if (!sizes || s.stride_h < 1 || s.stride_w < 1)
        throw ShapeError(std::string(kernel) + ": invalid shape: window " + std::to_string(s.kh) + "x" +
                         std::to_string(s.kw) + ", stride " + std::to_string(s.stride_h) + "x" +
                         std::to_string(s.stride_w) + ", padding " + std::to_string(s.pad_h) + "x" +
                         std::to_string(s.pad_w) + "; windows and strides must be positive, padding non-negative");
}

// One output row's window rows, or one output column's window columns: the unclipped start and
// the cells [first, last) inside the input.
struct Range {
    int64_t start, first, last;
};
Range range(int64_t o, int64_t stride, int64_t pad, int64_t window, int64_t size) {
    const int64_t start = o * stride - pad;
    return {start, std::max<int64_t>(start, 0), std::min(start + window, size)};
}

// Padded cells count; cells past the padding (a window overhanging the end) do not.
int64_t covered(const Range& r, int64_t window, int64_t size, int64_t pad) {
    return std::min(r.start + window, size + pad) - r.start;
}

// A mean's divisor: the cells of the window inside the padded input, at least 1.
int64_t divisor(int64_t height, int64_t width) { return std::max<int64_t>(height * width, 1); }

// A row of n cells owned by the calling thread, kept from call to call: once a shape has been
// seen, pooling allocates nothing (compiled steps replay without allocating). Slot tells apart
// the rows one call uses at once.
template <class T, int Slot>
T* thread_row(int64_t n) {
    thread_local std::vector<T> row;
    if (row.size() < std::size_t(std::max<int64_t>(n, 1))) row.resize(std::size_t(std::max<int64_t>(n, 1)));
    return row.data();
}

// The padded width of each output column's window.
const int64_t* window_widths(const Pool2dShape& s) {
    int64_t* widths = thread_row<int64_t, 0>(s.ow);
    for (int64_t ox = 0; ox < s.ow; ++ox) widths[ox] = covered(range(ox, s.stride_w, s.pad_w, s.kw, s.w), s.kw, s.w, s.pad_w);
    return widths;
}

// The larger of a and b where a NaN wins, without a branch (random data would mispredict half the
// time): the selects vectorise.
template <class T>
inline T nan_max(T a, T b) {
    return (b > a) | (b != b) ? b : a;
}

// Pooling works a row of outputs at a time: the kh input rows of the window are first reduced to
// one row (max or sum), then window column j of every output is folded in, for j < kw. Both loops
// run over contiguous or evenly strided cells without clipping tests.
template <class T>
void forward(Pool op, const Pool2dShape& s, const T* x, T* y) {
    const int64_t planes = s.n * s.c, hw = s.h * s.w, ohw = s.oh * s.ow;
    const T empty = op == Pool::max ? -std::numeric_limits<T>::infinity() : T(0);
    parallel_for(planes, team_for(planes * ohw * s.kh * s.kw), [&](int64_t first, int64_t last) {
        const int64_t* widths = window_widths(s);
        T* r = thread_row<T, 1>(s.w);
        const int64_t sw = s.stride_w;
        for (int64_t p = first; p < last; ++p) {
            const T* in = x + p * hw;
            T* out = y + p * ohw;
            for (int64_t oy = 0; oy < s.oh; ++oy, out += s.ow) {
                const Range ry = range(oy, s.stride_h, s.pad_h, s.kh, s.h);
                std::fill(r, r + s.w, empty);
                for (int64_t iy = ry.first; iy < ry.last; ++iy) {
                    const T* row = in + iy * s.w;
                    if (op == Pool::max)
                        for (int64_t ix = 0; ix < s.w; ++ix) r[ix] = nan_max(r[ix], row[ix]);
                    else
                        for (int64_t ix = 0; ix < s.w; ++ix) r[ix] += row[ix];
                }
                std::fill(out, out + s.ow, empty);
                for (int64_t j = 0; j < s.kw; ++j) {
                    const Span span = inside(j - s.pad_w, sw, s.w, s.ow);
                    const T* col = r + j - s.pad_w;
                    if (op == Pool::max)
                        for (int64_t ox = span.begin; ox < span.end; ++ox) out[ox] = nan_max(out[ox], col[ox * sw]);
                    else
                        for (int64_t ox = span.begin; ox < span.end; ++ox) out[ox] += col[ox * sw];
                }
                if (op == Pool::mean) {
                    const int64_t height = covered(ry, s.kh, s.h, s.pad_h);
                    for (int64_t ox = 0; ox < s.ow; ++ox) out[ox] /= T(divisor(height, widths[ox]));
                }
            }
        }
    });
}

// Each thread owns whole planes of gx, so overlapping windows need no synchronisation. The max
// gradient goes to the window's first cell (row by row) equal to the forward output y, the cell the
// forward picked (the first NaN when y is NaN). As in the forward pass, a row of outputs is done
// at once, window cell by window cell, without branches. GCC vectorises the strided loops only for
// a stride known at compile time: SW is the horizontal stride when it is 1 or 2 (the common ones),
// 0 for any other (then read from the shape). (The forward pass was slower that way: its strided
// loads became gathers.)
template <class T, int64_t SW>
void backward(Pool op, const Pool2dShape& s, const T* x, const T* y, const T* gy, T* gx) {
    const int64_t planes = s.n * s.c, hw = s.h * s.w, ohw = s.oh * s.ow, sw = SW ? SW : s.stride_w;
    parallel_for(planes, team_for(planes * ohw * s.kh * s.kw), [&](int64_t first, int64_t last) {
        const int64_t* widths = window_widths(s);
        T* share = thread_row<T, 2>(s.ow);
        int64_t* at = thread_row<int64_t, 3>(s.ow);  // per output: the cell that takes the max gradient, or -1
        for (int64_t p = first; p < last; ++p) {
            const T* in = x + p * hw;
            T* out = gx + p * hw;
            std::fill(out, out + hw, T(0));
            for (int64_t oy = 0; oy < s.oh; ++oy) {
                const Range ry = range(oy, s.stride_h, s.pad_h, s.kh, s.h);
                const T* g = gy + p * ohw + oy * s.ow;
                const T* m = y + p * ohw + oy * s.ow;
                if (op == Pool::mean) {
                    const int64_t height = covered(ry, s.kh, s.h, s.pad_h);
                    for (int64_t ox = 0; ox < s.ow; ++ox) share[ox] = g[ox] / T(divisor(height, widths[ox]));
                } else {
                    std::fill(at, at + s.ow, int64_t(-1));
                }
                for (int64_t iy = ry.first; iy < ry.last; ++iy) {
                    for (int64_t j = 0; j < s.kw; ++j) {
                        const Span span = inside(j - s.pad_w, sw, s.w, s.ow);
                        const int64_t cell = iy * s.w + j - s.pad_w;
                        if (op == Pool::mean) {
                            for (int64_t ox = span.begin; ox < span.end; ++ox) out[cell + ox * sw] += share[ox];
                            continue;
                        }
                        // A select by bit masks: as a conditional, GCC compiled it to a branch
                        // that random data mispredicts half the time.
                        for (int64_t ox = span.begin; ox < span.end; ++ox) {
                            const T v = in[cell + ox * sw], best = m[ox];
                            const bool match = (v == best) | ((v != v) & (best != best));
                            const int64_t take = -int64_t(int64_t(at[ox] < 0) & int64_t(match));
                            at[ox] = (at[ox] & ~take) | ((cell + ox * sw) & take);
                        }
                    }
                }
                if (op == Pool::max)
                    for (int64_t ox = 0; ox < s.ow; ++ox)
                        if (at[ox] >= 0) out[at[ox]] += g[ox];
            }
        }
    });
}

// Windows that tile the input's columns: no padding, the stride the window's size, and the width
// exactly ow windows (rows below the last window are allowed). Each input cell then lies in at most
// one window, and the passes below run as long loops over a chunk of planes (no per-row set-up, no
// clipping, no scatter; KH and KW known at compile time), which GCC vectorises: a pass over each
// group of KH rows (contiguous), and a pass over all outputs of the chunk at once, whose window
// columns are KW consecutive cells of the row-reduced buffer. They compute what forward and
// backward compute, bit for bit: the same order of comparisons and sums (the window's rows reduced
// first, then its columns), the first cell in row-major order taking a max's gradient, and the same
// zero added first.
bool tiles(const Pool2dShape& s, int64_t kh, int64_t kw) {
    return s.kh == kh && s.kw == kw && s.stride_h == kh && s.stride_w == kw && s.pad_h == 0 && s.pad_w == 0 &&
           s.oh * kh <= s.h && s.ow * kw == s.w;
}

// Planes per chunk: its buffers (oh·w cells a plane, about 2048 in all) stay in the L1 cache.
int64_t chunk_planes(const Pool2dShape& s) { return std::max<int64_t>(1, 2048 / std::max<int64_t>(1, s.oh * s.w)); }

// Whether a cell takes the gradient of a max whose value is `best`: equal to it, or both NaN.
template <class T>
inline bool matches(T v, T best) {
    return v == best || (v != v && best != best);
}

template <class T, Pool OP, int KH, int KW>
void tiled_forward(const Pool2dShape& s, const T* x, T* y) {
    const int64_t planes = s.n * s.c, hw = s.h * s.w, ohw = s.oh * s.ow, w = s.w, oh = s.oh;
    const T empty = OP == Pool::max ? -std::numeric_limits<T>::infinity() : T(0);
    const int64_t per = chunk_planes(s);
    parallel_for(planes, team_for(planes * ohw * KH * KW), [&](int64_t first, int64_t last) {
        T* rows = thread_row<T, 4>(per * oh * w);  // per window row: its KH input rows reduced
        for (int64_t p0 = first; p0 < last; p0 += per) {
            const int64_t count = std::min(per, last - p0);
            for (int64_t q = 0; q < count; ++q)
                for (int64_t oy = 0; oy < oh; ++oy) {
                    const T* in = x + (p0 + q) * hw + oy * KH * w;
                    T* r = rows + (q * oh + oy) * w;
                    for (int64_t ix = 0; ix < w; ++ix) {
                        T v = empty;
                        for (int dy = 0; dy < KH; ++dy)
                            v = OP == Pool::max ? nan_max(v, in[dy * w + ix]) : v + in[dy * w + ix];
                        r[ix] = v;
                    }
                }
            T* out = y + p0 * ohw;
            const int64_t outputs = count * ohw;
            for (int64_t o = 0; o < outputs; ++o) {
                T v = empty;
                for (int dx = 0; dx < KW; ++dx)
                    v = OP == Pool::max ? nan_max(v, rows[o * KW + dx]) : v + rows[o * KW + dx];
                out[o] = OP == Pool::max ? v : v / T(KH * KW);
            }
        }
    });
}

// The max's gradient in three passes over a chunk: each cell's window maximum spread to its column
// (`spread`), then per column the first of its KH rows that matches (`row`, KH for none), then per
// window the first matching cell in row-major order (the least dy·KW + dx), spread back to the
// columns as the code each row's cell must have to take the gradient, beside the gradient itself.
template <class T, Pool OP, int KH, int KW>
void tiled_backward(const Pool2dShape& s, const T* x, const T* y, const T* gy, T* gx) {
    const int64_t planes = s.n * s.c, hw = s.h * s.w, ohw = s.oh * s.ow, w = s.w, oh = s.oh;
    const int64_t covered = oh * KH * w;  // cells of a plane inside a window; those after get 0
    const int64_t per = chunk_planes(s);
    parallel_for(planes, team_for(planes * ohw * KH * KW), [&](int64_t first, int64_t last) {
        T* share = thread_row<T, 5>(per * oh * w);  // per cell of a window row: its window's gradient
        T* code = thread_row<T, 6>(per * oh * w);   // per cell of a window row: `row`, then the code
        T* spread = thread_row<T, 7>(per * oh * w);
        for (int64_t p0 = first; p0 < last; p0 += per) {
            const int64_t count = std::min(per, last - p0), outputs = count * ohw;
            const T* g = gy + p0 * ohw;
            if constexpr (OP == Pool::max) {
                const T* m = y + p0 * ohw;
                for (int64_t o = 0; o < outputs; ++o)
                    for (int dx = 0; dx < KW; ++dx) spread[o * KW + dx] = m[o];
                for (int64_t q = 0; q < count; ++q)
                    for (int64_t oy = 0; oy < oh; ++oy) {
                        const T* in = x + (p0 + q) * hw + oy * KH * w;
                        T* c = code + (q * oh + oy) * w;
                        const T* b = spread + (q * oh + oy) * w;
                        for (int64_t ix = 0; ix < w; ++ix) {
                            T row = T(KH);
                            for (int dy = KH - 1; dy >= 0; --dy) row = matches(in[dy * w + ix], b[ix]) ? T(dy) : row;
                            c[ix] = row;
                        }
                    }
                for (int64_t o = 0; o < outputs; ++o) {
                    T best = T(KH * KW);
                    for (int dx = 0; dx < KW; ++dx) best = std::min(best, code[o * KW + dx] * T(KW) + T(dx));
                    for (int dx = 0; dx < KW; ++dx) {
                        code[o * KW + dx] = best - T(dx);
                        share[o * KW + dx] = T(0) + g[o];
                    }
                }
            } else {
                for (int64_t o = 0; o < outputs; ++o)
                    for (int dx = 0; dx < KW; ++dx) share[o * KW + dx] = T(0) + g[o] / T(KH * KW);
            }
            for (int64_t q = 0; q < count; ++q) {
                T* plane = gx + (p0 + q) * hw;
                for (int64_t oy = 0; oy < oh; ++oy) {
                    const T* sh = share + (q * oh + oy) * w;
                    const T* c = code + (q * oh + oy) * w;
                    for (int dy = 0; dy < KH; ++dy) {
                        T* out = plane + (oy * KH + dy) * w;
                        if constexpr (OP == Pool::max)
                            for (int64_t ix = 0; ix < w; ++ix) out[ix] = c[ix] == T(dy * KW) ? sh[ix] : T(0);
                        else
                            for (int64_t ix = 0; ix < w; ++ix) out[ix] = sh[ix];
                    }
                }
                std::fill(plane + covered, plane + hw, T(0));
            }
        }
    });
}

// Runs f with the window size of a tiling (2×2 or 3×3) as compile-time KH and KW; false for others.
template <class F>
bool with_tiling(const Pool2dShape& s, F&& f) {
    if (tiles(s, 2, 2)) return f(std::integral_constant<int, 2>{}), true;
    if (tiles(s, 3, 3)) return f(std::integral_constant<int, 3>{}), true;
    return false;
}

// Calls f with the compile-time stride SW that backward takes for this stride.
template <class F>
void with_stride(int64_t stride, F&& f) {
    if (stride == 1) f(std::integral_constant<int64_t, 1>{});
    else if (stride == 2) f(std::integral_constant<int64_t, 2>{});
    else f(std::integral_constant<int64_t, 0>{});
}

void check_op(const char* kernel, Pool op) {
    if (op != Pool::max && op != Pool::mean)
        throw ValueError(std::string(kernel) + ": unknown pooling op code " + std::to_string(int(op)));
}

}  // namespace

void pool2d(int device, Pool op, DType t, const Pool2dShape* s, const void* x, void* y) {
    check("pool2d", *s);
    check_op("pool2d", op);
    if (t == DType::f32 && op == Pool::max &&
        max_pool_2x2_forward(*s, static_cast<const float*>(x), static_cast<float*>(y)))
        return;
    dispatch_float(t, "pool2d", [&](auto tag) {
        using T = decltype(tag);
        const auto* xs = static_cast<const T*>(x);
        auto* ys = static_cast<T*>(y);
        const bool tiled = with_tiling(*s, [&](auto k) {
            if (op == Pool::max) tiled_forward<T, Pool::max, k.value, k.value>(*s, xs, ys);
            else tiled_forward<T, Pool::mean, k.value, k.value>(*s, xs, ys);
        });
        if (!tiled) forward<T>(op, *s, xs, ys);
    });
}

void pool2d_backward(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                     const void* gy, void* gx) {
    check("pool2d_backward", *s);
    check_op("pool2d_backward", op);
    if (t == DType::f32 && op == Pool::max &&
        max_pool_2x2_backward(*s, static_cast<const float*>(x), static_cast<const float*>(y),
                              static_cast<const float*>(gy), static_cast<float*>(gx)))
        return;
    dispatch_float(t, "pool2d_backward", [&](auto tag) {
        using T = decltype(tag);
        const auto *xs = static_cast<const T*>(x), *ys = static_cast<const T*>(y), *gys = static_cast<const T*>(gy);
        auto* gxs = static_cast<T*>(gx);
        const bool tiled = with_tiling(*s, [&](auto k) {
            if (op == Pool::max) tiled_backward<T, Pool::max, k.value, k.value>(*s, xs, ys, gys, gxs);
            else tiled_backward<T, Pool::mean, k.value, k.value>(*s, xs, ys, gys, gxs);
        });
        if (!tiled) with_stride(s->stride_w, [&](auto sw) { backward<T, sw.value>(op, *s, xs, ys, gys, gxs); });
    });
}

}  // namespace fluxion::backend::cpu
