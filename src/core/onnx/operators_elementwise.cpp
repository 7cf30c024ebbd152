// operators_elementwise.cpp — ONNX's elementwise, activation, comparison and reduction operators
// as fluxion's ops (numpy broadcasting is fluxion's own).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;

// ONNX keeps the first operand's type where fluxion promotes (Pow of f32 by i64 is f32).
Tensor as_type_of(const Tensor& y, const Tensor& like) { return y.dtype() == like.dtype() ? y : cast(y, like.dtype()); }

// Integer division truncates toward zero in ONNX; fluxion's divides as reals.
Tensor integer_div(const Node& n, const Tensor& a, const Tensor& b) {
    values_read_on_host(n, "its integer operands (to divide them)");
    const Shape shape = broadcast_shape(a.shape(), b.shape());
    const auto x = host_ints(a.expand(shape).contiguous()), y = host_ints(b.expand(shape).contiguous());
    std::vector<std::int64_t> q(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (y[i] == 0) throw ValueError("fx::onnx: Div: integer division by zero");
        q[i] = x[i] / y[i];
    }
    return tensor(q, shape).to(a.dtype());
}

// erf from the elementary ops, so that autodiff differentiates it: Abramowitz and Stegun's 7.1.26,
// within 1.5e-7 of erf everywhere (below f32's resolution of values near 1).
Tensor erf_of(const Tensor& x) {
    const Tensor a = abs(x);
    const Tensor t = 1.0 / (1.0 + 0.3275911 * a);
    const Tensor poly =
        t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-(a * a)));
}

template <Tensor (*F)(const Tensor&, const Tensor&)> Ts binary(const Node&, const Ts& in) { return {F(in[0], in[1])}; }
Tensor add(const Tensor& a, const Tensor& b) { return a + b; }
Tensor sub(const Tensor& a, const Tensor& b) { return a - b; }
Tensor mul(const Tensor& a, const Tensor& b) { return a * b; }
Ts div(const Node& n, const Ts& in) {
    const Tensor &a = in[0], &b = in[1];
    return {is_integral(a.dtype()) && is_integral(b.dtype()) ? integer_div(n, a, b) : a / b};
}
Tensor pow_of(const Tensor& a, const Tensor& b) { return as_type_of(pow(a, b), a); }

Tensor neg(const Tensor& x) { return -x; }
Tensor reciprocal(const Tensor& x) { return 1.0 / x; }

// The activations of one or two float attributes: their names, ONNX's defaults, and the function.
struct Parametric {
    const char* op;
    const char *a, *b;  // the attributes' names (b may be null)
    float a_default, b_default;
    Tensor (*f)(const Tensor& x, double a, double b);
};
const Parametric kParametric[] = {
    {"LeakyRelu", "alpha", nullptr, 0.01f, 0, [](const Tensor& x, double a, double) { return leakyrelu(x, a); }},
    {"Elu", "alpha", nullptr, 1, 0, [](const Tensor& x, double a, double) { return elu(x, a); }},
    {"Celu", "alpha", nullptr, 1, 0, [](const Tensor& x, double a, double) { return celu(x, a); }},
    {"ThresholdedRelu", "alpha", nullptr, 1, 0, [](const Tensor& x, double a, double) { return trelu(x, a, 0); }},
    {"Swish", "alpha", nullptr, 1, 0, [](const Tensor& x, double a, double) { return x * sigmoid(x * a); }},
    {"HardSigmoid", "alpha", "beta", 0.2f, 0.5f,
     [](const Tensor& x, double a, double b) { return clamp(x * a + b, 0, 1); }},
    // gamma elu(x, alpha), the SNN constants by default
    {"Selu", "alpha", "gamma", 1.67326319217681884765625f, 1.05070102214813232421875f,
     [](const Tensor& x, double a, double g) { return g * elu(x, a); }},
};
Ts parametric(const Node& n, const Ts& in) {
    for (const auto& p : kParametric)
        if (n.op() == p.op) return {p.f(in[0], n.f(p.a, p.a_default), p.b ? n.f(p.b, p.b_default) : 0.0)};
    n.unsupported("no parametric activation of this name");
}
Ts prelu(const Node& n, const Ts& in) {
    Tensor slope = in[1];
    if (n.opset() < 7 && slope.ndim() == 1 && in[0].ndim() > 2) {  // one slope per channel, before broadcasting
        Shape s(std::size_t(in[0].ndim() - 1), 1);
        s[0] = slope.numel();
        slope = slope.reshape(s);
    }
    return {where(in[0] < zeros_like(in[0]), in[0] * slope, in[0])};
}
Ts cast_like(const Node&, const Ts& in) {
    const DType to = in[1].dtype();
    return {is_floating(in[0].dtype()) && is_floating(to) ? cast(in[0], to) : in[0].to(to)};
}
Ts gelu_op(const Node& n, const Ts& in) {
    const std::string approximate = n.s("approximate", "none");
    if (approximate == "tanh") return {gelu(in[0])};
    if (approximate != "none") n.unsupported("approximate='" + approximate + "'");
    return {gelu_erf(in[0])};
}
Ts erf_op(const Node&, const Ts& in) { return {erf_of(in[0])}; }

Ts clip(const Node& n, const Ts& in) {
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    if (n.opset() < 11) {
        lo = n.f("min", -std::numeric_limits<float>::infinity());
        hi = n.f("max", std::numeric_limits<float>::infinity());
    } else {
        if (in.size() > 1 && in[1].defined()) lo = in[1].to(DType::f64).item();
        if (in.size() > 2 && in[2].defined()) hi = in[2].to(DType::f64).item();
    }
    const Tensor& x = in[0];
    if (is_floating(x.dtype()) && lo <= hi) return {clamp(x, lo, hi)};
    // Integers, and bounds the wrong way round (every value becomes max, as in ONNX's reference).
    const double type_low = x.dtype() == DType::u8 ? 0 : x.dtype() == DType::i32 ? -2147483648.0 : -9.2e18;
    const double type_high = x.dtype() == DType::u8 ? 255 : x.dtype() == DType::i32 ? 2147483647.0 : 9.2e18;
    const double dmin = is_floating(x.dtype()) ? lo : std::clamp(lo, type_low, type_high);
    const double dmax = is_floating(x.dtype()) ? hi : std::clamp(hi, type_low, type_high);
    return {minimum(maximum(x, full({}, dmin, {.dtype = x.dtype(), .device = x.device()})),
                    full({}, dmax, {.dtype = x.dtype(), .device = x.device()}))};
}

// Max, Min, Sum and Mean of any number of operands.
template <Tensor (*F)(const Tensor&, const Tensor&)> Ts fold(const Node&, const Ts& in) {
    Tensor y = in[0];
    for (std::size_t i = 1; i < in.size(); ++i) y = F(y, in[i]);
    return {y};
}
Ts mean_of(const Node& n, const Ts& in) { return {fold<add>(n, in)[0] / double(in.size())}; }

template <Tensor (*F)(const Tensor&, const Tensor&)> Ts compare(const Node&, const Ts& in) { return {F(in[0], in[1])}; }
Ts not_op(const Node&, const Ts& in) { return {eq(in[0], zeros_like(in[0]))}; }
// The logical operators on booleans, as integer arithmetic compared with zero.
Tensor nonzero(const Tensor& x) { return ne(x, zeros_like(x)); }
Ts and_op(const Node&, const Ts& in) { return {nonzero(in[0].to(DType::i32) * in[1].to(DType::i32))}; }
Ts or_op(const Node&, const Ts& in) { return {nonzero(in[0].to(DType::i32) + in[1].to(DType::i32))}; }
Ts xor_op(const Node&, const Ts& in) { return {ne(in[0].to(DType::i32), in[1].to(DType::i32))}; }
Ts where_op(const Node&, const Ts& in) { return {where(in[0], in[1], in[2])}; }

Ts cast_op(const Node& n, const Ts& in) {
    using P = ::onnx::TensorProto;
    DType to = DType::f32;
    switch (n.i("to", 0)) {
        case P::FLOAT: to = DType::f32; break;
        case P::DOUBLE: to = DType::f64; break;
        case P::FLOAT16: to = DType::f16; break;
        case P::BFLOAT16: to = DType::bf16; break;
        case P::INT64: to = DType::i64; break;
        case P::INT32: to = DType::i32; break;
        case P::UINT8: to = DType::u8; break;
        case P::BOOL: to = DType::boolean; break;
        default: n.unsupported("to=" + P::DataType_Name(P::DataType(n.i("to", 0))));
    }
    const Tensor& x = in[0];
    return {is_floating(x.dtype()) && is_floating(to) ? cast(x, to) : x.to(to)};
}

// ---- reductions ----
// The axes: an attribute before the opset where they became an input (13 for ReduceSum, 18 for the
// rest); none means every axis unless noop_with_empty_axes.
std::vector<int> reduced_axes(const Node& n, const Ts& in) {
    const int rank = in[0].ndim();
    const bool as_input = n.opset() >= (n.op() == "ReduceSum" ? 13 : 18);
    std::vector<std::int64_t> axes =
        as_input ? (in.size() > 1 && in[1].defined() ? host_ints(in[1]) : std::vector<std::int64_t>{}) : n.ints("axes");
    std::vector<int> out;
    if (axes.empty()) {
        if (n.i("noop_with_empty_axes", 0)) return {};
        for (int a = 0; a < rank; ++a) out.push_back(a);
        return out;
    }
    for (auto a : axes) out.push_back(axis_of(a, rank, n));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

Tensor sum_axis(const Tensor& x, int a, bool k) { return sum(x, a, k); }
Tensor mean_axis(const Tensor& x, int a, bool k) { return mean(x, a, k); }
Tensor max_axis(const Tensor& x, int a, bool k) { return max(x, a, k); }
Tensor min_axis(const Tensor& x, int a, bool k) { return min(x, a, k); }
Tensor lse_axis(const Tensor& x, int a, bool k) { return logsumexp(x, a, k); }

// What a reduction gives over no elements where summing nothing does not give it (ONNX's rule).
enum class Empty { summed, lowest, highest };

// The type's lowest or highest value (−∞ and ∞ for floating types, false and true for booleans) in `shape`.
Tensor extreme(const Shape& shape, const Tensor& like, bool highest) {
    const TensorOptions o{.dtype = like.dtype(), .device = like.device()};
    if (like.dtype() == DType::i64) {  // beyond a double's exact integers
        using L = std::numeric_limits<std::int64_t>;
        return tensor(std::vector<std::int64_t>(std::size_t(numel(shape)), highest ? L::max() : L::min()), shape, o);
    }
    double low = -std::numeric_limits<double>::infinity(), high = std::numeric_limits<double>::infinity();
    if (like.dtype() == DType::i32)
        low = std::numeric_limits<std::int32_t>::min(), high = std::numeric_limits<std::int32_t>::max();
    if (like.dtype() == DType::u8) low = 0, high = 255;
    if (like.dtype() == DType::boolean) low = 0, high = 1;
    return full(shape, highest ? high : low, o);
}

// The Reduce family: an elementwise map (or none), a reduction along each axis, an elementwise finish (or none).
struct Reduction {
    const char* op;
    Tensor (*map)(const Tensor&);
    Tensor (*reduce)(const Tensor&, int, bool);
    Tensor (*finish)(const Tensor&);
    Empty empty;
};
const Reduction kReductions[] = {
    {"ReduceSum", nullptr, sum_axis, nullptr, Empty::summed},
    {"ReduceMean", nullptr, mean_axis, nullptr, Empty::summed},
    {"ReduceMax", nullptr, max_axis, nullptr, Empty::lowest},
    {"ReduceMin", nullptr, min_axis, nullptr, Empty::highest},
    {"ReduceL1", abs, sum_axis, nullptr, Empty::summed},
    {"ReduceL2", square, sum_axis, sqrt, Empty::summed},
    {"ReduceSumSquare", square, sum_axis, nullptr, Empty::summed},
    {"ReduceLogSum", nullptr, sum_axis, log, Empty::summed},
    {"ReduceLogSumExp", nullptr, lse_axis, nullptr, Empty::lowest},  // log 0 = −∞
};
Ts reduction(const Node& n, const Ts& in) {
    for (const auto& r : kReductions) {
        if (n.op() != r.op) continue;
        const std::vector<int> axes = reduced_axes(n, in);
        const bool keep = n.i("keepdims", 1) != 0;
        if (r.empty != Empty::summed &&
            std::any_of(axes.begin(), axes.end(), [&](int a) { return in[0].shape(a) == 0; })) {
            Shape shape = in[0].shape();
            for (auto it = axes.rbegin(); it != axes.rend(); ++it)
                if (keep) shape[std::size_t(*it)] = 1;
                else shape.erase(shape.begin() + *it);
            return {extreme(shape, in[0], r.empty == Empty::highest)};
        }
        Tensor y = r.map ? r.map(in[0]) : in[0];
        for (auto it = axes.rbegin(); it != axes.rend(); ++it) y = r.reduce(y, *it, keep);
        return {r.finish ? r.finish(y) : y};
    }
    n.unsupported("no reduction of this name");
}

// With select_last_index, the first extreme of the reversed axis, counted from the end.
template <Tensor (*F)(const Tensor&, int, bool)> Ts arg(const Node& n, const Ts& in) {
    const int axis = axis_of(n.i("axis", 0), in[0].ndim(), n);
    const bool keep = n.i("keepdims", 1) != 0;
    if (!n.i("select_last_index", 0)) return {F(in[0], axis, keep)};
    const std::int64_t dim = in[0].shape(axis);
    const Tensor reversed =
        index_select(in[0], axis, arange(dim - 1, -1, -1, {.dtype = DType::i64, .device = in[0].device()}));
    return {((dim - 1) - F(reversed, axis, keep)).to(DType::i64)};
}
Tensor argmax_axis(const Tensor& x, int a, bool k) { return argmax(x, a, k); }
Tensor argmin_axis(const Tensor& x, int a, bool k) { return argmin(x, a, k); }

}  // namespace

void add_elementwise_operators(std::map<std::string, Operator>& t) {
    t["Add"] = binary<add>;
    t["Sub"] = binary<sub>;
    t["Mul"] = binary<mul>;
    t["Div"] = div;
    t["Pow"] = binary<pow_of>;
    t["Neg"] = unary<neg>;
    t["Abs"] = unary<abs>;
    t["Exp"] = unary<exp>;
    t["Log"] = unary<log>;
    t["Sqrt"] = unary<sqrt>;
    t["Reciprocal"] = unary<reciprocal>;
    t["Sin"] = unary<sin>;
    t["Cos"] = unary<cos>;
    t["Sign"] = unary<sign>;
    t["Relu"] = unary<relu>;
    t["Sigmoid"] = unary<sigmoid>;
    t["Tanh"] = unary<tanh>;
    t["Softplus"] = unary<softplus>;
    t["Softsign"] = unary<softsign>;
    t["HardSwish"] = unary<hardswish>;
    t["Mish"] = unary<mish>;
    t["Erf"] = erf_op;
    t["Gelu"] = gelu_op;
    for (const auto& p : kParametric) t[p.op] = parametric;
    t["PRelu"] = prelu;
    t["Clip"] = clip;
    t["Max"] = fold<maximum>;
    t["Min"] = fold<minimum>;
    t["Sum"] = fold<add>;
    t["Mean"] = mean_of;
    t["Equal"] = compare<eq>;
    t["Less"] = compare<lt>;
    t["LessOrEqual"] = compare<le>;
    t["Greater"] = compare<gt>;
    t["GreaterOrEqual"] = compare<ge>;
    t["Not"] = not_op;
    t["And"] = and_op;
    t["Or"] = or_op;
    t["Xor"] = xor_op;
    t["Where"] = where_op;
    t["Cast"] = cast_op;
    t["CastLike"] = cast_like;
    for (const auto& r : kReductions) t[r.op] = reduction;
    t["ArgMax"] = arg<argmax_axis>;
    t["ArgMin"] = arg<argmin_axis>;
}

}  // namespace fluxion::onnx::detail
