// fluxion/layers/flatten.hpp — images to feature vectors, between convolutional and Dense layers:
// one image {C, H, W} -> {C·H·W}, a batch {N, C, H, W} -> {N, C·H·W}; vectors {F} and batches of
// vectors {N, F} pass unchanged.
#pragma once
#include <string>

#include "fluxion/layers/layer.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

class Flatten {
public:
    Tensor operator()(const Tensor& x) const;
    std::string describe() const { return "Flatten()"; }
};

}  // namespace fluxion

FLUXION_FUNCTOR_NO_FIELDS(fluxion::Flatten);
