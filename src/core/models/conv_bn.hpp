// conv_bn.hpp — the pieces that the zoo's MobileNets and EfficientNet share (inside the library
// only): torchvision's Conv2dNormActivation as a convolution and a BatchNorm that carries the
// activation, and the printing of the pooled classifier that follows their features.
#pragma once
#include <cstdint>
#include <tuple>

#include "fluxion/layers/conv.hpp"
#include "fluxion/layers/normalise.hpp"
#include "fluxion/layers/show.hpp"

namespace fluxion::models {

using ConvBN = std::tuple<Conv, BatchNorm>;

// A k×k convolution without bias (padding (k - 1) / 2, He normal, as torchvision initialises it),
// then a BatchNorm with `act` (none: {}).
ConvBN conv_bn(std::int64_t k, std::int64_t in, std::int64_t out, Activation act, std::int64_t stride = 1,
               std::int64_t groups = 1, const BatchNormOptions& norm = {});

Tensor run(const ConvBN& cb, const Tensor& x);

void show(detail::Shower& s, const ConvBN& cb);

// The head as Metalhead prints it: Chain(GlobalMeanPool(), Flatten(), layers...).
template <class... L> void show_pooled_head(detail::Shower& s, const L&... layers) {
    s.open("Chain");
    s.item("GlobalMeanPool()");
    s.item("Flatten()");
    (s.layer(layers), ...);
    s.close();
}

}  // namespace fluxion::models
