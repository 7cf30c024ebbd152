// elementwise.cpp — unary functions and their gradients, binary ops over broadcast views, where
// (shaders unary.comp, unary_backward.comp, binary.comp, where.comp).
#include <string>

#include "fluxion/error.hpp"
#include "vulkan/capabilities.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"
#include "vulkan/strided.hpp"

namespace fluxion::vulkan {

namespace {

bool is_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }

// The unary ops that also take i32 and i64.
bool takes_integers(Unary op) {
#define FX_UNARY_INTEGER(name, code, value) \
    if (op == Unary::name) return true;
#include "core/elementwise_formulas.def"
    return false;
}

// The op's scalar parameters in the kernel's compute type (f32 for f16 and bf16).
void put_scalars(Launch& launch, DType t, double a, double b) {
    if (t == DType::f64) {
        launch.param(a);
        launch.param(b);
    } else if (t == DType::f32 || t == DType::f16 || t == DType::bf16) {
        launch.param(float(a));
        launch.param(float(b));
    } else if (t == DType::i64) {
        launch.param(std::int64_t(a));
        launch.param(std::int64_t(b));
    } else {
        launch.param(std::int32_t(a));
        launch.param(std::int32_t(b));
    }
}

// The contiguous view of `shape`, for outputs.
Strided contiguous(const Strided& shape) {
    Strided out = shape;
    std::int64_t stride = 1;
    for (int d = shape.ndim - 1; d >= 0; --d) {
        out.strides[d] = stride;
        stride *= shape.shape[d];
    }
    return out;
}

}  // namespace

void unary(int device, Unary op, DType t, std::int64_t n, const void* x, void* y, double a, double b) {
    if (n <= 0) return;
    Launch launch(device, "unary");
    require(launch.ctx(), backend::Op::unary, t, "unary");
    if (!is_float(t) && !(takes_integers(op) && (t == DType::i32 || t == DType::i64)))
        throw DTypeError("unary on " + launch.ctx().label() + " does not support " + fluxion::name(t) +
                         " for this function (f32, f64, f16, bf16; neg, abs, square and sign also i32, i64)");
    const std::string type = suffix(t, launch.ctx(), "unary");
    check_count(n, launch.ctx(), "unary");
    const std::size_t size = itemsize(t);
    const std::int32_t off0 = launch.buffer(x, std::size_t(n) * size, size, false);
    const std::int32_t off1 = launch.buffer(y, std::size_t(n) * size, size, true);
    launch.param(std::int32_t(n));
    launch.param(std::int32_t(op));
    launch.param(off0);
    launch.param(off1);
    put_scalars(launch, t, a, b);
    launch.run("unary_" + type, launch.groups(n));
}

void unary_backward(int device, Unary op, DType t, std::int64_t n, const void* x, const void* y, const void* gy,
                    void* gx, double a, double b) {
    if (n <= 0) return;
    Launch launch(device, "unary_backward");
    require(launch.ctx(), backend::Op::unary_backward, t, "unary_backward");
    const std::string type = suffix(t, launch.ctx(), "unary_backward");
    check_count(n, launch.ctx(), "unary_backward");
    const std::size_t size = itemsize(t), bytes = std::size_t(n) * size;
    const std::int32_t off0 = launch.buffer(x, bytes, size, false);
    const std::int32_t off1 = launch.buffer(y, bytes, size, false);
    const std::int32_t off2 = launch.buffer(gy, bytes, size, false);
    const std::int32_t off3 = launch.buffer(gx, bytes, size, true);
    launch.param(std::int32_t(n));
    launch.param(std::int32_t(op));
    launch.param(off0);
    launch.param(off1);
    launch.param(off2);
    launch.param(off3);
    put_scalars(launch, t, a, b);
    launch.run("unary_backward_" + type, launch.groups(n));
}

void binary(int device, Binary op, DType t, const Strided* a_view, const void* a, const Strided* b_view,
            const void* b, void* out) {
    const Strided out_view = contiguous(*a_view);
    const Views<3> v = merge_views<3>("binary", {a_view, b_view, &out_view});
    if (v.count == 0) return;
    Launch launch(device, "binary");
    require(launch.ctx(), backend::Op::binary, t, "binary");
    const bool compare = op >= Binary::eq;
    if (!compare && t == DType::boolean)
        throw DTypeError("binary arithmetic on " + launch.ctx().label() +
                         " does not support bool (f32, f64, f16, bf16, i32, i64, u8; comparisons also bool)");
    const std::string variant = std::string(compare ? "compare_" : "binary_") + suffix(t, launch.ctx(), "binary");
    check_count(v.count, launch.ctx(), "binary");
    const std::size_t size = itemsize(t), out_size = compare ? 1 : size;
    const std::int32_t off0 = launch.buffer(a, span_bytes(*a_view, size, "binary"), size, false);
    const std::int32_t off1 = launch.buffer(b, span_bytes(*b_view, size, "binary"), size, false);
    const std::int32_t off2 = launch.buffer(out, std::size_t(v.count) * out_size, out_size, true);
    launch.param(std::int32_t(v.count));
    launch.param(std::int32_t(v.ndim));
    launch.param(std::int32_t(op));
    launch.param(off0);
    launch.param(off1);
    launch.param(off2);
    put_views(launch, v);
    launch.run(variant, launch.groups(v.count));
}

void where(int device, DType t, const Strided* c_view, const void* c, const Strided* a_view, const void* a,
           const Strided* b_view, const void* b, void* out) {
    const Strided out_view = contiguous(*a_view);
    const Views<4> v = merge_views<4>("where", {c_view, a_view, b_view, &out_view});
    if (v.count == 0) return;
    Launch launch(device, "where");
    require(launch.ctx(), backend::Op::where, t, "where");
    const std::string type = bits_suffix(t, launch.ctx(), "where");
    check_count(v.count, launch.ctx(), "where");
    const std::size_t size = itemsize(t);
    const std::int32_t off0 = launch.buffer(c, span_bytes(*c_view, 1, "where"), 1, false);
    const std::int32_t off1 = launch.buffer(a, span_bytes(*a_view, size, "where"), size, false);
    const std::int32_t off2 = launch.buffer(b, span_bytes(*b_view, size, "where"), size, false);
    const std::int32_t off3 = launch.buffer(out, std::size_t(v.count) * size, size, true);
    launch.param(std::int32_t(v.count));
    launch.param(std::int32_t(v.ndim));
    launch.param(off0);
    launch.param(off1);
    launch.param(off2);
    launch.param(off3);
    put_views(launch, v);
    launch.run("where_" + type, launch.groups(v.count));
}

}  // namespace fluxion::vulkan
