// dropout.cpp — Dropout as a product with a scaled random mask.
#include "fluxion/layers/dropout.hpp"

#include <sstream>

#include "fluxion/ops.hpp"

namespace fluxion {

Dropout::Dropout(double p_) : p(p_) {
    if (!(p >= 0 && p < 1)) throw ValueError(describe() + ": p must be in [0, 1)");
}

std::string Dropout::describe() const {
    std::ostringstream s;
    s << "Dropout(" << p << ")";
    return s.str();
}

Tensor Dropout::operator()(const Tensor& x) const {
    if (!x.defined()) throw ValueError(describe() + ": the input is an empty tensor");
    if (p == 0 || !training(mode)) return x;
    TensorOptions o{.dtype = x.dtype(), .device = x.device()};
    Tensor keep = ge(rand(x.shape(), o), scalar(p, o));
    return x * (cast(keep, x.dtype()) * (1 / (1 - p)));
}

}  // namespace fluxion
