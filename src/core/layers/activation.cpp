// activation.cpp — recognising the library's functions, so that models print their names.
#include "fluxion/layers/activation.hpp"

#include <functional>
#include <tuple>
#include <utility>

#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

using Unary = Tensor (*)(const Tensor&);
using Axis = Tensor (*)(const Tensor&, int);
using Param = Tensor (*)(const Tensor&, double);
using Param2 = Tensor (*)(const Tensor&, double, double);

// Every fx::name(x) of the op registry (core/elementwise_formulas.def) prints as its name; sigmoid,
// hardsigmoid and logsigmoid as Flux prints them.
std::string unary_name(Unary f) {
    if (f == sigmoid) return "σ";
    if (f == hardsigmoid) return "hardσ";
    if (f == logsigmoid) return "logσ";
    if (f == identity) return "identity";
#define FX_UNARY(name, code, reads, api, value, gradient) FX_NAME_##api(name)
#define FX_NAME_FN(name) \
    if (f == static_cast<Unary>(name)) return #name;
#define FX_NAME_OWN(name)
#include "core/elementwise_formulas.def"
#undef FX_NAME_FN
#undef FX_NAME_OWN
    return "λ";
}

}  // namespace

Activation::Activation(Unary f) : name_(unary_name(f)) {
    if (f != identity) fn_ = f;
}

bool Activation::is(Unary f) const {
    const Unary* held = fn_.target<Unary>();
    return held && *held == f;
}

Activation::Activation(Axis f) : fn_([f](const Tensor& x) { return f(x, -1); }) {
    name_ = f == softmax ? "softmax" : f == logsoftmax ? "logsoftmax" : "λ";
}

// The functions with parameters, at their defaults (a pointer does not carry them).
Activation::Activation(Param f) {
    using F = std::function<Tensor(const Tensor&)>;
    const std::tuple<Param, const char*, F> known[] = {
        {leakyrelu, "leakyrelu", [](const Tensor& x) { return leakyrelu(x); }},
        {elu, "elu", [](const Tensor& x) { return elu(x); }},
        {celu, "celu", [](const Tensor& x) { return celu(x); }},
        {softshrink, "softshrink", [](const Tensor& x) { return softshrink(x); }},
    };
    for (const auto& [g, name, fn] : known)
        if (f == g) {
            fn_ = fn;
            name_ = name;
            return;
        }
    throw ValueError("Activation: a function of (Tensor, double) other than fx::leakyrelu, fx::elu, fx::celu or "
                     "fx::softshrink has no known default for its second argument; pass a lambda that fixes it");
}

Activation::Activation(Param2 f) {
    using F = std::function<Tensor(const Tensor&)>;
    const std::tuple<Param2, const char*, F> known[] = {
        {hardtanh, "hardtanh", [](const Tensor& x) { return hardtanh(x); }},
        {trelu, "trelu", [](const Tensor& x) { return trelu(x); }},
        {rrelu, "rrelu", [](const Tensor& x) { return rrelu(x); }},
    };
    for (const auto& [g, name, fn] : known)
        if (f == g) {
            fn_ = fn;
            name_ = name;
            return;
        }
    throw ValueError("Activation: a function of (Tensor, double, double) other than fx::hardtanh, fx::trelu or "
                     "fx::rrelu has no known defaults for its other arguments; pass a lambda that fixes them");
}

}  // namespace fluxion
