// conv.cpp — 2-d convolutions as im2col + the tiled GEMM, and the input gradient as GEMM +
// col2im (shaders im2col.comp, col2im.comp): the input patches of a chunk of images are unrolled
// into a column matrix {C*R*S, OH*OW} per image. f16 and bf16 run the f32 convolution on widened
// copies, as the CPU backend does.
#include <algorithm>

#include "fluxion/error.hpp"
#include "vulkan/allocator.hpp"
#include "vulkan/capabilities.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

namespace {

constexpr std::size_t kColumnBudget = std::size_t{64} << 20;  // bytes of column buffer per call

// Sizes of the GEMMs: G groups, each with Kg output and Cg input channels.
struct Dims {
    std::int64_t groups, kg, rows, rows_g, p;  // rows = C*R*S, rows_g = rows / G, p = OH*OW

    explicit Dims(const Conv2dShape& s)
        : groups(s.groups), kg(s.k / s.groups), rows(s.c * s.r * s.s), rows_g(rows / s.groups), p(s.oh * s.ow) {}
};

void check_type(int device, DType t, backend::Op op, const char* kernel) {
    std::lock_guard lock(plugin_mutex());
    require(context(device), op, t, kernel);
}

// im2col (to_columns) or col2im over `images` images.
void unroll(int device, bool to_columns, DType t, const Conv2dShape& s, std::int64_t images, const void* src,
            void* dst) {
    const char* op = to_columns ? "conv2d im2col" : "conv2d col2im";
    Launch launch(device, op);
    const std::string type = suffix(t, launch.ctx(), op);
    const std::size_t size = itemsize(t);
    const std::int64_t cells = images * s.c * s.h * s.w, columns = images * s.c * s.r * s.s * s.oh * s.ow;
    check_count(std::max(cells, columns), launch.ctx(), op);
    const std::int32_t off0 = launch.buffer(src, std::size_t(to_columns ? cells : columns) * size, size, false);
    const std::int32_t off1 = launch.buffer(dst, std::size_t(to_columns ? columns : cells) * size, size, true);
    for (std::int64_t v : {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.oh, s.ow, s.stride_h, s.stride_w, s.pad_h, s.pad_w,
                           s.dil_h, s.dil_w, s.groups, images})
        launch.param(std::int32_t(v));
    launch.param(off0);
    launch.param(off1);
    launch.run((to_columns ? "im2col_" : "col2im_") + type, launch.groups(to_columns ? columns : cells));
}

// How many images' columns fit the budget (at least one).
std::int64_t images_per_chunk(const Conv2dShape& s, std::size_t element) {
    const std::size_t per_image = static_cast<std::size_t>(s.c * s.r * s.s * s.oh * s.ow) * element;
    const auto fitting = static_cast<std::int64_t>(kColumnBudget / std::max<std::size_t>(per_image, 1));
    return std::max<std::int64_t>(std::min(fitting, s.n), 1);
}

bool is_half(DType t) { return t == DType::f16 || t == DType::bf16; }

// An f32 copy on the device of `n` elements of the half type `t` (uninitialised when `src` is null);
// narrow() rounds it back into `t`. Convolutions of f16 and bf16 run in f32 on these, so that the
// columns and the partial sums of the gradients stay f32 and each result is rounded once.
class Widened {
public:
    Widened(int device, DType t, std::int64_t n, const void* src)
        : device_(device), t_(t), n_(n), f32_(device, std::size_t(std::max<std::int64_t>(n, 1)) * sizeof(float)) {
        if (src) cast(device_, t_, DType::f32, n_, src, f32_.get());
    }
    void* get() const { return f32_.get(); }
    void narrow(void* dst) const { cast(device_, DType::f32, t_, n_, f32_.get(), dst); }

private:
    int device_;
    DType t_;
    std::int64_t n_;
    Scratch f32_;
};

std::int64_t input_count(const Conv2dShape& s) { return s.n * s.c * s.h * s.w; }
std::int64_t weight_count(const Conv2dShape& s) { return s.k * (s.c / s.groups) * s.r * s.s; }
std::int64_t output_count(const Conv2dShape& s) { return s.n * s.k * s.oh * s.ow; }

const void* advance(const void* base, std::int64_t elements, std::size_t element) {
    return static_cast<const char*>(base) + elements * static_cast<std::int64_t>(element);
}
void* advance(void* base, std::int64_t elements, std::size_t element) {
    return static_cast<char*>(base) + elements * static_cast<std::int64_t>(element);
}

}  // namespace

void conv2d(int device, DType t, const Conv2dShape* sp, const void* x, const void* w, void* y) {
    const Conv2dShape& s = *sp;
    check_type(device, t, backend::Op::conv2d, "conv2d");
    if (is_half(t)) {
        const Widened wx(device, t, input_count(s), x), ww(device, t, weight_count(s), w);
        const Widened wy(device, t, output_count(s), nullptr);
        conv2d(device, DType::f32, sp, wx.get(), ww.get(), wy.get());
        return wy.narrow(y);
    }
    if (s.n * s.k * s.oh * s.ow == 0) return;
    const Dims d(s);
    const std::size_t size = itemsize(t);
    const std::int64_t chunk = images_per_chunk(s, size);
    Scratch col(device, std::size_t(chunk * d.rows * d.p) * size);
    for (std::int64_t first = 0; first < s.n; first += chunk) {
        const std::int64_t images = std::min(chunk, s.n - first);
        unroll(device, true, t, s, images, advance(x, first * s.c * s.h * s.w, size), col.get());
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

void conv2d_backward_input(int device, DType t, const Conv2dShape* sp, const void* gy, const void* w, void* gx) {
    const Conv2dShape& s = *sp;
    check_type(device, t, backend::Op::conv2d_backward_input, "conv2d_backward_input");
    if (is_half(t)) {
        const Widened wgy(device, t, output_count(s), gy), ww(device, t, weight_count(s), w);
        const Widened wgx(device, t, input_count(s), nullptr);
        conv2d_backward_input(device, DType::f32, sp, wgy.get(), ww.get(), wgx.get());
        return wgx.narrow(gx);
    }
    if (s.n * s.c * s.h * s.w == 0) return;
    const Dims d(s);
    const std::size_t size = itemsize(t);
    const std::int64_t chunk = images_per_chunk(s, size);
    Scratch col(device, std::size_t(chunk * d.rows * d.p) * size);
    for (std::int64_t first = 0; first < s.n; first += chunk) {
        const std::int64_t images = std::min(chunk, s.n - first);
        const void* gy_first = advance(gy, first * s.k * d.p, size);
        if (d.groups == 1) {  // col[i] {rows, P} = W^T {rows, K} x gy[i] {K, P}
            gemm(device, t, true, false, d.rows, d.p, s.k, 1.0, w, d.rows, 0, gy_first, d.p, s.k * d.p, 0.0,
                 col.get(), d.p, d.rows * d.p, images);
        } else {
            for (std::int64_t i = 0; i < images; ++i)
                gemm(device, t, true, false, d.rows_g, d.p, d.kg, 1.0, w, d.rows_g, d.kg * d.rows_g,
                     advance(gy_first, i * s.k * d.p, size), d.p, d.kg * d.p, 0.0,
                     advance(col.get(), i * d.rows * d.p, size), d.p, d.rows_g * d.p, d.groups);
        }
        unroll(device, false, t, s, images, col.get(), advance(gx, first * s.c * s.h * s.w, size));
    }
}

void conv2d_backward_weight(int device, DType t, const Conv2dShape* sp, const void* x, const void* gy, void* gw) {
    const Conv2dShape& s = *sp;
    check_type(device, t, backend::Op::conv2d_backward_weight, "conv2d_backward_weight");
    if (is_half(t)) {
        const Widened wx(device, t, input_count(s), x), wgy(device, t, output_count(s), gy);
        const Widened wgw(device, t, weight_count(s), nullptr);
        conv2d_backward_weight(device, DType::f32, sp, wx.get(), wgy.get(), wgw.get());
        return wgw.narrow(gw);
    }
    const Dims d(s);
    const std::size_t size = itemsize(t);
    fill(device, t, s.k * d.rows_g, gw, 0.0);
    if (s.n * d.p == 0) return;
    const std::int64_t chunk = images_per_chunk(s, size);
    Scratch col(device, std::size_t(chunk * d.rows * d.p) * size);
    for (std::int64_t first = 0; first < s.n; first += chunk) {
        const std::int64_t images = std::min(chunk, s.n - first);
        unroll(device, true, t, s, images, advance(x, first * s.c * s.h * s.w, size), col.get());
        for (std::int64_t i = 0; i < images; ++i)  // gW[g] {Kg, rows_g} += gy[i][g] {Kg, P} x col[i][g]^T
            gemm(device, t, false, true, d.kg, d.rows_g, d.p, 1.0, advance(gy, (first + i) * s.k * d.p, size), d.p,
                 d.kg * d.p, advance(col.get(), i * d.rows * d.p, size), d.p, d.rows_g * d.p, 1.0, gw, d.rows_g,
                 d.kg * d.rows_g, d.groups);
    }
}

}  // namespace fluxion::vulkan
