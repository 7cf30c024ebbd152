// elementwise.cpp — arithmetic with broadcasting, math functions, activations, comparisons, where,
// cast: forward through the backend's elementwise kernels, backward as the chain rule.
#include "core/op_arguments.hpp"
#include "core/ops/unary_registry.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

std::atomic<bool> detail::tape_keeps_x_and_y{false};

using backend::Binary;
using backend::Unary;
using detail::record;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

namespace {

Tensor binary_op(const char* op_name, Binary op, const Tensor& a, const Tensor& b) {
    Device dev = detail::common_device(op_name, {a, b});
    DType t = promote(a.dtype(), b.dtype());
    Tensor ac = a.dtype() == t ? a : cast(a, t);
    Tensor bc = b.dtype() == t ? b : cast(b, t);
    Shape shape = detail::broadcast_shapes(op_name, a.shape(), b.shape());
    bool comparison = op >= Binary::eq;
    Tensor out = detail::make_tensor(shape, comparison ? DType::boolean : t, dev);
    if (out.numel() > 0) {
        auto va = detail::broadcast_view(ac, shape), vb = detail::broadcast_view(bc, shape);
        detail::backend_for(dev).binary(dev.index, op, t, &va, ac.data_ptr(), &vb, bc.data_ptr(), out.data_ptr());
    }
    return out;
}

// A scalar as a 0-dimensional tensor on x's device, in x's type (floating if x is integral and s is not).
Tensor scalar_like(const Tensor& x, double s) {
    detail::require_defined("scalar arithmetic", x);
    DType t = x.dtype();
    if (is_integral(t) && s != static_cast<double>(static_cast<long long>(s))) t = DType::f32;
    if (t == DType::boolean) t = DType::i64;
    return scalar(s, {.dtype = t, .device = x.device()});
}

// The tape keeps what the op's gradient reads (core/elementwise_formulas.def): x, y, both or
// neither. A pointer the gradient does not read is given another buffer of the same size.
Tensor unary_op(const char* op_name, Unary op, const Tensor& x, double a = 0, double b = 0) {
    detail::require_defined(op_name, x);
    detail::require_floating(op_name, x);
    Tensor xc = detail::dense(x);
    Tensor out = detail::make_tensor(x.shape(), x.dtype(), x.device());
    const auto& be = detail::backend_of(x);
    if (out.numel() > 0) be.unary(x.device().index, op, x.dtype(), x.numel(), xc.data_ptr(), out.data_ptr(), a, b);
    if (!detail::any_tracked({x})) return out;
    using detail::GradientReads;
    const GradientReads reads = detail::tape_keeps_x_and_y ? GradientReads::XY : detail::gradient_reads(op);
    Tensor kept_x = reads == GradientReads::X || reads == GradientReads::XY ? xc : Tensor();
    Tensor kept_y = reads == GradientReads::Y || reads == GradientReads::XY ? out : Tensor();
    return record(op_name, {x}, out, [op, kept_x, kept_y, a, b](const Tensor& g, const Needs&) {
        Tensor gc = detail::dense(g), gx = detail::make_tensor(g.shape(), g.dtype(), g.device());
        const Tensor& any = kept_x.defined() ? kept_x : kept_y.defined() ? kept_y : gc;
        const void* xp = (kept_x.defined() ? kept_x : any).data_ptr();
        const void* yp = (kept_y.defined() ? kept_y : any).data_ptr();
        if (gx.numel() > 0)
            detail::backend_of(gc).unary_backward(gc.device().index, op, gc.dtype(), gc.numel(), xp, yp,
                                                  gc.data_ptr(), gx.data_ptr(), a, b);
        return Grads{gx};
    });
}

// 0 where `loses`, 0.5 where a == b, 1 elsewhere, in g's dtype: PyTorch's split of the gradient of
// maximum and minimum, which sends half to each argument when they are equal and all of it to both
// when either is NaN (neither loses: the NaN result depends on both).
Tensor share(const Tensor& loses, const Tensor& a, const Tensor& b, DType dtype) {
    return 1.0 - cast(loses, dtype) - cast(eq(a, b), dtype) * 0.5;
}

}  // namespace

// ---- arithmetic ----

Tensor operator+(const Tensor& a, const Tensor& b) {
    Tensor out = binary_op("add", Binary::add, a, b);
    return record("add", {a, b}, out, [sa = a.shape(), sb = b.shape()](const Tensor& g, const Needs& n) {
        return Grads{n[0] ? sum_to(g, sa) : Tensor(), n[1] ? sum_to(g, sb) : Tensor()};
    });
}

Tensor operator-(const Tensor& a, const Tensor& b) {
    Tensor out = binary_op("sub", Binary::sub, a, b);
    return record("sub", {a, b}, out, [sa = a.shape(), sb = b.shape()](const Tensor& g, const Needs& n) {
        return Grads{n[0] ? sum_to(g, sa) : Tensor(), n[1] ? sum_to(-g, sb) : Tensor()};
    });
}

Tensor operator*(const Tensor& a, const Tensor& b) {
    Tensor out = binary_op("mul", Binary::mul, a, b);
    if (!detail::any_tracked({a, b})) return out;
    return record("mul", {a, b}, out, [a, b](const Tensor& g, const Needs& n) {
        return Grads{n[0] ? sum_to(g * b, a.shape()) : Tensor(), n[1] ? sum_to(g * a, b.shape()) : Tensor()};
    });
}

Tensor operator/(const Tensor& a, const Tensor& b) {
    Tensor out = binary_op("div", Binary::div, a, b);
    if (!detail::any_tracked({a, b})) return out;
    return record("div", {a, b}, out, [a, b, out](const Tensor& g, const Needs& n) {
        return Grads{n[0] ? sum_to(g / b, a.shape()) : Tensor(), n[1] ? sum_to(-(g * out) / b, b.shape()) : Tensor()};
    });
}

Tensor operator-(const Tensor& a) {
    if (is_integral(a.dtype())) return scalar_like(a, 0) - a;
    return unary_op("neg", Unary::neg, a);
}

Tensor operator+(const Tensor& a, double s) { return a + scalar_like(a, s); }
Tensor operator-(const Tensor& a, double s) { return a - scalar_like(a, s); }
Tensor operator*(const Tensor& a, double s) { return a * scalar_like(a, s); }
Tensor operator/(const Tensor& a, double s) { return a / scalar_like(a, s); }
Tensor operator+(double s, const Tensor& a) { return scalar_like(a, s) + a; }
Tensor operator-(double s, const Tensor& a) { return scalar_like(a, s) - a; }
Tensor operator*(double s, const Tensor& a) { return scalar_like(a, s) * a; }
Tensor operator/(double s, const Tensor& a) { return scalar_like(a, s) / a; }

Tensor pow(const Tensor& a, const Tensor& b) {
    Tensor out = binary_op("pow", Binary::pow, a, b);
    if (!detail::any_tracked({a, b})) return out;
    return record("pow", {a, b}, out, [a, b, out](const Tensor& g, const Needs& n) {
        Tensor ga, gb;
        if (n[0]) ga = sum_to(g * b * pow(a, b - 1.0), a.shape());
        if (n[1]) {
            Tensor positive = gt(a, zeros_like(a));
            gb = sum_to(where(positive, g * out * log(where(positive, a, ones_like(a))), zeros_like(out)), b.shape());
        }
        return Grads{ga, gb};
    });
}

Tensor pow(const Tensor& a, double exponent) { return unary_op("pow", Unary::pow_scalar, a, exponent); }

Tensor maximum(const Tensor& a, const Tensor& b) {
    Tensor out = binary_op("maximum", Binary::maximum, a, b);
    if (!detail::any_tracked({a, b})) return out;
    return record("maximum", {a, b}, out, [a, b](const Tensor& g, const Needs& n) {
        return Grads{n[0] ? sum_to(g * share(lt(a, b), a, b, g.dtype()), a.shape()) : Tensor(),
                     n[1] ? sum_to(g * share(gt(a, b), a, b, g.dtype()), b.shape()) : Tensor()};
    });
}

Tensor minimum(const Tensor& a, const Tensor& b) {
    Tensor out = binary_op("minimum", Binary::minimum, a, b);
    if (!detail::any_tracked({a, b})) return out;
    return record("minimum", {a, b}, out, [a, b](const Tensor& g, const Needs& n) {
        return Grads{n[0] ? sum_to(g * share(gt(a, b), a, b, g.dtype()), a.shape()) : Tensor(),
                     n[1] ? sum_to(g * share(lt(a, b), a, b, g.dtype()), b.shape()) : Tensor()};
    });
}

// ---- math and activations ----

// fx::name(x) for every FN line of the registry (core/elementwise_formulas.def).
#define FX_UNARY(name, code, reads, api, value, gradient) FX_DEFINE_##api(name)
#define FX_DEFINE_FN(name) \
    Tensor name(const Tensor& x) { return unary_op(#name, Unary::name, x); }
#define FX_DEFINE_OWN(name)
#include "core/elementwise_formulas.def"
#undef FX_DEFINE_FN
#undef FX_DEFINE_OWN

Tensor clamp(const Tensor& x, double low, double high) {
    if (low > high) throw ValueError("clamp: low " + std::to_string(low) + " is above high " + std::to_string(high));
    return unary_op("clamp", Unary::clamp, x, low, high);
}
Tensor leakyrelu(const Tensor& x, double slope) { return unary_op("leakyrelu", Unary::leakyrelu, x, slope); }
Tensor elu(const Tensor& x, double alpha) { return unary_op("elu", Unary::elu, x, alpha); }
Tensor hardtanh(const Tensor& x, double low, double high) {
    if (!(low <= high))
        throw ValueError("hardtanh: low " + std::to_string(low) + " must not be above high " + std::to_string(high));
    return unary_op("hardtanh", Unary::hardtanh, x, low, high);
}
Tensor celu(const Tensor& x, double alpha) {
    if (alpha == 0) throw ValueError("celu: alpha must not be 0 (celu divides by it)");
    return unary_op("celu", Unary::celu, x, alpha);
}
Tensor softshrink(const Tensor& x, double lambda) {
    if (!(lambda >= 0))
        throw ValueError("softshrink: lambda must be greater than or equal to 0, but is " + std::to_string(lambda));
    return unary_op("softshrink", Unary::softshrink, x, lambda);
}
Tensor trelu(const Tensor& x, double threshold, double value) {
    return unary_op("trelu", Unary::trelu, x, threshold, value);
}
Tensor identity(const Tensor& x) { return x; }

// ---- comparisons and selection ----

Tensor eq(const Tensor& a, const Tensor& b) { return binary_op("eq", Binary::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_op("ne", Binary::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_op("lt", Binary::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_op("le", Binary::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_op("gt", Binary::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_op("ge", Binary::ge, a, b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
    Device dev = detail::common_device("where", {cond, a, b});
    Tensor c = cond.dtype() == DType::boolean ? cond : ne(cond, zeros({}, {.dtype = cond.dtype(), .device = dev}));
    DType t = promote(a.dtype(), b.dtype());
    Tensor ac = a.dtype() == t ? a : cast(a, t), bc = b.dtype() == t ? b : cast(b, t);
    Shape shape = detail::broadcast_shapes("where", detail::broadcast_shapes("where", c.shape(), a.shape()), b.shape());
    Tensor out = detail::make_tensor(shape, t, dev);
    if (out.numel() > 0) {
        auto vc = detail::broadcast_view(c, shape), va = detail::broadcast_view(ac, shape),
             vb = detail::broadcast_view(bc, shape);
        detail::backend_for(dev).where(dev.index, t, &vc, c.data_ptr(), &va, ac.data_ptr(), &vb, bc.data_ptr(),
                                       out.data_ptr());
    }
    if (!detail::any_tracked({ac, bc})) return out;
    return record("where", {c, ac, bc}, out, [c, sa = ac.shape(), sb = bc.shape()](const Tensor& g, const Needs& n) {
        Tensor z = zeros({}, {.dtype = g.dtype(), .device = g.device()});
        return Grads{Tensor(), n[1] ? sum_to(where(c, g, z), sa) : Tensor(), n[2] ? sum_to(where(c, z, g), sb) : Tensor()};
    });
}

// ---- conversion ----

Tensor cast(const Tensor& x, DType t) {
    detail::require_defined("cast", x);
    if (x.dtype() == t) return x;
    Tensor xc = detail::dense(x);
    Tensor out = detail::make_tensor(x.shape(), t, x.device());
    if (out.numel() > 0)
        detail::backend_of(x).cast(x.device().index, x.dtype(), t, x.numel(), xc.data_ptr(), out.data_ptr());
    if (!is_floating(x.dtype())) return out;
    return record("cast", {x}, out, [from = x.dtype()](const Tensor& g, const Needs&) { return Grads{cast(g, from)}; });
}

Tensor contiguous(const Tensor& x) { return x.contiguous(); }

}  // namespace fluxion
