// rrelu.cpp — the randomised leaky relu: a product with random slopes while training, leakyrelu
// with the mean slope otherwise.
#include "fluxion/layers/rrelu.hpp"

#include <cmath>
#include <sstream>

#include "fluxion/ops.hpp"

namespace fluxion {

RReLU::RReLU(double lo_, double hi_) : lo(lo_), hi(hi_) {
    if (!(std::isfinite(lo) && std::isfinite(hi) && 0 <= lo && lo <= hi))
        throw ValueError(describe() + ": the slopes need 0 <= lo <= hi, both finite");
}

std::string RReLU::describe() const {
    std::ostringstream s;
    s << "RReLU(" << lo << ", " << hi << ")";
    return s.str();
}

Tensor RReLU::operator()(const Tensor& x) const {
    if (!x.defined()) throw ValueError(describe() + ": the input is an empty tensor");
    if (!is_floating(x.dtype()))
        throw DTypeError(describe() + ": expected a floating-point input, got " + name(x.dtype()));
    if (!training(mode)) return leakyrelu(x, (lo + hi) / 2);
    TensorOptions o{.dtype = x.dtype(), .device = x.device()};
    Tensor slope = rand(x.shape(), o) * (hi - lo) + lo;
    return where(gt(x, zeros_like(x)), x, x * slope);  // NaN takes the slope's branch and stays NaN
}

Tensor rrelu(const Tensor& x, double lo, double hi) { return RReLU(lo, hi)(x); }

}  // namespace fluxion
