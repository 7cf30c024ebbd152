// fluxion/layers/rrelu.hpp — RReLU(lo, hi): fx::rrelu as a layer, PyTorch's nn.RReLU. While
// training, each negative element is scaled by its own slope drawn uniformly from [lo, hi]; while
// testing, by the mean slope (lo + hi) / 2. Its `mode` says when it trains (Mode; trainmode and
// testmode set it), where fx::rrelu and an activation fx::rrelu always follow Mode::automatic.
#pragma once
#include <string>

#include "fluxion/layers/layer.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

class RReLU {
public:
    double lo, hi;
    Mode mode = Mode::automatic;

    explicit RReLU(double lo = 1.0 / 8, double hi = 1.0 / 3);  // 0 <= lo <= hi, finite
    Tensor operator()(const Tensor& x) const;
    std::string describe() const;  // "RReLU(0.125, 0.333333)"
};

}  // namespace fluxion

FLUXION_FUNCTOR_NO_FIELDS(fluxion::RReLU);
