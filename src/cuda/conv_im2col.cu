// conv_im2col.cu — convolutions without cuDNN: the input patches of a chunk of images are unrolled
// into a column matrix {C*R*S, OH*OW} per image (im2col) and multiplied with the weight through
// cuBLAS; the input gradient folds columns back with a gather (col2im: no atomics, deterministic).
// For f16 and bf16 the forward columns hold the input's 16-bit values, while the gradients' products
// and sums stay in f32 (gemm_into) and are rounded to 16 bits once, as on the CPU.
#include <algorithm>

#include "cuda/allocator.hpp"
#include "cuda/check.hpp"
#include "cuda/conv.hpp"
#include "cuda/dtype_dispatch.cuh"
#include "cuda/launch.cuh"

namespace fluxion::cuda {

namespace {

constexpr std::size_t kColumnBudget = std::size_t{256} << 20;  // bytes of column buffer per call

// Sizes of the GEMMs: G groups, each with Kg output and Cg input channels.
struct Dims {
    std::int64_t groups, kg, rows, rows_g, p;  // rows = C*R*S, rows_g = rows / G, p = OH*OW

    explicit Dims(const Conv2dShape& s)
        : groups(s.groups), kg(s.k / s.groups), rows(s.c * s.r * s.s), rows_g(rows / s.groups), p(s.oh * s.ow) {}
};

template <class T> __global__ void im2col_kernel(Conv2dShape s, std::int64_t images, const T* x, T* col) {
    const std::int64_t p_count = s.oh * s.ow, rows = s.c * s.r * s.s, total = images * rows * p_count;
    for (std::int64_t i = first_index(); i < total; i += index_step()) {
        const std::int64_t p = i % p_count, row = i / p_count % rows, image = i / p_count / rows;
        const std::int64_t kw = row % s.s, kh = row / s.s % s.r, c = row / (s.s * s.r);
        const std::int64_t h = p / s.ow * s.stride_h - s.pad_h + kh * s.dil_h;
        const std::int64_t w = p % s.ow * s.stride_w - s.pad_w + kw * s.dil_w;
        const bool inside = h >= 0 && h < s.h && w >= 0 && w < s.w;
        col[i] = inside ? x[((image * s.c + c) * s.h + h) * s.w + w] : T(0);
    }
}

// gx[image, c, h, w] = the sum of the column entries that im2col copied from that input cell.
template <class T>
__global__ void col2im_kernel(Conv2dShape s, std::int64_t images, const Compute<T>* col, T* gx) {
    const std::int64_t p_count = s.oh * s.ow, rows = s.c * s.r * s.s, total = images * s.c * s.h * s.w;
    for (std::int64_t i = first_index(); i < total; i += index_step()) {
        const std::int64_t w = i % s.w, h = i / s.w % s.h, c = i / (s.w * s.h) % s.c, image = i / (s.w * s.h * s.c);
        Compute<T> sum = 0;
        for (std::int64_t kh = 0; kh < s.r; ++kh) {
            const std::int64_t hh = h + s.pad_h - kh * s.dil_h;
            if (hh < 0 || hh % s.stride_h != 0 || hh / s.stride_h >= s.oh) continue;
            for (std::int64_t kw = 0; kw < s.s; ++kw) {
                const std::int64_t ww = w + s.pad_w - kw * s.dil_w;
                if (ww < 0 || ww % s.stride_w != 0 || ww / s.stride_w >= s.ow) continue;
                const std::int64_t row = (c * s.r + kh) * s.s + kw;
                sum += col[(image * rows + row) * p_count + hh / s.stride_h * s.ow + ww / s.stride_w];
            }
        }
        gx[i] = narrow<T>(sum);
    }
}

void im2col(const Context& ctx, DType t, const Conv2dShape& s, std::int64_t images, const void* x, void* col) {
    const std::int64_t total = images * s.c * s.r * s.s * s.oh * s.ow;
    dispatch_floating(t, "conv2d", [&](auto tag) {
        using T = decltype(tag);
        im2col_kernel<T><<<grid_for(ctx, total), kThreads, 0, ctx.stream>>>(s, images, static_cast<const T*>(x),
                                                                             static_cast<T*>(col));
    });
    FLUXION_CUDA_CHECK_LAUNCH("im2col_kernel");
}

void col2im(const Context& ctx, DType t, const Conv2dShape& s, std::int64_t images, const void* col, void* gx) {
    const std::int64_t total = images * s.c * s.h * s.w;
    dispatch_floating(t, "conv2d_backward_input", [&](auto tag) {
        using T = decltype(tag);
        col2im_kernel<T><<<grid_for(ctx, total), kThreads, 0, ctx.stream>>>(
            s, images, static_cast<const Compute<T>*>(col), static_cast<T*>(gx));
    });
    FLUXION_CUDA_CHECK_LAUNCH("col2im_kernel");
}

// How many images' columns fit the budget (at least one).
std::int64_t images_per_chunk(const Conv2dShape& s, std::size_t element) {
    const std::size_t per_image = static_cast<std::size_t>(s.c * s.r * s.s * s.oh * s.ow) * element;
    const auto fitting = static_cast<std::int64_t>(kColumnBudget / std::max<std::size_t>(per_image, 1));
    return std::max<std::int64_t>(std::min(fitting, s.n), 1);
}

// `elements` further on from `base`
const void* advance(const void* base, std::int64_t elements, std::size_t element) {
    return static_cast<const char*>(base) + elements * static_cast<std::int64_t>(element);
}
void* advance(void* base, std::int64_t elements, std::size_t element) {
    return static_cast<char*>(base) + elements * static_cast<std::int64_t>(element);
}

}  // namespace

void im2col_conv2d(int device, DType t, const Conv2dShape& s, const void* x, const void* w, void* y) {
    const Context& ctx = activate(device);
    const Dims d(s);
    const std::size_t size = itemsize(t);
    const std::int64_t chunk = images_per_chunk(s, size);
    Scratch col(device, chunk * d.rows * d.p * size);
    for (std::int64_t first = 0; first < s.n; first += chunk) {
        const std::int64_t images = std::min(chunk, s.n - first);
        im2col(ctx, t, s, images, advance(x, first * s.c * s.h * s.w, size), col.get());
        void* y_first = advance(y, first * s.k * d.p, size);
        if (d.groups == 1) {  // y[i] {K, P} = W {K, rows} x col[i] {rows, P}, batched over images
            gemm(device, t, false, false, s.k, d.p, d.rows, 1.0, w, d.rows, 0, col.get(), d.p, d.rows * d.p, 0.0,
                 y_first, d.p, s.k * d.p, images);
            continue;
        }
        for (std::int64_t i = 0; i < images; ++i)  // batched over groups
            gemm(device, t, false, false, d.kg, d.p, d.rows_g, 1.0, w, d.rows_g, d.kg * d.rows_g,
                 advance(col.get(), i * d.rows * d.p, size), d.p, d.rows_g * d.p, 0.0,
                 advance(y_first, i * s.k * d.p, size), d.p, d.kg * d.p, d.groups);
    }
}

void im2col_conv2d_backward_input(int device, DType t, const Conv2dShape& s, const void* gy, const void* w,
                                  void* gx) {
    const Context& ctx = activate(device);
    const Dims d(s);
    const std::size_t size = itemsize(t);
    const DType col_type = compute_type(t);  // the products stay in f32 for f16 and bf16 until col2im
    const std::size_t col_size = itemsize(col_type);
    const std::int64_t chunk = images_per_chunk(s, col_size);
    Scratch col(device, chunk * d.rows * d.p * col_size);
    for (std::int64_t first = 0; first < s.n; first += chunk) {
        const std::int64_t images = std::min(chunk, s.n - first);
        const void* gy_first = advance(gy, first * s.k * d.p, size);
        if (d.groups == 1) {  // col[i] {rows, P} = W^T {rows, K} x gy[i] {K, P}
            gemm_into(device, t, col_type, true, false, d.rows, d.p, s.k, 1.0, w, d.rows, 0, gy_first, d.p,
                      s.k * d.p, 0.0, col.get(), d.p, d.rows * d.p, images);
        } else {
            for (std::int64_t i = 0; i < images; ++i)
                gemm_into(device, t, col_type, true, false, d.rows_g, d.p, d.kg, 1.0, w, d.rows_g, d.kg * d.rows_g,
                          advance(gy_first, i * s.k * d.p, size), d.p, d.kg * d.p, 0.0,
                          advance(col.get(), i * d.rows * d.p, col_size), d.p, d.rows_g * d.p, d.groups);
        }
        col2im(ctx, t, s, images, col.get(), advance(gx, first * s.c * s.h * s.w, size));
    }
}

void im2col_conv2d_backward_weight(int device, DType t, const Conv2dShape& s, const void* x, const void* gy,
                                   void* gw) {
    const Context& ctx = activate(device);
    const Dims d(s);
    const std::size_t size = itemsize(t);
    // f16 and bf16 gradients add up over the images in f32, rounded into gw once at the end.
    const DType sum_type = compute_type(t);
    const std::int64_t count = s.k * d.rows_g;
    Scratch wide(device, sum_type != t ? count * itemsize(sum_type) : 0);
    void* sums = sum_type != t ? wide.get() : gw;
    FLUXION_CUDA_CHECK(cudaMemsetAsync(sums, 0, count * itemsize(sum_type), ctx.stream));
    const std::int64_t chunk = images_per_chunk(s, size);
    Scratch col(device, chunk * d.rows * d.p * size);
    for (std::int64_t first = 0; first < s.n; first += chunk) {
        const std::int64_t images = std::min(chunk, s.n - first);
        im2col(ctx, t, s, images, advance(x, first * s.c * s.h * s.w, size), col.get());
        for (std::int64_t i = 0; i < images; ++i)  // gW[g] {Kg, rows_g} += gy[i][g] {Kg, P} x col[i][g]^T
            gemm_into(device, t, sum_type, false, true, d.kg, d.rows_g, d.p, 1.0,
                      advance(gy, (first + i) * s.k * d.p, size), d.p, d.kg * d.p,
                      advance(col.get(), i * d.rows * d.p, size), d.p, d.rows_g * d.p, 1.0, sums, d.rows_g,
                      d.kg * d.rows_g, d.groups);
    }
    if (sum_type != t) cast(device, sum_type, t, count, sums, gw);
}

}  // namespace fluxion::cuda
