// 2-d max and mean pooling over NCHW planes with zero padding. Max ignores padded cells (a NaN
// wins, the first maximum takes the gradient); mean counts them as zeros, as PyTorch's
// count_include_pad=True does: the divisor is the window clipped to the padded input.
#include <algorithm>
#include <limits>
#include <string>

#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"

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

// One output's window: its unclipped start and its cells inside the input.
struct Window {
    int64_t y0, x0;        // top-left corner in input coordinates (may be negative)
    int64_t y1, y2, x1, x2;  // the cells [y1, y2) x [x1, x2) inside the input
};

Window window(const Pool2dShape& s, int64_t oy, int64_t ox) {
    Window win;
    win.y0 = oy * s.stride_h - s.pad_h;
    win.x0 = ox * s.stride_w - s.pad_w;
    win.y1 = std::max<int64_t>(win.y0, 0);
    win.x1 = std::max<int64_t>(win.x0, 0);
    win.y2 = std::min(win.y0 + s.kh, s.h);
    win.x2 = std::min(win.x0 + s.kw, s.w);
    return win;
}

// Padded cells count; cells past the padding (a window overhanging the end) do not.
int64_t mean_divisor(const Pool2dShape& s, const Window& win) {
    const int64_t height = std::min(win.y0 + s.kh, s.h + s.pad_h) - win.y0;
    const int64_t width = std::min(win.x0 + s.kw, s.w + s.pad_w) - win.x0;
    return std::max<int64_t>(height * width, 1);
}

// The window's maximum: a NaN wins; -infinity for a window without cells.
template <class T>
T window_max(const Pool2dShape& s, const Window& win, const T* plane) {
    T best = -std::numeric_limits<T>::infinity();
    for (int64_t y = win.y1; y < win.y2; ++y)
        for (int64_t x = win.x1; x < win.x2; ++x) {
            const T v = plane[y * s.w + x];
            best = (v > best || v != v) ? v : best;
        }
    return best;
}

// The flat index in the plane of the window's first cell holding its maximum `best` (the first NaN
// when that is NaN), or -1 for a window without cells.
template <class T>
int64_t first_maximum(const Pool2dShape& s, const Window& win, const T* plane, T best) {
    for (int64_t y = win.y1; y < win.y2; ++y)
        for (int64_t x = win.x1; x < win.x2; ++x) {
            const T v = plane[y * s.w + x];
            if (v == best || (v != v && best != best)) return y * s.w + x;
        }
    return -1;
}

template <class T>
void forward(Pool op, const Pool2dShape& s, const T* x, T* y) {
    const int64_t planes = s.n * s.c, hw = s.h * s.w, ohw = s.oh * s.ow;
    parallel_for(planes, planes * ohw * s.kh * s.kw > kParallelMin, [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p) {
            const T* in = x + p * hw;
            T* out = y + p * ohw;
            for (int64_t oy = 0; oy < s.oh; ++oy) {
                for (int64_t ox = 0; ox < s.ow; ++ox) {
                    const Window win = window(s, oy, ox);
                    if (op == Pool::max) {
                        out[oy * s.ow + ox] = window_max(s, win, in);
                        continue;
                    }
                    T sum = 0;
                    for (int64_t yy = win.y1; yy < win.y2; ++yy)
                        for (int64_t xx = win.x1; xx < win.x2; ++xx) sum += in[yy * s.w + xx];
                    out[oy * s.ow + ox] = sum / T(mean_divisor(s, win));
                }
            }
        }
    });
}

// Each thread owns whole planes of gx, so overlapping windows need no synchronisation. The max
// gradient goes to the first cell equal to the forward output y, the cell the forward picked.
template <class T>
void backward(Pool op, const Pool2dShape& s, const T* x, const T* y, const T* gy, T* gx) {
    const int64_t planes = s.n * s.c, hw = s.h * s.w, ohw = s.oh * s.ow;
    parallel_for(planes, planes * ohw * s.kh * s.kw > kParallelMin, [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p) {
            const T* in = x + p * hw;
            const T* maxima = y + p * ohw;
            const T* g = gy + p * ohw;
            T* out = gx + p * hw;
            std::fill(out, out + hw, T(0));
            for (int64_t oy = 0; oy < s.oh; ++oy) {
                for (int64_t ox = 0; ox < s.ow; ++ox) {
                    const Window win = window(s, oy, ox);
                    const T grad = g[oy * s.ow + ox];
                    if (op == Pool::max) {
                        const int64_t at = first_maximum(s, win, in, maxima[oy * s.ow + ox]);
                        if (at >= 0) out[at] += grad;
                        continue;
                    }
                    const T share = grad / T(mean_divisor(s, win));
                    for (int64_t yy = win.y1; yy < win.y2; ++yy)
                        for (int64_t xx = win.x1; xx < win.x2; ++xx) out[yy * s.w + xx] += share;
                }
            }
        }
    });
}

void check_op(const char* kernel, Pool op) {
    if (op != Pool::max && op != Pool::mean)
        throw ValueError(std::string(kernel) + ": unknown pooling op code " + std::to_string(int(op)));
}

}  // namespace

void pool2d(int device, Pool op, DType t, const Pool2dShape* s, const void* x, void* y) {
    check("pool2d", *s);
    check_op("pool2d", op);
    dispatch_float(t, "pool2d", [&](auto tag) {
        using T = decltype(tag);
        forward(op, *s, static_cast<const T*>(x), static_cast<T*>(y));
    });
}

void pool2d_backward(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                     const void* gy, void* gx) {
    check("pool2d_backward", *s);
    check_op("pool2d_backward", op);
    dispatch_float(t, "pool2d_backward", [&](auto tag) {
        using T = decltype(tag);
        backward(op, *s, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(gy),
                 static_cast<T*>(gx));
    });
}

}  // namespace fluxion::backend::cpu
