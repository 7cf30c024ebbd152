// test_backends.cpp — the layers, losses and optimisers on every other functional backend against
// the CPU: forward values, gradients of parameters and inputs, running statistics, and several
// optimiser steps with their state, in f64 and f32 (a device lacking a kernel for one of them,
// by fx::supports, fails; one taking no kernel of it is left out with its reason: other_devices.hpp).
// test_ops.cpp does the same op by op. The other backends are Vulkan (lavapipe here) and, on a GPU
// machine, CUDA; the TestHost plugin, a copy of the CPU's kernels, is not one of them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

using fx::testing::other_devices;

struct Tolerance {
    double rtol, atol;
};
// f64 agrees to rounding; f32 allows for GPU kernels summing in another order (and TF32 is off).
Tolerance tolerance(fx::DType t) { return t == fx::DType::f64 ? Tolerance{1e-10, 1e-12} : Tolerance{2e-4, 2e-5}; }

using Leaves = std::vector<std::pair<std::string, Tensor>>;
template <class T> Leaves leaves(const T& x) {
    Leaves out;
    fx::visit_tensors(x, [&](const std::string& path, const Tensor& t) {
        if (t.defined()) out.emplace_back(path, t);
    });
    return out;
}

// Every tensor leaf of `got` is on `dev` and equals the same leaf of `want` (on the CPU).
template <class T>
void expect_same(const T& want, const T& got, const fx::Device& dev, Tolerance tol, const std::string& what) {
    const Leaves a = leaves(want), b = leaves(got);
    ASSERT_EQ(a.size(), b.size()) << what;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const std::string where = what + " '" + a[i].first + "'";
        EXPECT_EQ(b[i].second.device(), dev) << where;
        ASSERT_EQ(b[i].second.shape(), a[i].second.shape()) << where;
        const auto x = a[i].second.to_vector<double>(), y = (b[i].second | fx::cpu).to_vector<double>();
        for (std::size_t j = 0; j < x.size(); ++j) {
            const bool close = std::abs(y[j] - x[j]) <= tol.atol + tol.rtol * std::abs(x[j]) ||
                               (std::isnan(x[j]) && std::isnan(y[j]));
            if (!close) {
                ADD_FAILURE() << where << " element " << j << ": " << y[j] << " on " << dev.str() << ", " << x[j]
                              << " on the CPU";
                break;
            }
        }
    }
}

template <class T> T with_dtype(const T& x, fx::DType dtype) {
    return fx::fmap([&](const Tensor& t) { return fx::is_floating(t.dtype()) ? t.to(dtype) : t; }, x);
}

// A scalar that weighs every output element differently, so that no gradient cancels by symmetry.
// The weights are computed on the CPU, so that every device gets the same ones: the sine of large
// arguments differs in its last places between devices, and a BatchNorm's bias gradient sums
// hundreds of thousands of them with much cancellation.
Tensor weighted(const Tensor& y) {
    Tensor w = fx::sin(fx::arange(0, double(y.numel()), 1, {.dtype = y.dtype()}) * 0.9 + 0.3) | y.device();
    return fx::sum(y * w.reshape(y.shape()));
}

// weighted(layer(x)) and its gradients, and the layer's state afterwards (running statistics), on
// the CPU and on each other device from the same starting point.
template <class L> void expect_layer(const std::string& name, const L& layer, const Tensor& x) {
    for (auto dtype : {fx::DType::f64, fx::DType::f32}) {
        const std::string what = name + " (" + fx::name(dtype) + ")";
        for (const auto& dev : other_devices(dtype)) {
            L on_cpu = fx::fmap([](const Tensor& t) { return t.clone(); }, with_dtype(layer, dtype));
            L on_dev = on_cpu | dev;
            const Tensor xin = fx::is_floating(x.dtype()) ? x.to(dtype) : x;
            const auto f = [](const L& l, const Tensor& v) { return weighted(l(v)); };
            const auto want = fx::withgradient(f, on_cpu, xin);
            const auto got = fx::withgradient(f, on_dev, xin | dev);
            const Tolerance tol = tolerance(dtype);
            expect_same(want.value, got.value, dev, tol, what + " value");
            expect_same(std::get<0>(want.grad), std::get<0>(got.grad), dev, tol, what + " gradient");
            if (fx::is_floating(x.dtype()))
                expect_same(std::get<1>(want.grad), std::get<1>(got.grad), dev, tol, what + " input gradient");
            expect_same(on_cpu, on_dev, dev, tol, what + " state after the call");
        }
    }
}

class Backends : public ::testing::Test {
protected:
    void SetUp() override {
        if (other_devices().empty()) GTEST_SKIP() << "no backend besides the CPU is functional";
    }
};

TEST_F(Backends, DenseAndConvolutions) {
    fx::seed(1);
    expect_layer("Dense", fx::Dense(6, 5, fx::tanh), fx::randn({4, 6}));
    expect_layer("Dense on one sample", fx::Dense(6, 3, fx::relu, false), fx::randn({6}));
    expect_layer("Conv", fx::Conv({3, 3}, 3, 8, fx::relu, {.pad = 1}), fx::randn({2, 3, 7, 6}));
    expect_layer("Conv strided, dilated, grouped", fx::Conv({3, 2}, 4, 6, {.stride = 2, .pad = 1, .dilation = {1, 2}, .groups = 2}),
                 fx::randn({2, 4, 9, 8}));
    expect_layer("ConvTranspose", fx::ConvTranspose({4, 4}, 4, 2, fx::tanh, {.stride = 2, .pad = 1}),
                 fx::randn({2, 4, 5, 5}));
    expect_layer("the seed's CNN",
                 fx::Chain(fx::Conv({5, 5}, 1, 16, fx::relu), fx::MaxPool({2, 2}), fx::Conv({3, 3}, 16, 8, fx::relu),
                           fx::MaxPool({4, 4}), fx::Flatten(), fx::Dense(32, 10)),
                 fx::randn({3, 1, 28, 28}));
}

// sin and cos of arguments far from zero, where GPU drivers' own reductions are coarse (an H100's
// Vulkan driver gave sin(226.2) off by 3e-5): within a few units in the last place of the CPU's.
TEST_F(Backends, SinAndCosOfLargeArgumentsMatchTheCpu) {
    const Tensor x = fx::arange(-20000.0, 20000.0, 0.37, {.dtype = fx::DType::f32});
    for (const auto& dev : other_devices(fx::DType::f32)) {
        for (const auto& [name, f] : {std::pair{"sin", &fx::sin}, std::pair{"cos", &fx::cos}}) {
            const auto want = f(x).to_vector<double>(), got = (f(x | dev) | fx::cpu).to_vector<double>();
            double worst = 0;
            std::size_t at = 0;
            for (std::size_t i = 0; i < want.size(); ++i)
                if (std::abs(got[i] - want[i]) > worst) worst = std::abs(got[i] - want[i]), at = i;
            EXPECT_LE(worst, 4e-6) << name << " on " << dev.str() << ": worst at x = " << x.to_vector<double>()[at]
                                   << ", " << got[at] << " against " << want[at] << " on the CPU";
        }
    }
}

TEST_F(Backends, PoolsAndReshapes) {
    fx::seed(2);
    const Tensor x = fx::randn({2, 3, 7, 6});
    expect_layer("MaxPool", fx::MaxPool({2, 2}), x);
    expect_layer("MaxPool overlapping, padded", fx::MaxPool({3, 3}, {.stride = 2, .pad = 1}), x);
    expect_layer("MeanPool", fx::MeanPool({3, 2}, {.stride = fx::Size2(2, 1), .pad = 1}), x);
    expect_layer("GlobalMeanPool", fx::GlobalMeanPool(), x);
    expect_layer("AdaptiveMeanPool", fx::AdaptiveMeanPool({3, 2}), x);
    expect_layer("GlobalMaxPool", fx::GlobalMaxPool(), x);
    expect_layer("AdaptiveMaxPool", fx::AdaptiveMaxPool({3, 4}), x);
    expect_layer("Flatten", fx::Flatten(), x);
}

TEST_F(Backends, NormalisationDropoutAndEmbedding) {
    fx::seed(3);
    fx::BatchNorm bn(3, fx::relu);
    bn.weight = fx::randn({3});
    bn.bias = fx::randn({3});
    fx::trainmode(bn);
    expect_layer("BatchNorm training (running statistics)", bn, fx::randn({4, 3, 5, 5}));
    fx::testmode(bn);
    expect_layer("BatchNorm testing", bn, fx::randn({4, 3}));
    fx::LayerNorm ln(fx::Shape{4});
    ln.weight = fx::randn({4});
    expect_layer("LayerNorm", ln, fx::randn({5, 4}));
    expect_layer("Embedding", fx::Embedding(7, 3), fx::tensor(std::vector<std::int64_t>{1, 6, 1, 0}, {2, 2}));
    // Dropout's mask is drawn on the host, so one seed gives every device the same mask.
    fx::Dropout drop(0.3);
    fx::trainmode(drop);
    fx::seed(4);
    const auto chain = fx::Chain(fx::Dense(5, 5), drop);
    for (auto dtype : {fx::DType::f64, fx::DType::f32}) {
        for (const auto& dev : other_devices(dtype)) {
            const auto on_cpu = with_dtype(chain, dtype);
            const Tensor x = fx::randn({3, 5}).to(dtype);
            const auto f = [](const auto& m, const Tensor& v) { return weighted(m(v)); };
            fx::seed(9);
            const auto want = fx::withgradient(f, on_cpu, x);
            fx::seed(9);
            const auto got = fx::withgradient(f, on_cpu | dev, x | dev);
            expect_same(want.value, got.value, dev, tolerance(dtype), "Dropout value");
            expect_same(std::get<0>(want.grad), std::get<0>(got.grad), dev, tolerance(dtype), "Dropout gradient");
        }
    }
}

// BatchNorm's training pass and the row normalisations, which a device may run as one kernel each
// way (the CPU's and Vulkan's): channels of many values and of few, {N, C} inputs, no affine step,
// relu or none, statistics far from zero, and the per-row statistics of LayerNorm, GroupNorm and
// InstanceNorm.
TEST_F(Backends, NormalisationKernelsOnManyShapes) {
    fx::seed(31);
    for (const bool relu : {false, true}) {
        const std::string act = relu ? " with relu" : "";
        fx::BatchNorm bn = relu ? fx::BatchNorm(5, fx::relu) : fx::BatchNorm(5);
        bn.weight = fx::randn({5});
        bn.bias = fx::randn({5});
        fx::trainmode(bn);
        expect_layer("BatchNorm on {N, C}" + act, bn, fx::randn({37, 5}));
        expect_layer("BatchNorm on 2×2 images" + act, bn, fx::randn({9, 5, 2, 2}));
        expect_layer("BatchNorm on 300 images of 33×31, mean 100" + act, bn, fx::randn({300, 5, 33, 31}) * 0.5 + 100);
    }
    fx::BatchNorm plain(4, {.affine = false});
    fx::trainmode(plain);
    expect_layer("BatchNorm without weight and bias", plain, fx::randn({6, 4, 7, 3}));
    fx::LayerNorm ln(fx::Shape{33});
    expect_layer("LayerNorm over 33 features", ln, fx::randn({3, 7, 33}) + 5);
    expect_layer("GroupNorm", fx::GroupNorm(8, 4), fx::randn({2, 8, 5, 5}));
    fx::InstanceNorm in(3, {.affine = true});
    fx::trainmode(in);
    expect_layer("InstanceNorm", in, fx::randn({2, 3, 6, 4}));
}

TEST_F(Backends, ActivationsAndContainers) {
    fx::seed(5);
    const Tensor x = fx::randn({3, 4});
    expect_layer("softmax, logsoftmax", fx::Chain(fx::softmax, fx::logsoftmax), x);
    expect_layer("activations", fx::Chain(fx::elu, fx::gelu, fx::swish, fx::softplus, fx::sigmoid, fx::leakyrelu), x);
    expect_layer("SkipConnection", fx::SkipConnection(fx::Dense(4, 4, fx::tanh), std::plus<>()), x);
    expect_layer("Parallel", fx::Parallel(fx::Concat{}, fx::Dense(4, 2), fx::Dense(4, 3, fx::tanh)), x);
    expect_layer("DynamicChain", fx::DynamicChain(fx::Dense(4, 3, fx::sigmoid), fx::Dense(3, 2)), x);
}

// Each loss's value and its gradient with respect to the prediction.
TEST_F(Backends, Losses) {
    fx::seed(6);
    const Tensor logits = fx::randn({4, 5}) * 3.0, labels = fx::onehot(fx::tensor(std::vector<std::int64_t>{0, 4, 2, 2}), 5);
    const Tensor probs = fx::softmax(fx::randn({4, 5})), bits = fx::rand({4, 5}) > fx::scalar(0.5);
    const Tensor target = fx::randn({4, 5});
    using Loss = std::function<Tensor(const Tensor&, const Tensor&)>;
    const std::vector<std::tuple<std::string, Loss, Tensor, Tensor>> cases{
        {"mse", [](const Tensor& a, const Tensor& b) { return fx::mse(a, b); }, logits, target},
        {"mae (sum)", [](const Tensor& a, const Tensor& b) { return fx::mae(a, b, {.agg = fx::Agg::sum}); }, logits, target},
        {"huber_loss", [](const Tensor& a, const Tensor& b) { return fx::huber_loss(a, b, {.delta = 0.5}); }, logits, target},
        {"crossentropy", [](const Tensor& a, const Tensor& b) { return fx::crossentropy(a, b); }, probs, labels},
        {"logitcrossentropy (none)",
         [](const Tensor& a, const Tensor& b) { return weighted(fx::logitcrossentropy(a, b, {.agg = fx::Agg::none})); },
         logits, labels},
        {"binarycrossentropy", [](const Tensor& a, const Tensor& b) { return fx::binarycrossentropy(a, b); },
         fx::sigmoid(logits), bits.to(fx::DType::f32)},
        {"logitbinarycrossentropy", [](const Tensor& a, const Tensor& b) { return fx::logitbinarycrossentropy(a, b); },
         logits, bits.to(fx::DType::f32)},
        {"kldivergence", [](const Tensor& a, const Tensor& b) { return fx::kldivergence(a, b); }, probs,
         fx::softmax(target)},
    };
    for (const auto& [name, loss, yhat, y] : cases) {
        for (auto dtype : {fx::DType::f64, fx::DType::f32}) {
            const Tensor p = yhat.to(dtype), t = y.to(dtype);
            const auto want = fx::withgradient([&](const Tensor& v) { return loss(v, t); }, p);
            for (const auto& dev : other_devices(dtype)) {
                const Tensor t_dev = t | dev;
                const auto got = fx::withgradient([&](const Tensor& v) { return loss(v, t_dev); }, p | dev);
                const std::string what = name + " (" + fx::name(dtype) + ")";
                expect_same(want.value, got.value, dev, tolerance(dtype), what + " value");
                expect_same(want.grad, got.grad, dev, tolerance(dtype), what + " gradient");
            }
        }
    }
}

// Three steps (or `steps`) of a rule on the CPU and on each device from the same model and data:
// parameters and the optimiser's state (moments, step counts) agree.
template <class Rule> void expect_steps(const std::string& name, const Rule& rule, int steps = 3) {
    fx::seed(7);
    const auto model = fx::Chain(fx::Dense(4, 6, fx::tanh), fx::Dense(6, 3));
    const Tensor x = fx::randn({5, 4}), y = fx::randn({5, 3});
    for (auto dtype : {fx::DType::f64, fx::DType::f32}) {
        for (const auto& dev : other_devices(dtype)) {
            auto on_cpu = fx::fmap([](const Tensor& t) { return t.clone(); }, with_dtype(model, dtype));
            auto on_dev = on_cpu | dev;
            auto opt_cpu = fx::setup(rule, on_cpu);
            auto opt_dev = fx::setup(rule, on_dev);
            const Tensor xc = x.to(dtype), yc = y.to(dtype), xd = xc | dev, yd = yc | dev;
            for (int step = 0; step < steps; ++step) {
                auto gc = fx::gradient([&](const auto& m) { return fx::mse(m(xc), yc); }, on_cpu);
                auto gd = fx::gradient([&](const auto& m) { return fx::mse(m(xd), yd); }, on_dev);
                fx::update(opt_cpu, on_cpu, std::get<0>(gc));
                fx::update(opt_dev, on_dev, std::get<0>(gd));
            }
            const std::string what = name + " (" + fx::name(dtype) + ")";
            expect_same(on_cpu, on_dev, dev, tolerance(dtype), what + " parameters");
            ASSERT_EQ(opt_cpu.params.size(), opt_dev.params.size()) << what;
            for (std::size_t i = 0; i < opt_cpu.params.size(); ++i) {
                const auto& a = opt_cpu.params[i];
                const auto& b = opt_dev.params[i];
                EXPECT_EQ(a.t, b.t) << what;
                expect_same(std::tuple{a.state1, a.state2, a.state3}, std::tuple{b.state1, b.state2, b.state3}, dev,
                            tolerance(dtype), what + " state of " + a.path);
            }
        }
    }
}

TEST_F(Backends, OptimiserRules) {
    expect_steps("Descent", fx::Descent{0.1});
    expect_steps("Momentum", fx::Momentum{});
    expect_steps("Nesterov", fx::Nesterov{});
    expect_steps("RMSProp", fx::RMSProp{});
    expect_steps("Adam", fx::Adam{.eta = 0.01});
    expect_steps("AdamW", fx::AdamW{.eta = 0.01, .lambda = 0.1});
    expect_steps("AMSGrad", fx::AMSGrad{.eta = 0.01});
    expect_steps("OAdam", fx::OAdam{.eta = 0.01});
    expect_steps("AdaGrad", fx::AdaGrad{});
    expect_steps("AdaDelta", fx::AdaDelta{});
    expect_steps("AdaMax", fx::AdaMax{.eta = 0.01});
    expect_steps("NAdam", fx::NAdam{.eta = 0.01});
    expect_steps("RAdam", fx::RAdam{.eta = 0.01}, 8);  // rectified from step 6: both branches
    expect_steps("AdaBelief", fx::AdaBelief{.eta = 0.01});
    expect_steps("Lion", fx::Lion{.eta = 0.01});
    expect_steps("Rprop", fx::Rprop{.eta = 0.01});
}

TEST_F(Backends, OptimiserModifiers) {
    expect_steps("WeightDecay, ClipGrad, Adam", fx::OptimiserChain(fx::WeightDecay{0.01}, fx::ClipGrad{0.05}, fx::Adam{}));
    expect_steps("ClipNorm, Momentum", fx::OptimiserChain(fx::ClipNorm{0.1}, fx::Momentum{}));
    expect_steps("SignDecay, Lion", fx::OptimiserChain(fx::SignDecay{0.1}, fx::Lion{.eta = 0.01}));
    expect_steps("Adam, WeightDecay", fx::OptimiserChain(fx::Adam{.eta = 0.01}, fx::WeightDecay{1e-3}));
}

}  // namespace

// The test backend plugin is a second device wherever no GPU is.
int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
