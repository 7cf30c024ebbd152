// conv_bn.cpp — the convolution-and-BatchNorm pair of the zoo's MobileNets and EfficientNet.
#include "core/models/conv_bn.hpp"

#include <utility>

namespace fluxion::models {

ConvBN conv_bn(std::int64_t k, std::int64_t in, std::int64_t out, Activation act, std::int64_t stride,
               std::int64_t groups, const BatchNormOptions& norm) {
    return {Conv({k, k}, in, out,
                 {.stride = stride, .pad = (k - 1) / 2, .groups = groups, .bias = false, .init = kaiming_normal}),
            BatchNorm(out, std::move(act), norm)};
}

Tensor run(const ConvBN& cb, const Tensor& x) { return std::get<1>(cb)(std::get<0>(cb)(x)); }

void show(detail::Shower& s, const ConvBN& cb) {
    s.layer(std::get<0>(cb));
    s.layer(std::get<1>(cb));
}

}  // namespace fluxion::models
