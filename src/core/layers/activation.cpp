// activation.cpp — recognising the library's functions, so that models print their names.
#include "fluxion/layers/activation.hpp"

#include <utility>

#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

using Unary = Tensor (*)(const Tensor&);
using Axis = Tensor (*)(const Tensor&, int);
using Param = Tensor (*)(const Tensor&, double);

// Every fx::name(x) of the op registry (core/elementwise_formulas.def) prints as its name; sigmoid
// as Flux prints it.
std::string unary_name(Unary f) {
    if (f == sigmoid) return "σ";
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

Activation::Activation(Axis f) : fn_([f](const Tensor& x) { return f(x, -1); }) {
    name_ = f == softmax ? "softmax" : f == logsoftmax ? "logsoftmax" : "λ";
}

Activation::Activation(Param f) {
    if (f == leakyrelu) {
        fn_ = [](const Tensor& x) { return leakyrelu(x); };
        name_ = "leakyrelu";
    } else if (f == elu) {
        fn_ = [](const Tensor& x) { return elu(x); };
        name_ = "elu";
    } else {
        throw ValueError("Activation: a function of (Tensor, double) other than fx::leakyrelu or fx::elu has no "
                         "known default for its second argument; pass a lambda that fixes it");
    }
}

}  // namespace fluxion
