// test_layers_dropout.cpp — Dropout along chosen axes (whole channels, PyTorch's Dropout2d) and
// AlphaDropout: the masks' structure, the statistics they keep, the identity while testing, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

TEST(Dropout, AlongChosenAxesDropsWholeChannels) {
    fx::seed(9);
    fx::Dropout d(0.5, {.dims = {0, 1}});
    d.mode = fx::Mode::train;
    const Tensor x = fx::ones({8, 16, 3, 3});
    const auto y = d(x).to_vector<float>();
    int dropped = 0;
    for (int c = 0; c < 8 * 16; ++c) {
        const float first = y[static_cast<std::size_t>(c * 9)];
        for (int i = 1; i < 9; ++i) ASSERT_EQ(y[static_cast<std::size_t>(c * 9 + i)], first) << "channel " << c;
        ASSERT_TRUE(first == 0.0f || first == 2.0f) << first;
        dropped += first == 0.0f;
    }
    EXPECT_GT(dropped, 128 / 4);
    EXPECT_LT(dropped, 3 * 128 / 4);
    EXPECT_EQ(d.describe(), "Dropout(0.5; dims=(0, 1))");
    d.mode = fx::Mode::test;
    EXPECT_EQ(d(x).to_vector<float>(), x.to_vector<float>());
    d.mode = fx::Mode::train;
    EXPECT_THROW(d(fx::ones({4})), fx::ValueError) << "axis 1 of a 1-dimensional input";
    // A negative axis counts from the end: one draw per feature column of {N, F}.
    fx::Dropout per_feature(0.5, {.dims = {-1}});
    per_feature.mode = fx::Mode::train;
    const auto z = per_feature(fx::ones({50, 6})).to_vector<float>();
    for (int n = 1; n < 50; ++n)
        for (int f = 0; f < 6; ++f) ASSERT_EQ(z[static_cast<std::size_t>(n * 6 + f)], z[static_cast<std::size_t>(f)]);
}

TEST(AlphaDropout, KeepsTheMeanAndVarianceOfStandardNormalInputs) {
    fx::seed(10);
    fx::AlphaDropout d(0.2);
    d.mode = fx::Mode::train;
    const Tensor x = fx::randn({200000}, {.dtype = fx::DType::f64});
    const auto y = d(x).to_vector<double>();
    const double mean = std::accumulate(y.begin(), y.end(), 0.0) / double(y.size());
    double var = 0;
    for (double v : y) var += (v - mean) * (v - mean);
    var /= double(y.size());
    EXPECT_NEAR(mean, 0.0, 0.01);
    EXPECT_NEAR(var, 1.0, 0.02);
    // Each element is either a·x + b (kept) or a·(-λα) + b (dropped): PyTorch's alpha_dropout.
    const double sat = -1.0507009873554805 * 1.6732632423543772, p = 0.2;
    const double a = 1 / std::sqrt((1 - p) * (1 + p * sat * sat)), b = -a * sat * p;
    const auto xv = x.to_vector<double>();
    std::size_t dropped = 0;
    for (std::size_t i = 0; i < 1000; ++i) {
        const bool kept = std::abs(y[i] - (a * xv[i] + b)) < 1e-12;
        const bool gone = std::abs(y[i] - (a * sat + b)) < 1e-12;
        ASSERT_TRUE(kept || gone) << i;
        dropped += gone && !kept;
    }
    EXPECT_GT(dropped, 100u);
    EXPECT_LT(dropped, 300u);
    EXPECT_EQ(d.describe(), "AlphaDropout(0.2)");
    d.mode = fx::Mode::test;
    EXPECT_EQ(d(x).to_vector<double>(), xv);
    EXPECT_THROW(fx::AlphaDropout(1.0), fx::ValueError);
}

}  // namespace
