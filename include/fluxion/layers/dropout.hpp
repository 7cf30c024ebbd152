// fluxion/layers/dropout.hpp — Dropout(p): while training, zeroes each element with probability p
// and scales the rest by 1 / (1 - p); while testing, the identity. See Mode for when it trains.
// The mask is drawn from fx::rand on the input's device, so fx::seed makes it reproducible.
#pragma once
#include <string>

#include "fluxion/layers/layer.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

class Dropout {
public:
    double p;
    Mode mode = Mode::automatic;

    explicit Dropout(double p);  // 0 <= p < 1
    Tensor operator()(const Tensor& x) const;
    std::string describe() const;  // "Dropout(0.5)"
};

}  // namespace fluxion

FLUXION_FUNCTOR_NO_FIELDS(fluxion::Dropout);
