// test_layers_norm.cpp — BatchNorm, LayerNorm, Dropout, Embedding, SkipConnection and Parallel:
// outputs against PyTorch (tests/reference/torch_layers.py) and their train/test behaviour.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "fluxion/autodiff.hpp"
#include "fluxion/layers.hpp"
#include "fluxion/state.hpp"
#include "layer_reference.hpp"

namespace fx = fluxion;
using fx::Tensor;
using reference::expect_matches;
using reference::wave;

namespace {

template <class T> std::string shown(const T& x) {
    std::ostringstream s;
    s << x;
    return s.str();
}

void expect_near(const Tensor& t, const std::vector<double>& want, double tol) {
    auto got = t.to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

fx::BatchNorm reference_batchnorm() {
    auto bn = reference::f64(fx::BatchNorm(3));
    bn.weight = fx::tensor(std::vector<double>{1.5, 0.5, -1.0});
    bn.bias = fx::tensor(std::vector<double>{0.1, 0.2, 0.3});
    return bn;
}

// The running mean after the script's training step, kept from PyTorch.
std::vector<double> train_running_mean() {
    return reference::kept("batchnorm_train", "running_mean", {0.00131380851778, -0.00178592308797, 0.002207772144});
}

// ---- BatchNorm ----

TEST(BatchNorm, TrainingStepAndRunningStatisticsMatchPyTorch) {
    auto bn = reference_batchnorm();
    fx::trainmode(bn);
    Tensor x = wave({2, 3, 7, 6}, 0.37, 0.1);
    expect_matches(bn(x), "batchnorm_train", {2, 3, 7, 6}, 3.87110628616, {0.283350641, 1.0300168, 1.6470489});
    expect_near(bn.running_mean, train_running_mean(), 1e-12);
    expect_near(bn.running_var,
                reference::kept("batchnorm_train", "running_var", {0.950909828783, 0.950756930931, 0.950580910982}),
                1e-11);  // unbiased
    fx::testmode(bn);
    expect_matches(bn(x), "batchnorm_test", {2, 3, 7, 6}, 2.80514804765, {0.251545129, 0.794619181, 1.24340626});
}

TEST(BatchNorm, VectorsUseTheFeatureAxis) {
    auto bn = reference::f64(fx::BatchNorm(3));
    fx::trainmode(bn);
    expect_matches(bn(wave({5, 3}, 0.53, 0.2)), "batchnorm_vectors", {5, 3}, -6.44955820032,
                   {0.234023147, 0.757787713, 1.01886908});
    expect_near(bn.running_var,
                reference::kept("batchnorm_vectors", "running_var", {0.951143527727, 0.959480456872, 0.968156246799}),
                1e-11);
}

TEST(BatchNorm, AutomaticModeTrainsInsideAGradientOnly) {
    auto bn = reference_batchnorm();
    Tensor x = wave({2, 3, 7, 6}, 0.37, 0.1);
    Tensor outside = bn(x);  // running statistics: mean 0, var 1
    expect_near(bn.running_mean, {0, 0, 0}, 0);
    expect_near(outside.slice(1, 0, 1), (x.slice(1, 0, 1) / std::sqrt(1 + 1e-5) * 1.5 + 0.1).to_vector<double>(),
                1e-12);
    auto [loss, g] = fx::withgradient([&](const fx::BatchNorm& m) { return fx::sum(m(x)); }, bn);
    expect_near(bn.running_mean, train_running_mean(), 1e-12);  // updated in place
    expect_near(g.running_mean, {0, 0, 0}, 0);
    EXPECT_EQ(g.weight.shape(), (fx::Shape{3}));
}

TEST(BatchNorm, MomentumEpsilonAndNoAffineMatchPyTorch) {
    auto bn = reference::f64(fx::BatchNorm(3, {.momentum = 0.3, .epsilon = 0.5, .affine = false}));
    EXPECT_FALSE(bn.weight.defined());
    EXPECT_FALSE(bn.bias.defined());
    fx::trainmode(bn);
    Tensor x = wave({2, 3, 7, 6}, 0.37, 0.1);
    (void)bn(x);
    expect_matches(bn(x * 2.0), "batchnorm_options_train", {2, 3, 7, 6}, -0.765999049962,
                   {0.109396365, 0.55489556, 0.923048454});
    expect_near(
        bn.running_mean,
        reference::kept("batchnorm_options_train", "running_mean", {0.010641848994, -0.0144659770125, 0.0178829543664}),
        1e-12);
    expect_near(
        bn.running_var,
        reference::kept("batchnorm_options_train", "running_var", {1.20782858584, 1.20567272612, 1.20319084484}),
        1e-11);
    fx::testmode(bn);
    expect_matches(bn(x), "batchnorm_options_test", {2, 3, 7, 6}, -0.487157907258,
                   {0.0682498432, 0.338407702, 0.561661522});
    EXPECT_EQ(shown(fx::BatchNorm(3, {.momentum = 0.3, .epsilon = 0.5, .affine = false})),
              "BatchNorm(3, momentum=0.3, epsilon=0.5, affine=false)  # 0 parameters, plus 6 non-trainable");
}

TEST(BatchNorm, RunningStatisticsAreStateButNotTrainable) {
    fx::BatchNorm bn(4, fx::relu);
    auto st = fx::state(bn);
    ASSERT_EQ(st.size(), 4u);
    EXPECT_EQ(st[2].first, "running_mean");
    int trainable = 0;
    fx::visit_trainable(bn, [&](const std::string&, const Tensor&) { ++trainable; });
    EXPECT_EQ(trainable, 2);
    EXPECT_EQ(shown(bn), "BatchNorm(4, relu)  # 8 parameters, plus 8 non-trainable");
}

TEST(BatchNorm, OneSampleTrainsOnlyWithSpatialValuesAndTestsAlways) {
    fx::BatchNorm bn(3);
    fx::trainmode(bn);
    EXPECT_THROW(bn(fx::ones({3})), fx::ShapeError);
    // One sample {C, H, W} is normalised per channel over its 16 values (biased variance).
    Tensor x = fx::rand({3, 4, 4}, {.dtype = fx::DType::f64});
    fx::BatchNorm bn64 = bn;
    bn64.weight = fx::cast(bn.weight, fx::DType::f64), bn64.bias = fx::cast(bn.bias, fx::DType::f64);
    bn64.running_mean = fx::cast(bn.running_mean, fx::DType::f64),
    bn64.running_var = fx::cast(bn.running_var, fx::DType::f64);
    Tensor y = bn64(x);
    ASSERT_EQ(y.shape(), (fx::Shape{3, 4, 4}));
    Tensor mu = fx::mean(x.reshape({3, 16}), 1, true), var = fx::mean(fx::square(x.reshape({3, 16}) - mu), 1, true);
    auto want = ((x.reshape({3, 16}) - mu) / fx::sqrt(var + bn.epsilon)).to_vector<double>(),
         got = y.to_vector<double>();
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
    // The running statistics moved by momentum 0.1 towards the sample's (unbiased variance).
    auto rm = bn64.running_mean.to_vector<double>(), rv = bn64.running_var.to_vector<double>();
    auto m = mu.to_vector<double>(), v = var.to_vector<double>();
    for (std::size_t c = 0; c < 3; ++c) {
        EXPECT_NEAR(rm[c], 0.1 * m[c], 1e-12);
        EXPECT_NEAR(rv[c], 0.9 + 0.1 * v[c] * 16 / 15, 1e-12);
    }
    fx::testmode(bn64);
    // Test mode uses the running statistics: (1 - running_mean) / sqrt(running_var + eps).
    Tensor t = bn64(fx::ones({3}, {.dtype = fx::DType::f64}));
    ASSERT_EQ(t.shape(), (fx::Shape{3}));
    for (std::size_t c = 0; c < 3; ++c)
        EXPECT_NEAR(t.to_vector<double>()[c], (1 - rm[c]) / std::sqrt(rv[c] + bn.epsilon), 1e-12);
    fx::testmode(bn);
    try {
        bn(fx::ones({2, 5}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("BatchNorm(3): input has 5 channels, expected 3"), std::string::npos)
            << e.what();
    }
}

TEST(BatchNorm, WithoutTrackedStatisticsAlwaysUsesTheBatch) {
    fx::BatchNorm bn(2, {.affine = false, .track_stats = false});
    EXPECT_TRUE(fx::state(bn).empty());
    Tensor y = bn(fx::tensor({1, 10, 3, 30}, {2, 2}));
    expect_near(y, {-1, -1, 1, 1}, 1e-4);
    EXPECT_EQ(shown(bn), "BatchNorm(2, affine=false, track_stats=false)");
}

// BatchNorm's training pass by its definition, in f64 with the library's ops: the statistics over
// every axis but 1 (biased variance), then the affine step.
Tensor batchnorm_definition(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
    Tensor mu = x, var;
    for (int a = x.ndim() - 1; a >= 0; --a)
        if (a != 1) mu = fx::mean(mu, a, true);
    var = fx::square(x - mu);
    for (int a = x.ndim() - 1; a >= 0; --a)
        if (a != 1) var = fx::mean(var, a, true);
    fx::Shape s(std::size_t(x.ndim()), 1);
    s[1] = x.shape(1);
    return (x - mu) / fx::sqrt(var + eps) * w.reshape(s) + b.reshape(s);
}

double max_abs(const Tensor& t) { return fx::max(fx::abs(t)).item<double>(); }

// On the CPU the training pass is one kernel each way (src/cpu/batch_norm.cpp), whose sums over a
// channel are kept in double. Checked in f32 against the definition in f64, value and gradients
// (of Σ y·g, g fixed), for each of the kernel's loop orders: many values per row (images), few
// (2×2 images) and one ({N, C}); the channels' means far from 0, where f32 sums of 65,536 values
// would lose the variance's digits.
TEST(BatchNorm, TrainingPassMatchesItsDefinitionInF64) {
    for (const fx::Shape& shape : {fx::Shape{64, 4, 32, 32}, fx::Shape{6, 5, 7, 9}, fx::Shape{16, 7, 2, 2},
                                   fx::Shape{33, 6}, fx::Shape{4, 3, 1, 40}}) {
        SCOPED_TRACE(fx::to_string(shape));
        fx::seed(21);
        const std::int64_t c = shape[1];
        fx::BatchNorm bn(c);
        bn.weight = fx::randn({c}), bn.bias = fx::randn({c});
        fx::trainmode(bn);
        const Tensor x = fx::randn(shape) * 3.0 + 100.0, g = fx::randn(shape);
        auto [y, grads] =
            fx::withgradient([&](const fx::BatchNorm& m, const Tensor& v) { return fx::sum(m(v) * g); }, bn, x);
        const auto& [gbn, gx] = grads;
        const auto f64 = [](const Tensor& t) { return fx::cast(t, fx::DType::f64); };
        auto [want, want_grads] = fx::withgradient(
            [&](const Tensor& v, const Tensor& w, const Tensor& b) {
                return fx::sum(batchnorm_definition(v, w, b, bn.epsilon) * f64(g));
            },
            f64(x), f64(bn.weight), f64(bn.bias));
        const auto& [wx, ww, wb] = want_grads;
        // The outputs are O(1) and the gradients' sums over a channel O(sqrt(values)).
        EXPECT_LT(max_abs(f64(bn(x)) - batchnorm_definition(f64(x), f64(bn.weight), f64(bn.bias), bn.epsilon)), 2e-5);
        EXPECT_LT(max_abs(f64(gx) - wx) / (max_abs(wx) + 1e-30), 1e-4);
        EXPECT_LT(max_abs(f64(gbn.weight) - ww) / max_abs(ww), 1e-5);
        EXPECT_LT(max_abs(f64(gbn.bias) - wb) / max_abs(wb), 1e-6);
        // The running statistics: the batch's mean and unbiased variance, momentum 0.1.
        const double count = double(x.numel() / c);
        const Tensor mu = fx::mean(f64(x).transpose(0, 1).reshape({c, -1}), 1);
        const Tensor var = fx::mean(fx::square(f64(x).transpose(0, 1).reshape({c, -1}) - mu.reshape({c, 1})), 1);
        EXPECT_LT(max_abs(f64(bn.running_mean) - mu * 0.19), 1e-4);  // two passes: bn(x) above
        EXPECT_LT(max_abs(f64(bn.running_var) - (0.81 + 0.19 * var * (count / (count - 1)))), 1e-4);
    }
}

// BatchNorm(c, relu) joins relu to its kernel: the bits of BatchNorm(c) followed by fx::relu, in
// value and in every gradient.
TEST(BatchNorm, ReluInTheKernelGivesTheBitsOfTheReluAfterIt) {
    for (const fx::Shape& shape : {fx::Shape{8, 5, 6, 6}, fx::Shape{8, 5, 2, 3}, fx::Shape{9, 5}}) {
        SCOPED_TRACE(fx::to_string(shape));
        fx::seed(22);
        fx::BatchNorm joined(5, fx::relu), apart(5);
        joined.weight = fx::randn({5}), joined.bias = fx::randn({5});
        apart.weight = joined.weight, apart.bias = joined.bias;
        fx::trainmode(joined), fx::trainmode(apart);
        const Tensor x = fx::randn(shape), g = fx::randn(shape);
        auto [a, ga] =
            fx::withgradient([&](const fx::BatchNorm& m, const Tensor& v) { return fx::sum(m(v) * g); }, joined, x);
        auto [b, gb] = fx::withgradient(
            [&](const fx::BatchNorm& m, const Tensor& v) { return fx::sum(fx::relu(m(v)) * g); }, apart, x);
        const auto bits = [](const Tensor& t) { return t.to_vector<float>(); };
        EXPECT_EQ(bits(joined(x)), bits(fx::relu(apart(x))));
        EXPECT_EQ(bits(std::get<1>(ga)), bits(std::get<1>(gb)));
        EXPECT_EQ(bits(std::get<0>(ga).weight), bits(std::get<0>(gb).weight));
        EXPECT_EQ(bits(std::get<0>(ga).bias), bits(std::get<0>(gb).bias));
        const auto out = bits(joined(x));
        EXPECT_GT(std::count(out.begin(), out.end(), 0.0f), 0);  // relu did cut something
    }
}

// A NaN stays in its channel: that channel's outputs, statistics and gradients are NaN, the others'
// are those of the same input without it.
TEST(BatchNorm, ANaNReachesOnlyItsChannel) {
    fx::seed(23);
    for (const fx::Shape& shape : {fx::Shape{4, 3, 5, 5}, fx::Shape{6, 3}}) {
        SCOPED_TRACE(fx::to_string(shape));
        fx::BatchNorm bn(3, fx::relu), clean(3, fx::relu);
        fx::trainmode(bn), fx::trainmode(clean);
        const Tensor x = fx::randn(shape);
        Tensor bad = x.clone();
        bad.select(1, 1).select(0, 2).reshape({-1}).slice(0, 0, 1).fill_(std::nan(""));
        auto [y, g] = fx::gradient([&](const fx::BatchNorm& m, const Tensor& v) { return fx::sum(m(v)); }, bn, bad);
        auto [yc, gc] = fx::gradient([&](const fx::BatchNorm& m, const Tensor& v) { return fx::sum(m(v)); }, clean, x);
        for (std::int64_t ch = 0; ch < 3; ++ch) {
            const auto out = bn(bad).select(1, ch).to_vector<float>(), want = clean(x).select(1, ch).to_vector<float>();
            const auto gx = g.select(1, ch).to_vector<float>(), gwant = gc.select(1, ch).to_vector<float>();
            for (std::size_t i = 0; i < out.size(); ++i) {
                if (ch == 1) {
                    EXPECT_TRUE(std::isnan(out[i]) && std::isnan(gx[i])) << i;
                } else {
                    EXPECT_EQ(out[i], want[i]) << ch << " " << i;
                    EXPECT_EQ(gx[i], gwant[i]) << ch << " " << i;
                }
            }
        }
        EXPECT_TRUE(std::isnan(bn.running_mean.to_vector<float>()[1]));
        EXPECT_TRUE(std::isnan(y.weight.to_vector<float>()[1]));
        EXPECT_FALSE(std::isnan(bn.running_mean.to_vector<float>()[0]) || std::isnan(y.weight.to_vector<float>()[2]));
    }
}

// ---- LayerNorm ----

TEST(LayerNorm, MatchesPyTorchOverTheLastAxes) {
    auto ln = reference::f64(fx::LayerNorm(fx::Shape{7, 6}));
    ln.weight = wave({7, 6}, 0.31, 1.0);
    ln.bias = wave({7, 6}, 0.17, 0.4);
    expect_matches(ln(wave({2, 3, 7, 6}, 0.37, 0.1)), "layernorm", {2, 3, 7, 6}, -12.4467515574,
                   {0.356556082, 0.989685254, 1.55622943});
    EXPECT_EQ(shown(fx::LayerNorm(fx::Shape{7, 6})), "LayerNorm((7, 6))  # 84 parameters");
}

// LayerNorm and GroupNorm normalise rows through BatchNorm's CPU kernel (each row a channel of one
// row): in f32 against the definition in f64, value and the input's gradient, for rows of few values
// (5) and many (64, and GroupNorm's 2 channels of 6 × 6), their means far from 0.
TEST(LayerNorm, RowsThroughTheKernelMatchTheDefinitionInF64) {
    const auto f64 = [](const Tensor& t) { return fx::cast(t, fx::DType::f64); };
    const auto definition = [](const Tensor& rows, double eps) {
        const Tensor mu = fx::mean(rows, 1, true), centred = rows - mu;
        return centred / fx::sqrt(fx::mean(fx::square(centred), 1, true) + eps);
    };
    fx::seed(24);
    for (std::int64_t features : {5, 64}) {
        SCOPED_TRACE(features);
        fx::LayerNorm ln(features, {}, {.affine = false});
        const Tensor x = fx::randn({7, 3, features}) * 2.0 - 50.0, g = fx::randn({7, 3, features});
        auto [gx] = fx::gradient([&](const Tensor& v) { return fx::sum(ln(v) * g); }, x);
        auto [wx] = fx::gradient(
            [&](const Tensor& v) {
                return fx::sum(definition(v.reshape({-1, features}), ln.epsilon) * f64(g).reshape({-1, features}));
            },
            f64(x));
        EXPECT_LT(max_abs(f64(ln(x)).reshape({-1, features}) - definition(f64(x).reshape({-1, features}), ln.epsilon)),
                  2e-5);
        EXPECT_LT(max_abs(f64(gx) - wx) / max_abs(wx), 1e-5);
    }
    fx::GroupNorm gn(4, 2);
    const Tensor x = fx::randn({3, 4, 6, 6}) + 20.0;
    EXPECT_LT(max_abs(f64(gn(x)).reshape({6, -1}) - definition(f64(x).reshape({6, -1}), gn.epsilon)), 2e-5);
}

TEST(LayerNorm, EpsilonAndNoAffineMatchPyTorch) {
    fx::LayerNorm ln(6, {}, {.epsilon = 0.5, .affine = false});
    EXPECT_FALSE(ln.weight.defined());
    EXPECT_FALSE(ln.bias.defined());
    expect_matches(ln(wave({2, 3, 7, 6}, 0.37, 0.1)), "layernorm_options", {2, 3, 7, 6}, 2.26078184749,
                   {-0.764394452, -0.309924249, 0.0656421307});
}

TEST(LayerNorm, NormalisesEachSampleAndChecksTheTrailingShape) {
    fx::LayerNorm ln(4);
    Tensor y = ln(fx::tensor({1, 2, 3, 4, 10, 10, 10, 10}, {2, 4}));
    expect_near(fx::mean(y, 1), {0, 0}, 1e-6);
    expect_near(y.select(0, 1), {0, 0, 0, 0}, 1e-6);
    try {
        ln(fx::ones({2, 5}));
        FAIL() << "no ShapeError";
    } catch (const fx::ShapeError& e) {
        EXPECT_NE(std::string(e.what()).find("LayerNorm(4): input has shape {2, 5}; expected it to end with {4}"),
                  std::string::npos)
            << e.what();
    }
}

// ---- Dropout ----

TEST(Dropout, ZeroesAboutPAndScalesTheRestWhileTraining) {
    fx::Dropout d(0.25);
    Tensor x = fx::ones({10000});
    EXPECT_EQ(d(x).to_vector<float>(), x.to_vector<float>());  // automatic, outside a gradient: identity
    fx::trainmode(d);
    fx::seed(11);
    auto v = d(x).to_vector<float>();
    int zeros = 0;
    for (float e : v) {
        if (e == 0) ++zeros;
        else EXPECT_FLOAT_EQ(e, 1 / 0.75f);
    }
    EXPECT_NEAR(zeros / 10000.0, 0.25, 0.02);
    fx::seed(11);
    EXPECT_EQ(d(x).to_vector<float>(), v);  // reproducible under fx::seed
    fx::testmode(d);
    EXPECT_EQ(d(x).to_vector<float>(), x.to_vector<float>());
    EXPECT_THROW(fx::Dropout(1.0), fx::ValueError);
    EXPECT_EQ(shown(d), "Dropout(0.25)");
}

TEST(Dropout, GradientFlowsOnlyThroughKeptElements) {
    fx::Dropout d(0.5);
    Tensor x = fx::ones({200});
    fx::seed(2);
    auto [y, g] = fx::withgradient([&](const Tensor& v) { return fx::sum(d(v)); }, x);
    auto gv = g.to_vector<float>();
    int kept = 0;
    for (float e : gv) {
        EXPECT_TRUE(e == 0 || e == 2.0f) << e;
        kept += e != 0;
    }
    EXPECT_NEAR(y.item(), 2.0 * kept, 1e-3);
}

// ---- Embedding ----

TEST(Embedding, SelectsRowsForIndicesOfAnyShape) {
    fx::Embedding e(5, 3);
    EXPECT_EQ(e.weight.shape(), (fx::Shape{5, 3}));
    Tensor idx = fx::tensor(std::vector<std::int64_t>{4, 0, 4, 2}, {2, 2});
    Tensor y = e(idx);
    EXPECT_EQ(y.shape(), (fx::Shape{2, 2, 3}));
    EXPECT_EQ(y.select(0, 0).select(0, 0).to_vector<float>(), e.weight.select(0, 4).to_vector<float>());
    EXPECT_EQ(shown(e), "Embedding(5 => 3)  # 15 parameters");
    auto [loss, g] = fx::withgradient([&](const fx::Embedding& m) { return fx::sum(m(idx)); }, e);
    expect_near(g.weight, {1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, 2, 2, 2}, 0);
}

TEST(Embedding, RejectsFloatIndicesAndOutOfRangeNamingTheLayer) {
    fx::Embedding e(5, 3);
    EXPECT_THROW(e(fx::ones({2})), fx::DTypeError);
    try {
        e(fx::tensor(std::vector<std::int64_t>{5}));
        FAIL() << "no ValueError";
    } catch (const fx::ValueError& err) {
        EXPECT_EQ(std::string(err.what()).rfind("Embedding(5 => 3): index_select: index 5 is out of range", 0), 0u)
            << err.what();
    }
}

// ---- SkipConnection and Parallel ----

TEST(SkipConnection, CombinesTheLayerOutputWithItsInput) {
    fx::Dense d(fx::tensor({2, 0, 0, 2}, {2, 2}));
    auto skip = fx::SkipConnection(d, std::plus<>());
    expect_near(skip(fx::tensor({1, 2})), {3, 6}, 0);
    auto st = fx::state(skip);
    ASSERT_EQ(st.size(), 1u);
    EXPECT_EQ(st[0].first, "layers.weight");
    auto lambda = fx::SkipConnection(fx::relu, [](const Tensor& a, const Tensor& b) { return a - b; });
    expect_near(lambda(fx::tensor({-1, 2})), {1, 0}, 0);
}

TEST(Parallel, AppliesEveryLayerToTheInputAndCombines) {
    fx::Dense a(fx::tensor({1, 1}, {1, 2})), b(fx::tensor({1, -1, 2, 0}, {2, 2}));
    auto cat = fx::Parallel(fx::Concat{}, a, b);
    Tensor y = cat(fx::tensor({3, 1, 1, 1}, {2, 2}));
    EXPECT_EQ(y.shape(), (fx::Shape{2, 3}));
    expect_near(y, {4, 2, 6, 2, 0, 2}, 0);
    auto sum3 = fx::Parallel(std::plus<>(), fx::relu, fx::identity, fx::relu);
    expect_near(sum3(fx::tensor({-1, 2})), {-1, 6}, 0);
    auto st = fx::state(cat);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[1].first, "layers.1.weight");
    EXPECT_EQ(shown(cat),
              "Parallel(\n"
              "  concat,\n"
              "  Dense(2 => 1; bias=false),  # 2 parameters\n"
              "  Dense(2 => 2; bias=false),  # 4 parameters\n"
              ")                             # Total: 2 arrays, 6 parameters, 24 bytes.");
}

}  // namespace
