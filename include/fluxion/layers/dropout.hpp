// fluxion/layers/dropout.hpp — Dropout and AlphaDropout. See Mode for when a layer trains; masks are
// drawn from fx::rand on the input's device, so fx::seed makes them reproducible.
//
//   fx::Dropout(0.5)                     // while training: each element zeroed with probability p,
//                                        // the rest scaled by 1 / (1 - p); while testing, the identity
//   fx::Dropout(0.2, {.dims = {0, 1}})   // whole channels of {N, C, H, W} (PyTorch's Dropout2d; Flux's dims)
//   fx::AlphaDropout(0.1)                // for selu networks: keeps mean 0 and variance 1 (PyTorch's, Flux's)
#pragma once
#include <string>
#include <vector>

#include "fluxion/layers/layer.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

struct DropoutOptions {
    // The axes along which the mask varies (negative from the end); empty: every axis. Along the
    // others one draw is shared, so {0, 1} drops whole channels of {N, C, ...}.
    std::vector<int> dims = {};
};

class Dropout {
public:
    double p;
    std::vector<int> dims;
    Mode mode = Mode::automatic;

    explicit Dropout(double p, const DropoutOptions& options = {});  // 0 <= p < 1
    Tensor operator()(const Tensor& x) const;
    std::string describe() const;  // "Dropout(0.5)", "Dropout(0.5; dims=(0, 1))"
};

class AlphaDropout {
public:
    double p;
    Mode mode = Mode::automatic;

    explicit AlphaDropout(double p);  // 0 <= p < 1
    Tensor operator()(const Tensor& x) const;
    std::string describe() const;  // "AlphaDropout(0.1)"
};

}  // namespace fluxion

FLUXION_FUNCTOR_NO_FIELDS(fluxion::Dropout);
FLUXION_FUNCTOR_NO_FIELDS(fluxion::AlphaDropout);
