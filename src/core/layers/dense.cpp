// dense.cpp — Dense: checks the feature axis, then one matmul, the bias and the activation.
#include "fluxion/layers/dense.hpp"

#include "core/layers/context.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

Dense::Dense(std::int64_t in, std::int64_t out, Activation act, bool with_bias, const Init& init)
    : activation(std::move(act)) {
    if (in < 1 || out < 1)
        throw ValueError("Dense(" + std::to_string(in) + " => " + std::to_string(out) + "): sizes must be positive");
    weight = init({out, in});
    if (with_bias) bias = zeros({out}, {.dtype = weight.dtype(), .device = weight.device()});
}

Dense::Dense(Tensor w, Tensor b, Activation act) : weight(std::move(w)), bias(std::move(b)), activation(std::move(act)) {
    if (!weight.defined() || weight.ndim() != 2)
        throw ShapeError("Dense: the weight must have shape {out, in}, got " +
                         (weight.defined() ? to_string(weight.shape()) : std::string("an empty tensor")));
    if (bias.defined() && bias.shape() != Shape{weight.shape(0)})
        throw ShapeError("Dense: the bias must have shape {" + std::to_string(weight.shape(0)) + "} to match the weight " +
                         to_string(weight.shape()) + ", got " + to_string(bias.shape()));
}

std::string Dense::describe() const {
    std::string s = "Dense(" + std::to_string(in_features()) + " => " + std::to_string(out_features());
    if (!activation.is_identity()) s += ", " + activation.name();
    if (!bias.defined()) s += "; bias=false";
    return s + ")";
}

Tensor Dense::operator()(const Tensor& x) const {
    if (!x.defined()) throw ValueError(describe() + ": the input is an empty tensor");
    if (x.ndim() == 0 || x.shape(-1) != in_features())
        throw ShapeError(describe() + ": input has " + (x.ndim() ? std::to_string(x.shape(-1)) : std::string("no")) +
                         " features, expected " + std::to_string(in_features()) + " (input shape " +
                         to_string(x.shape()) + "; Dense takes " + detail::sample_or_batch({in_features()}) + ")");
    return detail::in_context(*this, [&] {
        return activation(linear(x, weight, bias));
    });
}

}  // namespace fluxion
