// activation.cpp — recognising the library's functions, so that models print their names.
#include "fluxion/layers/activation.hpp"

#include <utility>

#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

using Unary = Tensor (*)(const Tensor&);
using Axis = Tensor (*)(const Tensor&, int);
using Param = Tensor (*)(const Tensor&, double);

std::string unary_name(Unary f) {
    static const std::pair<Unary, const char*> names[] = {
        {relu, "relu"},         {sigmoid, "σ"},   {tanh, "tanh"}, {gelu, "gelu"}, {gelu_erf, "gelu_erf"}, {softplus, "softplus"},
        {swish, "swish"},       {exp, "exp"},     {log, "log"},   {abs, "abs"},   {square, "square"},
        {sqrt, "sqrt"},         {sin, "sin"},     {cos, "cos"},   {identity, "identity"},
    };
    for (auto [g, name] : names)
        if (g == f) return name;
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
