// operators_math.cpp — ONNX's rounding, trigonometric and hyperbolic, classifying and bitwise
// operators. The functions fluxion has no op for are written with the ones it has (exp, log, sqrt,
// sin, cos), so that they differentiate and run on every device; rounding and bit operations,
// which have no useful gradient, are computed on the host.
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;

// f of each element of a floating tensor, on the host (fluxion has no rounding op), returned in
// x's type on x's device. Integers are already whole: they are returned as they are.
Tensor on_host(const Tensor& x, double (*f)(double)) {
    if (!is_floating(x.dtype())) return x;
    std::vector<double> v = x.contiguous().to_vector<double>();
    for (auto& e : v) e = f(e);
    return tensor(v, x.shape(), {.dtype = x.dtype(), .device = x.device()});
}
double floor_of(double v) { return std::floor(v); }
double ceil_of(double v) { return std::ceil(v); }
double round_of(double v) { return std::nearbyint(v); }  // the default rounding mode: halves to even

// 1 where x < 0, else -1 and 1: a constant (no gradient) for the odd functions' negative half.
Tensor sign_constant(const Tensor& x) { return 1.0 - 2.0 * lt(x, zeros_like(x)).to(x.dtype()); }

// atan on [-1, 1]: Abramowitz and Stegun's 4.4.49, within 2e-8 of atan there (below f32's resolution).
Tensor atan_unit(const Tensor& t) {
    const Tensor t2 = t * t;
    const double c[] = {-0.3333314528, 0.1999355085, -0.1420889944, 0.1065626393,
                        -0.0752896400, 0.0429096138, -0.0161657367, 0.0028662257};
    Tensor p = t2 * c[7];
    for (int i = 6; i >= 0; --i) p = t2 * (p + c[i]);
    return t * (p + 1.0);
}

// The half-angle identities bring every argument into [-1, 1] without a branch:
// atan x = 2 atan(x / (1 + √(1 + x²))), asin x = 2 atan(x / (1 + √(1 − x²))).
Tensor atan_of(const Tensor& x) { return 2.0 * atan_unit(x / (1.0 + sqrt(1.0 + x * x))); }
Tensor asin_of(const Tensor& x) { return 2.0 * atan_unit(x / (1.0 + sqrt(1.0 - x * x))); }
Tensor acos_of(const Tensor& x) { return std::numbers::pi / 2 - asin_of(x); }
Tensor tan_of(const Tensor& x) { return sin(x) / cos(x); }
Tensor sinh_of(const Tensor& x) { return (exp(x) - exp(-x)) * 0.5; }
Tensor cosh_of(const Tensor& x) { return (exp(x) + exp(-x)) * 0.5; }
// log(|x| + √(x² + 1)) with x's sign: no cancellation for negative x.
Tensor asinh_of(const Tensor& x) {
    const Tensor s = sign_constant(x);
    return s * log(s * x + sqrt(x * x + 1.0));
}
Tensor acosh_of(const Tensor& x) { return log(x + sqrt((x - 1.0) * (x + 1.0))); }
Tensor atanh_of(const Tensor& x) { return 0.5 * log((1.0 + x) / (1.0 - x)); }

template <double (*F)(double)> Ts rounding(const Node& n, const Ts& in) {
    if (is_floating(in[0].dtype())) values_read_on_host(n, "its input (to round it)");
    return {on_host(in[0], F)};
}

Ts is_inf(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const double inf = std::numeric_limits<double>::infinity();
    const bool positive = n.i("detect_positive", 1) != 0, negative = n.i("detect_negative", 1) != 0;
    if (positive && negative) return {eq(abs(x), full_like(x, inf))};
    if (positive) return {eq(x, full_like(x, inf))};
    if (negative) return {eq(x, full_like(x, -inf))};
    return {zeros(x.shape(), {.dtype = DType::boolean, .device = x.device()})};
}
Ts is_nan(const Node&, const Ts& in) { return {ne(in[0], in[0])}; }

Ts shrink(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const double lambd = n.f("lambd", 0.5f), bias = n.f("bias", 0.0f);
    if (!is_floating(x.dtype())) n.unsupported("an integer input (fluxion shrinks floating tensors)");
    return {where(lt(x, full_like(x, -lambd)), x + bias, where(gt(x, full_like(x, lambd)), x - bias, zeros_like(x)))};
}

// ---- bit operations, on the host: fluxion has no integer bit op ----
// The width and signedness of input i's ONNX type: declared by the graph where it says, else fluxion's type's.
struct Bits {
    int width;
    bool is_signed;
};
Bits bits_of(const Node& n, std::size_t input, DType t) {
    using P = ::onnx::TensorProto;
    switch (n.declared_type(input)) {
        case P::INT8: return {8, true};
        case P::INT16: return {16, true};
        case P::UINT16: return {16, false};
        case P::UINT32: return {32, false};
        default: break;
    }
    switch (t) {
        case DType::u8: return {8, false};
        case DType::i32: return {32, true};
        case DType::i64: return {64, true};
        default: n.unsupported("an input of type " + std::string(name(t)) + " (bit operations take integers)");
    }
}

// v wrapped to `bits` bits, sign-extended where the type is signed.
std::int64_t wrapped(std::uint64_t v, Bits b) {
    if (b.width == 64) return std::int64_t(v);
    const std::uint64_t mask = (std::uint64_t(1) << b.width) - 1, sign = std::uint64_t(1) << (b.width - 1);
    v &= mask;
    return b.is_signed && (v & sign) ? std::int64_t(v | ~mask) : std::int64_t(v);
}

// f of each broadcast pair of a and b's values (a and b of one integer type), in that type on a's device.
template <class F> Tensor on_host_pairs(const Node& n, const Tensor& a, const Tensor& b, F f) {
    if (a.dtype() != b.dtype())
        n.unsupported("inputs of types " + std::string(name(a.dtype())) + " and " + std::string(name(b.dtype())) +
                      " (ONNX requires one)");
    values_read_on_host(n, "its integers (to operate on their bits)");
    const Bits bits = bits_of(n, 0, a.dtype());
    const Shape shape = broadcast_shape(a.shape(), b.shape());
    const auto x = host_ints(a.expand(shape).contiguous()), y = host_ints(b.expand(shape).contiguous());
    std::vector<std::int64_t> z(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) z[i] = wrapped(std::uint64_t(f(x[i], y[i], bits.width)), bits);
    return tensor(z, shape, {.dtype = a.dtype(), .device = a.device()});
}

// Shifts by a negative amount or by the width or more leave only the sign's fill (ONNX's rule).
Ts bit_shift(const Node& n, const Ts& in) {
    const std::string direction = n.s("direction", "");
    if (direction != "LEFT" && direction != "RIGHT") n.unsupported("direction='" + direction + "'");
    const bool left = direction == "LEFT";
    return {on_host_pairs(n, in[0], in[1], [left](std::int64_t x, std::int64_t y, int bits) -> std::int64_t {
        if (y < 0 || y >= bits) return !left && x < 0 ? -1 : 0;
        return left ? std::int64_t(std::uint64_t(x) << y) : x >> y;  // x is sign-extended: >> is arithmetic
    })};
}
Ts bitwise_and(const Node& n, const Ts& in) {
    return {on_host_pairs(n, in[0], in[1], [](std::int64_t x, std::int64_t y, int) { return x & y; })};
}
Ts bitwise_or(const Node& n, const Ts& in) {
    return {on_host_pairs(n, in[0], in[1], [](std::int64_t x, std::int64_t y, int) { return x | y; })};
}
Ts bitwise_xor(const Node& n, const Ts& in) {
    return {on_host_pairs(n, in[0], in[1], [](std::int64_t x, std::int64_t y, int) { return x ^ y; })};
}
Ts bitwise_not(const Node& n, const Ts& in) {
    return {on_host_pairs(n, in[0], in[0], [](std::int64_t x, std::int64_t, int) { return ~x; })};
}

}  // namespace

void add_math_operators(std::map<std::string, Operator>& t) {
    t["Floor"] = rounding<floor_of>;
    t["Ceil"] = rounding<ceil_of>;
    t["Round"] = rounding<round_of>;
    t["IsInf"] = is_inf;
    t["IsNaN"] = is_nan;
    t["Tan"] = unary<tan_of>;
    t["Asin"] = unary<asin_of>;
    t["Acos"] = unary<acos_of>;
    t["Atan"] = unary<atan_of>;
    t["Sinh"] = unary<sinh_of>;
    t["Cosh"] = unary<cosh_of>;
    t["Asinh"] = unary<asinh_of>;
    t["Acosh"] = unary<acosh_of>;
    t["Atanh"] = unary<atanh_of>;
    t["Shrink"] = shrink;
    t["BitShift"] = bit_shift;
    t["BitwiseAnd"] = bitwise_and;
    t["BitwiseOr"] = bitwise_or;
    t["BitwiseXor"] = bitwise_xor;
    t["BitwiseNot"] = bitwise_not;
}

}  // namespace fluxion::onnx::detail
