// operators_modulo.cpp — ONNX's Mod, integer and floating, with both roundings of the quotient:
// fmod=0 (floor: the remainder takes B's sign, numpy's mod) and fmod=1 (truncation: A's sign, C's fmod).
#include <cmath>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;

// Floating remainders in double, which holds every f16, bf16 and f32 value and their sums exactly
// enough that one rounding to the type gives the type's own arithmetic. ONNX's special values follow
// from std::fmod: a zero divisor or an infinite dividend gives NaN; an infinite divisor gives A, or
// B where the floor moves a remainder of the other sign past it.
double floating_mod(double a, double b, bool truncated) {
    const double r = std::fmod(a, b);
    if (truncated) return r;
    if (r == 0) return std::copysign(0.0, b);
    return (r < 0) != (b < 0) ? r + b : r;
}

std::int64_t integer_mod(std::int64_t a, std::int64_t b, bool truncated) {
    if (b == -1) return 0;  // a % -1, which overflows for the smallest a
    const std::int64_t r = a % b;
    return !truncated && r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

// Computed on the host, as Div's integer quotient is: fluxion has no floor or remainder op. The
// result goes back to A's device; it has no gradient, and fx::compile refuses it where its operands
// change from call to call.
Ts mod(const Node& n, const Ts& in) {
    const Tensor &a = in.at(0), &b = in.at(1);
    values_read_on_host(n, "its operands (to take their remainders)");
    const std::int64_t fmod = n.i("fmod", 0);
    if (fmod != 0 && fmod != 1) n.unsupported("fmod=" + std::to_string(fmod) + " (it is 0 or 1)");
    const Shape shape = broadcast_shape(a.shape(), b.shape());
    const Tensor x = a.expand(shape).contiguous(), y = b.expand(shape).contiguous();
    if (is_floating(a.dtype()) || is_floating(b.dtype())) {
        const auto p = x.to_vector<double>(), q = y.to_vector<double>();
        std::vector<double> r(p.size());
        for (std::size_t i = 0; i < r.size(); ++i) r[i] = floating_mod(p[i], q[i], fmod == 1);
        return {tensor(r, shape).to(a.dtype()).to(a.device())};
    }
    const auto p = host_ints(x), q = host_ints(y);
    std::vector<std::int64_t> r(p.size());
    for (std::size_t i = 0; i < r.size(); ++i) {
        if (q[i] == 0) throw ValueError("fx::onnx: " + n.label() + ": integer Mod by zero");
        r[i] = integer_mod(p[i], q[i], fmod == 1);
    }
    return {tensor(r, shape).to(a.dtype()).to(a.device())};
}

}  // namespace

void add_modulo_operators(std::map<std::string, Operator>& t) { t["Mod"] = mod; }

}  // namespace fluxion::onnx::detail
