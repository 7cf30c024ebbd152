// scale.cpp — Scale (a broadcast product and sum) and Bilinear (one matrix product and a reduction).
#include "fluxion/layers/scale.hpp"

#include "core/layers/context.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

namespace {

std::string sizes(const Shape& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out;
}

}  // namespace

Scale::Scale(Shape shape, Activation act, bool with_bias, const Init& init) : activation(std::move(act)) {
    if (shape.empty())
        throw ValueError("Scale: give the scale's shape, e.g. Scale(4) or Scale({3, 1, 1})");
    for (auto d : shape)
        if (d < 1) throw ValueError("Scale(" + sizes(shape) + "): sizes must be positive");
    scale = init(shape);
    if (with_bias) bias = zeros(shape, {.dtype = scale.dtype(), .device = scale.device()});
}

std::string Scale::describe() const {
    std::string s = "Scale(" + sizes(scale.shape());
    if (!activation.is_identity()) s += ", " + activation.name();
    if (!bias.defined()) s += "; bias=false";
    return s + ")";
}

Tensor Scale::operator()(const Tensor& x) const {
    if (!x.defined()) throw ValueError(describe() + ": the input is an empty tensor");
    const Shape& s = scale.shape();
    bool fits = x.ndim() >= static_cast<int>(s.size());
    for (std::size_t i = 0; fits && i < s.size(); ++i) {
        const std::int64_t xd = x.shape(static_cast<int>(x.ndim() - s.size() + i));
        fits = s[i] == 1 || s[i] == xd;
    }
    if (!fits)
        throw ShapeError(describe() + ": the scale " + to_string(s) + " does not fit the last axes of the input " +
                         to_string(x.shape()));
    return detail::in_context(*this, [&] {
        Tensor y = x * scale;
        return activation(bias.defined() ? y + bias : y);
    });
}

Bilinear::Bilinear(std::int64_t in1, std::int64_t in2, std::int64_t out, Activation act, bool with_bias, const Init& init)
    : activation(std::move(act)) {
    if (in1 < 1 || in2 < 1 || out < 1)
        throw ValueError("Bilinear((" + std::to_string(in1) + ", " + std::to_string(in2) + ") => " + std::to_string(out) +
                         "): sizes must be positive");
    weight = init({out, in1, in2});
    if (with_bias) bias = zeros({out}, {.dtype = weight.dtype(), .device = weight.device()});
}

std::string Bilinear::describe() const {
    std::string s = "Bilinear((" + std::to_string(weight.shape(1)) + ", " + std::to_string(weight.shape(2)) +
                    ") => " + std::to_string(weight.shape(0));
    if (!activation.is_identity()) s += ", " + activation.name();
    if (!bias.defined()) s += "; bias=false";
    return s + ")";
}

Tensor Bilinear::operator()(const Tensor& x1, const Tensor& x2) const {
    const std::int64_t out = weight.shape(0), in1 = weight.shape(1), in2 = weight.shape(2);
    if (!x1.defined() || !x2.defined()) throw ValueError(describe() + ": an input is an empty tensor");
    const bool one = x1.ndim() == 1;
    if (x1.ndim() < 1 || x1.ndim() > 2 || x2.ndim() != x1.ndim() || x1.shape(-1) != in1 || x2.shape(-1) != in2 ||
        (!one && x1.shape(0) != x2.shape(0)))
        throw ShapeError(describe() + ": takes {N, " + std::to_string(in1) + "} and {N, " + std::to_string(in2) +
                         "} (or one sample of each), got " + to_string(x1.shape()) + " and " + to_string(x2.shape()));
    return detail::in_context(*this, [&] {
        const Tensor a = one ? x1.reshape({1, in1}) : x1, b = one ? x2.reshape({1, in2}) : x2;
        const std::int64_t n = a.shape(0);
        // x1 · W as {N, out, in2}, then the product with x2 summed over in2.
        Tensor w = weight.permute({1, 0, 2}).reshape({in1, out * in2});
        Tensor y = sum(matmul(a, w).reshape({n, out, in2}) * b.reshape({n, 1, in2}), -1);
        if (bias.defined()) y = y + bias;
        y = activation(y);
        return one ? y.reshape({out}) : y;
    });
}

}  // namespace fluxion
