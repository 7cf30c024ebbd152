// test_layers.cpp — Dense, Chain, DynamicChain, activations as layers, printing, fx::state,
// trainmode/testmode, and the errors layers raise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "fluxion/autodiff.hpp"
#include "fluxion/layers.hpp"
#include "fluxion/ops.hpp"
#include "fluxion/state.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

template <class T> std::string shown(const T& x) {
    std::ostringstream s;
    s << x;
    return s.str();
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

void expect_near(const Tensor& t, const std::vector<float>& want, float tol = 1e-5f) {
    auto got = values(t);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// ---- Dense ----

TEST(Dense, HoldsPyTorchLayoutWithZeroBias) {
    fx::Dense d(10, 5, fx::sigmoid);
    EXPECT_EQ(d.weight.shape(), (fx::Shape{5, 10}));
    EXPECT_EQ(d.bias.shape(), (fx::Shape{5}));
    for (float b : values(d.bias)) EXPECT_EQ(b, 0.0f);
    EXPECT_EQ(d.in_features(), 10);
    EXPECT_EQ(d.out_features(), 5);
}

TEST(Dense, ComputesActivationOfAffineMapForOneSampleAndABatch) {
    fx::Dense d(fx::tensor({1, 2, 3, 4, 5, 6}, {2, 3}), fx::tensor({0.5f, -1}), fx::relu);
    expect_near(d(fx::tensor({1, 0, -1})), {0.0f, 0.0f});  // {1-3+0.5, 4-6-1} -> relu
    Tensor batch = fx::tensor({1, 1, 1, 0, 1, 0}, {2, 3});
    Tensor y = d(batch);
    EXPECT_EQ(y.shape(), (fx::Shape{2, 2}));
    expect_near(y, {6.5f, 14.0f, 2.5f, 4.0f});
}

TEST(Dense, WithoutBiasHasNoBiasTensor) {
    fx::Dense d(3, 2, {}, false);
    EXPECT_FALSE(d.bias.defined());
    EXPECT_EQ(shown(d), "Dense(3 => 2; bias=false)  # 6 parameters");
    EXPECT_EQ(fx::state(d).size(), 1u);
}

TEST(Dense, WrongFeatureCountNamesLayerGivenAndExpected) {
    fx::Dense d(10, 5);
    try {
        d(fx::ones({3, 7}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("Dense(10 => 5): input has 7 features, expected 10"), std::string::npos) << m;
        EXPECT_NE(m.find("{3, 7}"), std::string::npos) << m;
        EXPECT_NE(m.find("{N, 10}"), std::string::npos) << m;
    }
}

// The test plugin (a second backend on the host, see main) stands in for a GPU.
const fx::Device host0{"TestHost", 0};

TEST(Dense, ErrorsFromOpsInsideCarryTheLayerName) {
    fx::Dense d(3, 2);
    try {
        d(fx::ones({3}) | host0);
        FAIL() << "no error for an input on another device";
    } catch (const fx::DeviceError& e) {
        std::string m = e.what();
        EXPECT_EQ(m.rfind("Dense(3 => 2): ", 0), 0u) << m;
        EXPECT_NE(m.find("TestHost:0"), std::string::npos) << m;
    }
}

TEST(Dense, ConstructorRejectsMismatchedTensors) {
    EXPECT_THROW(fx::Dense(fx::ones({2, 3}), fx::ones({3})), fx::ShapeError);
    EXPECT_THROW(fx::Dense(fx::ones({6})), fx::ShapeError);
    EXPECT_THROW(fx::Dense(0, 3), fx::ValueError);
}

TEST(Dense, InitialisationIsReproducibleUnderSeed) {
    fx::seed(42);
    fx::Dense a(4, 3);
    fx::seed(42);
    fx::Dense b(4, 3);
    EXPECT_EQ(values(a.weight), values(b.weight));
    fx::Dense c(4, 3);
    EXPECT_NE(values(a.weight), values(c.weight));
}

// ---- printing ----

TEST(Printing, DenseAsFlux) {
    EXPECT_EQ(shown(fx::Dense(10, 5, fx::sigmoid)), "Dense(10 => 5, σ)  # 55 parameters");
    EXPECT_EQ(shown(fx::Dense(5, 2)), "Dense(5 => 2)  # 12 parameters");
    EXPECT_EQ(shown(fx::Dense(784, 128, fx::relu)), "Dense(784 => 128, relu)  # 100_480 parameters");
}

TEST(Printing, ChainOneLayerPerLineAndTotal) {
    auto m = fx::Chain(fx::Dense(10, 5, fx::sigmoid), fx::Dense(5, 2), fx::softmax);
    EXPECT_EQ(shown(m),
              "Chain(\n"
              "  Dense(10 => 5, σ),  # 55 parameters\n"
              "  Dense(5 => 2),      # 12 parameters\n"
              "  softmax,\n"
              ")                     # Total: 4 arrays, 67 parameters, 268 bytes.");
}

TEST(Printing, NonTrainableCountedSeparately) {
    EXPECT_EQ(shown(fx::BatchNorm(3)), "BatchNorm(3)  # 6 parameters, plus 6 non-trainable");
    auto m = fx::Chain(fx::Dense(2, 3), fx::BatchNorm(3, fx::relu));
    std::string s = shown(m);
    EXPECT_NE(s.find("BatchNorm(3, relu),  # 6 parameters, plus 6 non-trainable"), std::string::npos) << s;
    EXPECT_NE(s.find("# Total: 4 trainable arrays, 15 parameters, plus 2 non-trainable, 6 parameters, 84 bytes."),
              std::string::npos)
        << s;
}

TEST(Printing, NestedContainersIndent) {
    auto m = fx::Chain(fx::SkipConnection(fx::Dense(2, 2), std::plus<>()), fx::Flatten());
    EXPECT_EQ(shown(m),
              "Chain(\n"
              "  SkipConnection(\n"
              "    Dense(2 => 2),  # 6 parameters\n"
              "    +,\n"
              "  ),\n"
              "  Flatten(),\n"
              ")                   # Total: 2 arrays, 6 parameters, 24 bytes.");
}

TEST(Printing, LargeTotalsInKiB) {
    auto m = fx::Chain(fx::Dense(100, 100));
    EXPECT_NE(shown(m).find("10_100 parameters, 39.453 KiB."), std::string::npos) << shown(m);
}

// ---- activations as layers ----

TEST(Activation, FunctionsBecomeLayersWithNames) {
    auto m = fx::Chain(fx::relu, fx::softmax, fx::leakyrelu, fx::σ);
    EXPECT_EQ(std::get<0>(m.layers).name(), "relu");
    EXPECT_EQ(std::get<1>(m.layers).name(), "softmax");
    EXPECT_EQ(std::get<2>(m.layers).name(), "leakyrelu");
    EXPECT_EQ(std::get<3>(m.layers).name(), "σ");
    Tensor x = fx::tensor({-1, 0, 2}, {1, 3});
    expect_near(fx::Chain(fx::relu)(x), {0, 0, 2});
    expect_near(fx::Chain(fx::leakyrelu)(x), {-0.01f, 0, 2});
    expect_near(fx::Chain(fx::elu)(x), {std::exp(-1.0f) - 1, 0, 2});
}

TEST(Activation, SoftmaxLayerActsOnTheFeatureAxis) {
    Tensor x = fx::tensor({1, 2, 3, 1, 1, 1}, {2, 3});
    Tensor y = fx::Chain(fx::softmax)(x);
    expect_near(fx::sum(y, 1), {1, 1});
    expect_near(y.select(0, 1), {1 / 3.0f, 1 / 3.0f, 1 / 3.0f});
    expect_near(fx::Chain(fx::logsoftmax)(x), values(fx::log(y)));
}

TEST(Activation, LambdasAreLayersAndUnknownTwoArgumentFunctionsAreRefused) {
    auto m = fx::Chain(fx::Dense(2, 2), [](const Tensor& x) { return x * 2.0; });
    EXPECT_EQ(std::get<1>(m.layers).name(), "λ");
    expect_near(std::get<1>(m.layers)(fx::ones({2})), {2, 2});
    Tensor (*odd)(const Tensor&, double) = [](const Tensor& x, double) { return x; };
    EXPECT_THROW(fx::Activation{odd}, fx::ValueError);
}

// ---- Chain ----

TEST(Chain, AppliesLayersInOrderAndNamesStateLayersI) {
    fx::seed(1);
    auto m = fx::Chain(fx::Dense(10, 5, fx::sigmoid), fx::Dense(5, 2), fx::softmax);
    Tensor x = fx::rand({10});
    const auto& [d1, d2, sm] = m.layers;
    expect_near(m(x), values(sm(d2(d1(x)))));
    Tensor batch = fx::rand({4, 10});
    EXPECT_EQ(m(batch).shape(), (fx::Shape{4, 2}));

    auto st = fx::state(m);
    ASSERT_EQ(st.size(), 4u);
    EXPECT_EQ(st[0].first, "layers.0.weight");
    EXPECT_EQ(st[1].first, "layers.0.bias");
    EXPECT_EQ(st[2].first, "layers.1.weight");
    EXPECT_EQ(st[3].first, "layers.1.bias");
    EXPECT_TRUE(st[2].second.is_same(d2.weight));  // handles on the model's own tensors
}

TEST(Chain, FmapMapsEveryParameterAndKeepsTheType) {
    auto m = fx::Chain(fx::Dense(3, 2), fx::relu, fx::Dense(2, 1));
    auto doubled = fx::fmap([](const Tensor& t) { return t * 2.0 + 1.0; }, m);
    static_assert(std::is_same_v<decltype(doubled), decltype(m)>);
    expect_near(std::get<0>(doubled.layers).bias, {1, 1});
    expect_near(std::get<0>(m.layers).bias, {0, 0});  // the original is untouched
}

TEST(Chain, GradientHasTheModelsType) {
    auto m = fx::Chain(fx::Dense(fx::tensor({1, 2}, {1, 2}), fx::tensor({0.0f})), fx::Dense(fx::tensor({3}, {1, 1})));
    Tensor x = fx::tensor({1, 1});
    auto [loss, g] = fx::withgradient([&](const auto& model) { return fx::sum(model(x)); }, m);
    static_assert(std::is_same_v<decltype(g), decltype(m)>);
    EXPECT_FLOAT_EQ(loss.item<float>(), 9.0f);
    expect_near(std::get<0>(g.layers).weight, {3, 3});
    expect_near(std::get<0>(g.layers).bias, {3});
    expect_near(std::get<1>(g.layers).weight, {3});
}

TEST(Chain, MovesBetweenDevicesAndRunsThere) {
    auto m = fx::Chain(fx::Dense(3, 2), fx::relu) | host0;
    EXPECT_EQ(std::get<0>(m.layers).weight.device(), host0);
    EXPECT_EQ(std::get<0>(m.layers).bias.device(), host0);
    Tensor y = m(fx::ones({3}) | host0);
    EXPECT_EQ(y.device(), host0);
    auto back = m | fx::cpu;
    EXPECT_TRUE(std::get<0>(back.layers).weight.device().is_cpu());
    expect_near(y | fx::cpu, values(back(fx::ones({3}))));
}

// ---- DynamicChain ----

TEST(DynamicChain, LayersChosenAtRunTimeBehaveAsAChain) {
    fx::seed(3);
    fx::DynamicChain m;
    for (int i = 0; i < 3; ++i) m.push_back(fx::Dense(4, 4, fx::relu));
    m.push_back(fx::Dense(4, 1)).push_back(fx::sigmoid);
    ASSERT_EQ(m.size(), 5u);
    Tensor x = fx::rand({2, 4});
    Tensor want = x;
    for (int i = 0; i < 4; ++i) want = m[i].as<fx::Dense>()(want);
    expect_near(m(x), values(fx::sigmoid(want)));
    EXPECT_TRUE(m[4].is<fx::Activation>());
    EXPECT_THROW(m[4].as<fx::Dense>(), fx::ValueError);
}

TEST(DynamicChain, StateFmapGradientAndPrintingReachTheErasedLayers) {
    fx::DynamicChain m(fx::Dense(2, 3), fx::BatchNorm(3));
    m.push_back(fx::Chain(fx::Dense(3, 1), fx::relu));
    auto st = fx::state(m);
    std::vector<std::string> names;
    for (auto& [n, t] : st) names.push_back(n);
    EXPECT_EQ(names, (std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                                               "layers.1.running_mean", "layers.1.running_var",
                                               "layers.2.layers.0.weight", "layers.2.layers.0.bias"}));

    auto copy = fx::fmap([](const Tensor& t) { return fx::zeros_like(t); }, m);
    expect_near(copy[0].as<fx::Dense>().weight, std::vector<float>(6, 0.0f));
    EXPECT_NE(values(m[0].as<fx::Dense>().weight), std::vector<float>(6, 0.0f));  // a deep copy

    Tensor x = fx::ones({4, 2});
    auto [loss, g] = fx::withgradient([&](const fx::DynamicChain& model) { return fx::sum(model(x)); }, m);
    EXPECT_EQ(g.size(), 3u);
    EXPECT_EQ(g[0].as<fx::Dense>().weight.shape(), (fx::Shape{3, 2}));

    std::string s = shown(m);
    EXPECT_NE(s.find("DynamicChain(\n  Dense(2 => 3),"), std::string::npos) << s;
    EXPECT_NE(s.find("  Chain(\n    Dense(3 => 1),"), std::string::npos) << s;
    EXPECT_NE(s.find("Total: 6 trainable arrays, 19 parameters, plus 2 non-trainable, 6 parameters"), std::string::npos)
        << s;
}

TEST(DynamicChain, CopiesAreIndependent) {
    fx::DynamicChain a(fx::Dropout(0.5));
    fx::DynamicChain b = a;
    fx::testmode(b);
    EXPECT_EQ(b[0].as<fx::Dropout>().mode, fx::Mode::test);
    EXPECT_EQ(a[0].as<fx::Dropout>().mode, fx::Mode::automatic);
}

// ---- modes ----

struct Net {
    fx::Chain<fx::Dense, fx::Dropout> body;
    fx::DynamicChain head;
};

}  // namespace

FLUXION_FUNCTOR(Net, body, head);

namespace {

TEST(Mode, TrainmodeAndTestmodeReachEveryLayerWithAMode) {
    Net net{fx::Chain(fx::Dense(2, 2), fx::Dropout(0.3)), fx::DynamicChain(fx::BatchNorm(2))};
    fx::trainmode(net);
    EXPECT_EQ(std::get<1>(net.body.layers).mode, fx::Mode::train);
    EXPECT_EQ(net.head[0].as<fx::BatchNorm>().mode, fx::Mode::train);
    fx::testmode(net);
    EXPECT_EQ(std::get<1>(net.body.layers).mode, fx::Mode::test);
    EXPECT_EQ(net.head[0].as<fx::BatchNorm>().mode, fx::Mode::test);
    fx::automode(net);
    EXPECT_EQ(net.head[0].as<fx::BatchNorm>().mode, fx::Mode::automatic);
}

TEST(Mode, AutomaticTrainsOnlyInsideAGradient) {
    EXPECT_FALSE(fx::training(fx::Mode::automatic));
    EXPECT_TRUE(fx::training(fx::Mode::train));
    bool inside = false;
    fx::gradient(
        [&](const Tensor& x) {
            inside = fx::training(fx::Mode::automatic);
            return fx::sum(x);
        },
        fx::ones({1}));
    EXPECT_TRUE(inside);
    EXPECT_FALSE(fx::training(fx::Mode::test));
}

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
