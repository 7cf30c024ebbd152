// test_destructure.cpp — fx::destructure and its Restructure: the flat vector holds every trainable
// tensor in order, rebuilding gives the model back (or one holding new values), gradients flow
// through both directions, on the CPU and every other device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

const bool plugin_path_set = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

auto small_model() {
    fx::seed(11);
    return fx::Chain(fx::Dense(3, 4, fx::tanh), fx::BatchNorm(4), fx::Dense(4, 2));
}

TEST(Destructure, TheVectorHoldsEveryTrainableTensorInOrder) {
    auto m = small_model();
    auto [flat, re] = fx::destructure(m);
    // Dense 12 + 4, BatchNorm's scale and shift 4 + 4 (not its running statistics), Dense 8 + 2.
    ASSERT_EQ(flat.shape(), (fx::Shape{34}));
    std::vector<float> expected;
    fx::visit_trainable(m, [&](const std::string&, const Tensor& t) {
        for (float v : t.to_vector<float>()) expected.push_back(v);
    });
    EXPECT_EQ(flat.to_vector<float>(), expected);
    // Rebuilding from the same vector gives the same model; from another, that one's values.
    const Tensor x = fx::randn({5, 3});
    fx::testmode(m);
    auto same = re(flat);
    fx::testmode(same);
    EXPECT_EQ(same(x).to_vector<float>(), m(x).to_vector<float>());
    auto halved = re(flat * 0.5);
    EXPECT_EQ(std::get<0>(halved.layers).weight.to_vector<float>(),
              (std::get<0>(m.layers).weight * 0.5).to_vector<float>());
    EXPECT_EQ(std::get<1>(halved.layers).running_mean.to_vector<float>(),
              std::get<1>(m.layers).running_mean.to_vector<float>())
        << "running statistics come from the template model";
}

TEST(Destructure, GradientsFlowThroughTheVector) {
    auto m = fx::Chain(fx::Dense(3, 4, fx::tanh), fx::Dense(4, 2));
    auto [flat, re] = fx::destructure(m);
    const Tensor x = fx::randn({5, 3}), y = fx::randn({5, 2});
    auto [g_flat] = fx::gradient([&](const Tensor& p) { return fx::mse(re(p)(x), y); }, flat);
    auto [g_model] = fx::gradient([&](const decltype(m)& model) { return fx::mse(model(x), y); }, m);
    auto [g_expected, unused] = fx::destructure(g_model);
    ASSERT_EQ(g_flat.shape(), flat.shape());
    const auto a = g_flat.to_vector<float>(), b = g_expected.to_vector<float>();
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6f) << "element " << i;
}

TEST(Destructure, WrongLengthsAndMixedTypesAreRefused) {
    auto m = small_model();
    auto [flat, re] = fx::destructure(m);
    EXPECT_THROW(re(fx::zeros({33})), fx::ShapeError);
    EXPECT_THROW(re(fx::zeros({34, 1})), fx::ShapeError);
    auto mixed = fx::Chain(fx::Dense(2, 2), fx::f64(fx::Dense(2, 2)));
    EXPECT_THROW(fx::destructure(mixed), fx::DTypeError);
}

TEST(Destructure, OnEveryOtherDeviceTheVectorStaysThere) {
    ASSERT_TRUE(plugin_path_set);
    for (const auto& d : fx::testing::other_devices()) {
        auto m = small_model() | d;
        auto [flat, re] = fx::destructure(m);
        EXPECT_EQ(flat.device(), d);
        auto [cpu_flat, cpu_re] = fx::destructure(small_model());
        EXPECT_EQ((flat | fx::cpu).to_vector<float>(), cpu_flat.to_vector<float>()) << d.str();
        EXPECT_EQ(std::get<2>(re(flat).layers).weight.device(), d);
    }
}

}  // namespace
