// test_layers_scale.cpp — Scale, Bilinear, Maxout and PairwiseFusion: values against their formulas
// (Bilinear against PyTorch's F.bilinear where PyTorch runs), gradients against finite differences,
// printing as Flux prints, state names, errors, and every other device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "layer_reference.hpp"
#include "other_devices.hpp"
#include "torch_reference.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

using reference::wave;  // the reference scripts' inputs: sin(a·i + b)

template <class L> std::string printed(const L& l) {
    std::ostringstream out;
    out << l;
    return out.str();
}

TEST(Scale, ScalesAndShiftsAlongTheLastAxes) {
    fx::Scale s(3, fx::tanh);
    s.scale = fx::tensor(std::vector<double>{1, 2, 3});
    s.bias = fx::tensor(std::vector<double>{0.5, 0, -1});
    const Tensor x = wave({2, 3}, 0.4, 0.1);
    const auto y = s(x).to_vector<double>(), xv = x.to_vector<double>();
    const double k[] = {1, 2, 3}, c[] = {0.5, 0, -1};
    for (std::size_t i = 0; i < 6; ++i) EXPECT_NEAR(y[i], std::tanh(k[i % 3] * xv[i] + c[i % 3]), 1e-15);
    EXPECT_EQ(s.describe(), "Scale(3, tanh)");
    // Per channel of an image batch.
    fx::Scale channels({2, 1, 1});
    EXPECT_EQ(channels(fx::ones({4, 2, 5, 5})).shape(), (fx::Shape{4, 2, 5, 5}));
    EXPECT_EQ(channels.describe(), "Scale(2, 1, 1)");
    EXPECT_EQ(fx::Scale(4, {}, false).describe(), "Scale(4; bias=false)");
    EXPECT_THROW(s(fx::ones({2, 4})), fx::ShapeError);
    EXPECT_THROW(fx::Scale(0), fx::ValueError);
    EXPECT_TRUE(fx::testing::gradcheck([](const fx::Scale& l, const Tensor& v) { return fx::sum(fx::square(l(v))); }, s,
                                       x));
    std::vector<std::string> names;
    fx::visit_trainable(s, [&](const std::string& p, const Tensor&) { names.push_back(p); });
    EXPECT_EQ(names, (std::vector<std::string>{"scale", "bias"}));
}

TEST(Bilinear, MatchesItsFormulaAndPyTorch) {
    fx::Bilinear b(5, 4, 2);
    b.weight = wave({2, 5, 4}, 0.19, 0.7);
    b.bias = wave({2}, 1.1, 0.2);
    const Tensor x1 = wave({3, 5}, 0.37, 0.1), x2 = wave({3, 4}, 0.23, 0.5);
    const auto y = b(x1, x2).to_vector<double>();
    const auto w = b.weight.to_vector<double>(), bias = b.bias.to_vector<double>();
    const auto a = x1.to_vector<double>(), c = x2.to_vector<double>();
    for (int n = 0; n < 3; ++n)
        for (int k = 0; k < 2; ++k) {
            double want = bias[static_cast<std::size_t>(k)];
            for (int i = 0; i < 5; ++i)
                for (int j = 0; j < 4; ++j)
                    want += a[static_cast<std::size_t>(n * 5 + i)] * w[static_cast<std::size_t>((k * 5 + i) * 4 + j)] *
                            c[static_cast<std::size_t>(n * 4 + j)];
            EXPECT_NEAR(y[static_cast<std::size_t>(n * 2 + k)], want, 1e-14);
        }
    EXPECT_EQ(b.describe(), "Bilinear((5, 4) => 2)");
    EXPECT_EQ(b(x1.select(0, 0), x2.select(0, 0)).shape(), (fx::Shape{2})) << "one sample";
    EXPECT_THROW(b(x1, x1), fx::ShapeError);
    EXPECT_THROW(b(x1, x2.slice(0, 0, 2)), fx::ShapeError);
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const fx::Bilinear& l, const Tensor& u, const Tensor& v) { return fx::sum(fx::square(l(u, v))); }, b, x1, x2));

    const auto r = fx_test::run_torch_script(FLUXION_SOURCE_DIR "/tests/reference/torch_bilinear.py", "", "torch_bilinear");
    if (!fx_test::ran(r)) return;
    const Tensor weights = fx::cos(fx::arange(0, 6, 1, {.dtype = fx::DType::f64}) * 0.7).reshape({3, 2});
    auto [g_b, g1, g2] = fx::gradient(
        [&](const fx::Bilinear& l, const Tensor& u, const Tensor& v) { return fx::sum(l(u, v) * weights); }, b, x1, x2);
    fx_test::expect_close(y, r.results.at("out"), 1e-13, 1e-14, "Bilinear output");
    fx_test::expect_close(g1.to_vector<double>(), r.results.at("dx1"), 1e-13, 1e-14, "dx1");
    fx_test::expect_close(g2.to_vector<double>(), r.results.at("dx2"), 1e-13, 1e-14, "dx2");
    fx_test::expect_close(g_b.weight.to_vector<double>(), r.results.at("dw"), 1e-13, 1e-14, "dweight");
    fx_test::expect_close(g_b.bias.to_vector<double>(), r.results.at("db"), 1e-13, 1e-14, "dbias");
}

TEST(Maxout, TakesTheElementwiseMaximumOfItsLayers) {
    fx::seed(3);
    fx::Maxout m([] { return fx::Dense(4, 3); }, 3);
    ASSERT_EQ(m.layers.size(), 3u);
    EXPECT_NE(m.layers[0].weight.to_vector<float>(), m.layers[1].weight.to_vector<float>()) << "each draws its own";
    const Tensor x = fx::randn({5, 4});
    const Tensor want = fx::maximum(fx::maximum(m.layers[0](x), m.layers[1](x)), m.layers[2](x));
    EXPECT_EQ(m(x).to_vector<float>(), want.to_vector<float>());
    EXPECT_NE(printed(m).find("Maxout("), std::string::npos) << printed(m);
    EXPECT_NE(printed(m).find("Dense(4 => 3)"), std::string::npos) << printed(m);
    std::vector<std::string> names;
    fx::visit_trainable(m, [&](const std::string& p, const Tensor&) { names.push_back(p); });
    EXPECT_EQ(names.front(), "layers.0.weight");
    EXPECT_EQ(names.back(), "layers.2.bias");
    EXPECT_THROW(fx::Maxout<fx::Dense>(std::vector<fx::Dense>{}), fx::ValueError);
    EXPECT_TRUE(fx::testing::gradcheck([](const auto& l, const Tensor& v) { return fx::sum(fx::square(l(v))); }, m,
                                       fx::randn({2, 4}, {.dtype = fx::DType::f64})));
}

TEST(PairwiseFusion, FeedsEachOutputIntoTheNextLayer) {
    fx::seed(4);
    fx::PairwiseFusion p(std::plus<>(), fx::Dense(3, 3), fx::Dense(3, 3, fx::relu));
    const Tensor x1 = fx::randn({2, 3}), x2 = fx::randn({2, 3});
    const auto ys = p({x1, x2});
    ASSERT_EQ(ys.size(), 2u);
    const Tensor y1 = std::get<0>(p.layers)(x1);
    EXPECT_EQ(ys[0].to_vector<float>(), y1.to_vector<float>());
    EXPECT_EQ(ys[1].to_vector<float>(), std::get<1>(p.layers)(y1 + x2).to_vector<float>());
    EXPECT_EQ(p(x1).size(), 2u) << "one input for every layer";
    EXPECT_THROW(p(std::vector<Tensor>{x1}), fx::ValueError);
    EXPECT_NE(printed(p).find("PairwiseFusion("), std::string::npos) << printed(p);
}

TEST(ScaleAndBilinear, EveryOtherDeviceMatchesTheCpu) {
    ASSERT_TRUE(plugin_path_set);
    fx::seed(5);
    fx::Scale s(4, fx::relu);
    fx::Bilinear b(4, 3, 2, fx::tanh);
    const Tensor x = fx::randn({3, 4}), z = fx::randn({3, 3});
    for (const auto& d : fx::testing::other_devices()) {
        const auto got_s = (s | d)(x | d) | fx::cpu, got_b = (b | d)(x | d, z | d) | fx::cpu;
        const auto want_s = s(x).to_vector<float>(), want_b = b(x, z).to_vector<float>();
        const auto gs = got_s.to_vector<float>(), gb = got_b.to_vector<float>();
        for (std::size_t i = 0; i < gs.size(); ++i) EXPECT_NEAR(gs[i], want_s[i], 1e-6) << d.str();
        for (std::size_t i = 0; i < gb.size(); ++i) EXPECT_NEAR(gb[i], want_b[i], 1e-5) << d.str();
    }
}

}  // namespace
