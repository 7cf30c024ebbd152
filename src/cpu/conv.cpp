// 2-d convolution (NCHW input, KCRS weight). f32 goes to the direct kernels for few channels
// (conv_direct.cpp), then to oneDNN where it is built in (conv_onednn.cpp); everything they
// decline, and f64, is computed here as GEMMs over im2col matrices. A chunk of images is
// unrolled into one column matrix {c r s, images * oh * ow}, so each group needs a single large
// GEMM per chunk; chunks bound the workspace. Backward-input is the transposed GEMM followed by
// col2im, backward-weight the GEMM of the output gradient with the columns, summed over chunks.
#include <algorithm>
#include <cstring>
#include <string>

#include "cpu/conv_direct.hpp"
#include "cpu/conv_onednn.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {
namespace {

// Elements of workspace one chunk may use (columns plus the reordered output).
inline constexpr int64_t kWorkspaceElements = int64_t(1) << 21;

struct Dims {
    int64_t kg, crs, rows, ohw;  // filters per group, column rows per group and in all, output pixels
};

Dims dims_of(const Conv2dShape& s) {
    const int64_t crs = s.c / s.groups * s.r * s.s;
    return {s.k / s.groups, crs, crs * s.groups, s.oh * s.ow};
}

void check(const char* kernel, const Conv2dShape& s) {
    const bool sizes = s.n >= 0 && s.c >= 0 && s.h >= 0 && s.w >= 0 && s.k >= 0 && s.r >= 1 && s.s >= 1 &&
                       s.oh >= 0 && s.ow >= 0 && s.pad_h >= 0 && s.pad_w >= 0;
    const bool steps = s.stride_h >= 1 && s.stride_w >= 1 && s.dil_h >= 1 && s.dil_w >= 1;
    if (!sizes || !steps || s.groups < 1 || s.c % s.groups != 0 || s.k % s.groups != 0)
        throw ShapeError(std::string(kernel) + ": invalid shape: input {" + std::to_string(s.n) + ", " +
                         std::to_string(s.c) + ", " + std::to_string(s.h) + ", " + std::to_string(s.w) +
                         "}, weight {" + std::to_string(s.k) + ", c/groups, " + std::to_string(s.r) + ", " +
                         std::to_string(s.s) + "}, groups " + std::to_string(s.groups) +
                         "; channels and filters must divide by groups, strides and dilations must be positive");
}

// col[(ci r + kr) s + ks][b ohw + oy ow + ox] = x[b0 + b, ci, oy sh - ph + kr dh, ox sw - pw + ks dw], 0 outside.
template <class T>
void im2col(const Conv2dShape& s, const T* x, int64_t b0, int64_t nb, T* col) {
    const int64_t ohw = s.oh * s.ow, cols = nb * ohw, rows = s.c * s.r * s.s;
    parallel_for(rows * nb, team_for(rows * cols), [&](int64_t first, int64_t last) {
        for (int64_t task = first; task < last; ++task) {
            const int64_t row = task / nb, b = task % nb;
            const int64_t ci = row / (s.r * s.s), kr = row / s.s % s.r, ks = row % s.s;
            const T* plane = x + ((b0 + b) * s.c + ci) * s.h * s.w;
            T* out = col + row * cols + b * ohw;
            const int64_t offset_w = ks * s.dil_w - s.pad_w;
            const Span span = inside(offset_w, s.stride_w, s.w, s.ow);
            for (int64_t oy = 0; oy < s.oh; ++oy, out += s.ow) {
                const int64_t iy = oy * s.stride_h - s.pad_h + kr * s.dil_h;
                if (iy < 0 || iy >= s.h) {
                    std::fill(out, out + s.ow, T(0));
                    continue;
                }
                // `in` is the first pixel read, so that it never points outside the plane.
                const T* in = plane + iy * s.w + offset_w + span.begin * s.stride_w;
                T* valid = out + span.begin;
                const int64_t count = span.end - span.begin;
                std::fill(out, valid, T(0));
                if (s.stride_w == 1)
                    for (int64_t i = 0; i < count; ++i) valid[i] = in[i];
                else
                    for (int64_t i = 0; i < count; ++i) valid[i] = in[i * s.stride_w];
                std::fill(valid + count, out + s.ow, T(0));
            }
        }
    });
}

// The adjoint of im2col: every column entry is added back to the input pixel it was read from.
// Each task owns one input plane, so no two threads write the same pixel.
template <class T>
void col2im(const Conv2dShape& s, const T* col, int64_t b0, int64_t nb, T* gx) {
    const int64_t ohw = s.oh * s.ow, cols = nb * ohw;
    parallel_for(nb * s.c, team_for(s.c * s.r * s.s * cols), [&](int64_t first, int64_t last) {
        for (int64_t task = first; task < last; ++task) {
            const int64_t b = task / s.c, ci = task % s.c;
            T* plane = gx + ((b0 + b) * s.c + ci) * s.h * s.w;
            std::fill(plane, plane + s.h * s.w, T(0));
            for (int64_t kr = 0; kr < s.r; ++kr) {
                for (int64_t ks = 0; ks < s.s; ++ks) {
                    const T* in = col + ((ci * s.r + kr) * s.s + ks) * cols + b * ohw;
                    const int64_t offset_w = ks * s.dil_w - s.pad_w;
                    const Span span = inside(offset_w, s.stride_w, s.w, s.ow);
                    for (int64_t oy = 0; oy < s.oh; ++oy, in += s.ow) {
                        const int64_t iy = oy * s.stride_h - s.pad_h + kr * s.dil_h;
                        if (iy < 0 || iy >= s.h) continue;
                        T* out = plane + iy * s.w + offset_w + span.begin * s.stride_w;
                        for (int64_t i = 0; i < span.end - span.begin; ++i) out[i * s.stride_w] += in[span.begin + i];
                    }
                }
            }
        }
    });
}

// dst {b, a, inner} = src {a, b, inner}: between the batch-major layout of tensors and the
// channel-major layout of the GEMM operands.
template <class T>
void swap_leading_axes(const T* src, int64_t a, int64_t b, int64_t inner, T* dst) {
    parallel_for(a * b, team_for(a * b * inner), [&](int64_t first, int64_t last) {
        for (int64_t task = first; task < last; ++task) {
            const int64_t i = task / b, j = task % b;
            std::memcpy(dst + (j * a + i) * inner, src + task * inner, std::size_t(inner) * sizeof(T));
        }
    });
}

int64_t images_per_chunk(const Conv2dShape& s) {
    const Dims d = dims_of(s);
    return std::clamp<int64_t>(kWorkspaceElements / std::max<int64_t>(1, (d.rows + s.k) * d.ohw), 1,
                               std::max<int64_t>(s.n, 1));
}

// Images per chunk, and the workspace: columns for them, then room for a reordered output.
template <class T>
struct Chunking {
    const int64_t images, col_size, reordered_size;
    const Scratch memory;
    T* const col;
    T* const reordered;

    explicit Chunking(const Conv2dShape& s)
        : images(images_per_chunk(s)),
          col_size(dims_of(s).rows * images * dims_of(s).ohw),
          reordered_size(images > 1 ? s.k * images * dims_of(s).ohw : 0),
          memory(std::size_t(col_size + reordered_size) * sizeof(T)),
          col(memory.as<T>()),
          reordered(col + col_size) {}
};

template <class T>
void forward(const Conv2dShape& s, const T* x, const T* w, T* y) {
    const Dims d = dims_of(s);
    const Chunking<T> chunk(s);
    for (int64_t b0 = 0; b0 < s.n; b0 += chunk.images) {
        const int64_t nb = std::min(chunk.images, s.n - b0), cols = nb * d.ohw;
        im2col(s, x, b0, nb, chunk.col);
        T* out = nb == 1 ? y + b0 * s.k * d.ohw : chunk.reordered;  // one image is already batch-major
        for (int64_t g = 0; g < s.groups; ++g)
            blas_gemm<T>(false, false, d.kg, cols, d.crs, T(1), w + g * d.kg * d.crs, d.crs,
                         chunk.col + g * d.crs * cols, cols, T(0), out + g * d.kg * cols, cols);
        if (nb > 1) swap_leading_axes(chunk.reordered, s.k, nb, d.ohw, y + b0 * s.k * d.ohw);
    }
}

// The chunk's output gradient in channel-major layout {k, nb, oh ow}.
template <class T>
const T* channel_major(const Conv2dShape& s, const T* gy, int64_t b0, int64_t nb, T* reordered) {
    const int64_t ohw = s.oh * s.ow;
    if (nb == 1) return gy + b0 * s.k * ohw;
    swap_leading_axes(gy + b0 * s.k * ohw, nb, s.k, ohw, reordered);
    return reordered;
}

template <class T>
void backward_input(const Conv2dShape& s, const T* gy, const T* w, T* gx) {
    const Dims d = dims_of(s);
    const Chunking<T> chunk(s);
    for (int64_t b0 = 0; b0 < s.n; b0 += chunk.images) {
        const int64_t nb = std::min(chunk.images, s.n - b0), cols = nb * d.ohw;
        const T* g = channel_major(s, gy, b0, nb, chunk.reordered);
        for (int64_t gi = 0; gi < s.groups; ++gi)
            blas_gemm<T>(true, false, d.crs, cols, d.kg, T(1), w + gi * d.kg * d.crs, d.crs, g + gi * d.kg * cols, cols,
                         T(0), chunk.col + gi * d.crs * cols, cols);
        col2im(s, chunk.col, b0, nb, gx);
    }
}

template <class T>
void backward_weight(const Conv2dShape& s, const T* x, const T* gy, T* gw) {
    const Dims d = dims_of(s);
    if (s.n == 0 || d.ohw == 0) {
        std::fill(gw, gw + s.k * d.crs, T(0));
        return;
    }
    const Chunking<T> chunk(s);
    for (int64_t b0 = 0; b0 < s.n; b0 += chunk.images) {
        const int64_t nb = std::min(chunk.images, s.n - b0), cols = nb * d.ohw;
        im2col(s, x, b0, nb, chunk.col);
        const T* g = channel_major(s, gy, b0, nb, chunk.reordered);
        const T beta = b0 == 0 ? T(0) : T(1);  // chunks after the first add to the sum
        for (int64_t gi = 0; gi < s.groups; ++gi)
            blas_gemm<T>(false, true, d.kg, d.crs, cols, T(1), g + gi * d.kg * cols, cols,
                         chunk.col + gi * d.crs * cols, cols, beta, gw + gi * d.kg * d.crs, d.crs);
    }
}

// An f32 pass in the direct kernels or oneDNN's (onednn_conv2d's arguments); false where both
// decline it.
bool f32_kernels(DType t, ConvPass pass, const Conv2dShape& s, const void* a, const void* b, void* out) {
    if (t != DType::f32) return false;
    const auto fa = static_cast<const float*>(a), fb = static_cast<const float*>(b);
    const auto fo = static_cast<float*>(out);
    return direct_conv2d(pass, s, fa, fb, fo) || onednn_conv2d(pass, s, fa, fb, fo);
}

}  // namespace

void conv2d(int device, DType t, const Conv2dShape* s, const void* x, const void* w, void* y) {
    check("conv2d", *s);
    if (f32_kernels(t, ConvPass::forward, *s, x, w, y)) return;
    dispatch_float(t, "conv2d", [&](auto tag) {
        using T = decltype(tag);
        forward(*s, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y));
    });
}

void conv2d_backward_input(int device, DType t, const Conv2dShape* s, const void* gy, const void* w, void* gx) {
    check("conv2d_backward_input", *s);
    if (f32_kernels(t, ConvPass::backward_input, *s, gy, w, gx)) return;
    dispatch_float(t, "conv2d_backward_input", [&](auto tag) {
        using T = decltype(tag);
        backward_input(*s, static_cast<const T*>(gy), static_cast<const T*>(w), static_cast<T*>(gx));
    });
}

void conv2d_backward_weight(int device, DType t, const Conv2dShape* s, const void* x, const void* gy, void* gw) {
    check("conv2d_backward_weight", *s);
    if (f32_kernels(t, ConvPass::backward_weight, *s, x, gy, gw)) return;
    dispatch_float(t, "conv2d_backward_weight", [&](auto tag) {
        using T = decltype(tag);
        backward_weight(*s, static_cast<const T*>(x), static_cast<const T*>(gy), static_cast<T*>(gw));
    });
}

}  // namespace fluxion::backend::cpu
