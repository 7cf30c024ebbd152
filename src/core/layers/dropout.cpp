// dropout.cpp — Dropout as a product with a scaled random mask; AlphaDropout as an affine map of a
// mask that sends dropped elements to selu's negative saturation.
#include "fluxion/layers/dropout.hpp"

#include <cmath>
#include <sstream>

#include "fluxion/ops.hpp"

namespace fluxion {

namespace {

// The mask's shape: x's along `dims`, 1 along the others (every axis when dims is empty).
Shape mask_shape(const std::string& who, const Tensor& x, const std::vector<int>& dims) {
    if (dims.empty()) return x.shape();
    Shape shape(static_cast<std::size_t>(x.ndim()), 1);
    for (int d : dims) {
        const int a = d < 0 ? d + x.ndim() : d;
        if (a < 0 || a >= x.ndim())
            throw ValueError(who + ": dims holds axis " + std::to_string(d) + ", outside the input's " +
                             std::to_string(x.ndim()) + " axes (shape " + to_string(x.shape()) + ")");
        shape[static_cast<std::size_t>(a)] = x.shape(a);
    }
    return shape;
}

}  // namespace

Dropout::Dropout(double p_, const DropoutOptions& o) : p(p_), dims(o.dims) {
    if (!(p >= 0 && p < 1)) throw ValueError(describe() + ": p must be in [0, 1)");
}

std::string Dropout::describe() const {
    std::ostringstream s;
    s << "Dropout(" << p;
    if (!dims.empty()) {
        s << "; dims=(";
        for (std::size_t i = 0; i < dims.size(); ++i) s << (i ? ", " : "") << dims[i];
        s << ")";
    }
    s << ")";
    return s.str();
}

Tensor Dropout::operator()(const Tensor& x) const {
    if (!x.defined()) throw ValueError(describe() + ": the input is an empty tensor");
    const Shape shape = mask_shape(describe(), x, dims);
    if (p == 0 || !training(mode)) return x;
    TensorOptions o{.dtype = x.dtype(), .device = x.device()};
    Tensor keep = ge(rand(shape, o), scalar(p, o));
    return x * (cast(keep, x.dtype()) * (1 / (1 - p)));
}

AlphaDropout::AlphaDropout(double p_) : p(p_) {
    if (!(p >= 0 && p < 1)) throw ValueError(describe() + ": p must be in [0, 1)");
}

std::string AlphaDropout::describe() const {
    std::ostringstream s;
    s << "AlphaDropout(" << p << ")";
    return s.str();
}

Tensor AlphaDropout::operator()(const Tensor& x) const {
    if (!x.defined()) throw ValueError(describe() + ": the input is an empty tensor");
    if (p == 0 || !training(mode)) return x;
    // selu's saturation -λα; a and b restore mean 0 and variance 1 for standard normal inputs.
    constexpr double kSaturation = -1.0507009873554804934193349852946 * 1.6732632423543772848170429916717;
    const double a = 1 / std::sqrt((1 - p) * (1 + p * kSaturation * kSaturation)), b = -a * kSaturation * p;
    TensorOptions o{.dtype = x.dtype(), .device = x.device()};
    const Tensor keep = cast(ge(rand(x.shape(), o), scalar(p, o)), x.dtype());
    return (x * keep + (1 - keep) * kSaturation) * a + b;
}

}  // namespace fluxion
