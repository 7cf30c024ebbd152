// layer_reference.hpp — rebuilding the inputs of tests/reference/torch_layers.py and summarising
// outputs the way it prints them, so layer outputs can be compared with PyTorch's numbers.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fluxion/functor.hpp"
#include "fluxion/ops.hpp"

namespace reference {

namespace fx = fluxion;

// sin(a·i + b) over the flattened index i, in f64.
inline fx::Tensor wave(const fx::Shape& shape, double a, double b) {
    auto n = fx::numel(shape);
    return fx::sin(fx::arange(0, double(n), 1, {.dtype = fx::DType::f64}) * a + b).reshape(shape);
}

// Every floating tensor of a layer in f64.
template <class L> L f64(const L& layer) {
    return fx::fmap([](const fx::Tensor& t) { return t.to(fx::DType::f64); }, layer);
}

// Compares y with the script's line: shape, Σ y_i·cos(0.7 i), and the first three values.
inline void expect_matches(const fx::Tensor& y, const fx::Shape& shape, double checksum,
                           const std::vector<double>& first) {
    ASSERT_EQ(y.shape(), shape);
    fx::Tensor flat = y.to(fx::DType::f64).reshape({-1});
    fx::Tensor w = fx::cos(fx::arange(0, double(flat.numel()), 1, {.dtype = fx::DType::f64}) * 0.7);
    EXPECT_NEAR(fx::sum(flat * w).item(), checksum, 1e-9 + 1e-9 * std::abs(checksum));
    auto v = flat.to_vector<double>();
    for (std::size_t i = 0; i < first.size(); ++i) EXPECT_NEAR(v[i], first[i], 1e-8) << "element " << i;
}

}  // namespace reference
