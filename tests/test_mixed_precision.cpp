// test_mixed_precision.cpp — fx::MixedPrecision: f32 master weights and optimiser state, f16/bf16
// forward and backward passes, and dynamic loss scaling for f16 that skips and counts the steps
// whose gradients overflow, then goes on training.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"

namespace {

namespace fx = fluxion;
using fx::DType;
using fx::Tensor;

auto small_model() { return fx::Chain(fx::Dense(4, 16), fx::BatchNorm(16, fx::relu), fx::Dense(16, 2)); }

struct Problem {
    Tensor x, target;
};

// Two classes split by the sign of the inputs' sum.
Problem problem() {
    fx::seed(11);
    const Tensor x = fx::randn({128, 4});
    const Tensor labels = fx::cast(fx::gt(fx::sum(x, 1), fx::zeros({128})), DType::i64);
    return {x, fx::onehot(labels, 2)};
}

const auto lossfn = [](const auto& m, const Tensor& x, const Tensor& target) {
    return fx::logitcrossentropy(m(x), target);
};

std::map<std::string, std::vector<float>> values(const auto& model) {
    std::map<std::string, std::vector<float>> v;
    fx::visit_tensors(model, [&](const std::string& path, const Tensor& t) { v[path] = t.to_vector<float>(); });
    return v;
}

TEST(MixedPrecision, Bf16TrainsLikeF32WithF32MastersAndState) {
    const auto [x, target] = problem();
    fx::seed(12);
    const auto init = small_model();

    auto reference = fx::fmap([](const Tensor& t) { return t.clone(); }, init);  // init stays untrained
    auto opt = fx::setup(fx::Adam{.eta = 0.01}, reference);
    double f32_loss = 0;
    for (int step = 0; step < 80; ++step) {
        auto [l, g] = fx::withgradient([&](const auto& m) { return lossfn(m, x, target); }, reference);
        f32_loss = l.item();
        fx::update(opt, reference, g);
    }

    const auto untrained = values(init);
    auto mp = fx::MixedPrecision(fx::Adam{.eta = 0.01}, init, DType::bf16);
    EXPECT_EQ(mp.loss_scale(), 1.0) << "bf16 has f32's range: no scaling unless asked";
    double first = 0, last = 0;
    for (int step = 0; step < 80; ++step) {
        last = mp.step(lossfn, x, target);
        if (step == 0) first = last;
    }
    fx::visit_tensors(mp.model(),
                      [](const std::string& path, const Tensor& t) { EXPECT_EQ(t.dtype(), DType::f32) << path; });
    fx::visit_tensors(mp.compute_model(),
                      [](const std::string& path, const Tensor& t) { EXPECT_EQ(t.dtype(), DType::bf16) << path; });
    for (const auto& s : mp.optimiser().params) EXPECT_EQ(s.state2.dtype(), DType::f32) << s.path;
    EXPECT_EQ(mp.skipped_steps(), 0);
    EXPECT_LT(last, 0.3 * first);
    EXPECT_NEAR(last, f32_loss, 0.1 * f32_loss) << "f32 training reached " << f32_loss;
    // The running statistics the bf16 copy kept are the masters' too; the model passed in is not trained.
    EXPECT_EQ(values(init), untrained);
    EXPECT_NE(values(mp.model()).at("layers.1.running_mean"), values(init).at("layers.1.running_mean"));
}

// An injected overflow (the loss of one step multiplied by 60000, beyond f16 once scaled): that
// step changes no weight, is counted, halves the scale, and training goes on.
TEST(MixedPrecision, F16LossScalingRecoversFromAnOverflow) {
    const auto [x, target] = problem();
    fx::seed(12);
    auto mp = fx::MixedPrecision(fx::Adam{.eta = 0.01}, small_model(), DType::f16,
                                 {.initial = 1024, .growth_interval = 1000});
    const int overflow_at = 10;
    double first = 0, last = 0;
    for (int step = 0; step < 60; ++step) {
        const auto before = values(mp.model());
        last = mp.step(
            [&](const auto& m, const Tensor& xb, const Tensor& yb) {
                const Tensor l = lossfn(m, xb, yb);
                return step == overflow_at ? l * 60000.0 : l;
            },
            x, target);
        if (step == 0) first = last;
        if (step == overflow_at) {
            EXPECT_EQ(mp.skipped_steps(), 1);
            EXPECT_EQ(mp.loss_scale(), 512);
            const auto after = values(mp.model());
            for (const auto& [path, v] : before) {
                if (path.find("running") == std::string::npos) {
                    EXPECT_EQ(after.at(path), v) << path;
                }
            }
        }
    }
    EXPECT_EQ(mp.skipped_steps(), 1);
    EXPECT_EQ(mp.steps(), 60);
    EXPECT_LT(last, 0.3 * first) << "first " << first << ", last " << last;
    std::ostringstream printed;
    printed << mp;
    EXPECT_EQ(printed.str(), "MixedPrecision(f16, loss scale 512, 1 of 60 steps skipped)");
}

// One element that is not finite in one weight's gradient skips the step, whichever it is: a NaN,
// +inf or -inf among finite values (bf16: no loss scale, so nothing else would catch it). The next
// step trains as usual.
TEST(MixedPrecision, OneNonFiniteGradientElementSkipsTheStep) {
    const auto [x, target] = problem();
    for (const float bad : {NAN, INFINITY, -INFINITY}) {
        fx::seed(12);
        auto mp = fx::MixedPrecision(fx::Adam{.eta = 0.01}, small_model(), DType::bf16);
        std::vector<float> mask(32, 0.0f);
        mask[5] = bad;
        const Tensor poison = fx::tensor(mask).reshape({2, 16}).to(DType::bf16);
        const auto before = values(mp.model());
        mp.step(
            [&](const auto& m, const Tensor& xb, const Tensor& yb) {
                return lossfn(m, xb, yb) + fx::sum(std::get<2>(m.layers).weight * poison);
            },
            x, target);
        EXPECT_EQ(mp.skipped_steps(), 1) << bad;
        const auto after = values(mp.model());
        for (const auto& [path, v] : before) {
            if (path.find("running") == std::string::npos) {
                EXPECT_EQ(after.at(path), v) << bad << " " << path;
            }
        }
        mp.step(lossfn, x, target);
        EXPECT_EQ(mp.skipped_steps(), 1) << bad;
        EXPECT_NE(values(mp.model()).at("layers.2.weight"), before.at("layers.2.weight")) << bad;
    }
}

TEST(MixedPrecision, TheScaleGrowsAfterARunOfFiniteSteps) {
    const auto [x, target] = problem();
    auto mp =
        fx::MixedPrecision(fx::Descent{.eta = 0.01}, small_model(), DType::f16, {.initial = 8, .growth_interval = 3});
    for (int step = 0; step < 7; ++step) mp.step(lossfn, x, target);
    EXPECT_EQ(mp.loss_scale(), 32);
    EXPECT_EQ(mp.skipped_steps(), 0);
}

// On a device whose backend has mixed precision's multi-tensor kernels (the CPU's), a rule of
// fluxion's takes them: one check of every gradient and one update that widens, unscales, applies
// and rounds. An OptimiserChain of the same rule alone takes the composed step (no chain is fused).
// Both compute the same bits: masters, compute copy, optimiser state and losses, over steps that
// include an overflow (skipped), with a frozen layer, f16 scaled and bf16 not.
TEST(MixedPrecision, TheFusedStepIsTheComposedStepBitForBit) {
    const auto [x, target] = problem();
    for (DType t : {DType::bf16, DType::f16}) {
        fx::seed(12);
        const auto init = small_model();
        const fx::LossScaleOptions scaling{.initial = 1024, .growth_interval = 4};
        auto fused = fx::MixedPrecision(fx::Adam{.eta = 0.01}, init, t, scaling);
        auto composed = fx::MixedPrecision(fx::OptimiserChain(fx::Adam{.eta = 0.01}), init, t, scaling);
        fx::freeze(fused.optimiser(), "layers.2");
        fx::freeze(composed.optimiser(), "layers.2");
        for (int step = 0; step < 12; ++step) {
            const auto lossfn_at = [&](const auto& m, const Tensor& xb, const Tensor& yb) {
                const Tensor l = lossfn(m, xb, yb);
                return step == 5 ? l * 60000.0 : l;  // f16: beyond its range once scaled
            };
            EXPECT_EQ(fused.step(lossfn_at, x, target), composed.step(lossfn_at, x, target))
                << fx::name(t) << " step " << step << ", skipped " << fused.skipped_steps() << " and "
                << composed.skipped_steps();
        }
        EXPECT_EQ(fused.skipped_steps(), composed.skipped_steps()) << fx::name(t);
        EXPECT_EQ(fused.loss_scale(), composed.loss_scale()) << fx::name(t);
        EXPECT_EQ(values(fused.model()), values(composed.model())) << fx::name(t);
        EXPECT_EQ(values(fused.compute_model()), values(composed.compute_model())) << fx::name(t);
        EXPECT_NE(values(fused.model()).at("layers.0.weight"), values(init).at("layers.0.weight"));
        EXPECT_EQ(values(fused.model()).at("layers.2.weight"), values(init).at("layers.2.weight")) << "frozen";
        for (std::size_t i = 0; i < fused.optimiser().params.size(); ++i) {
            const auto& a = fused.optimiser().params[i];
            const auto& b = composed.optimiser().params[i];
            EXPECT_EQ(a.t, b.t) << a.path;
            if (a.state1.defined()) {
                EXPECT_EQ(a.state1.to_vector<float>(), b.state1.to_vector<float>()) << a.path;
                EXPECT_EQ(a.state2.to_vector<float>(), b.state2.to_vector<float>()) << a.path;
            }
        }
    }
}

// A rule of the user's own may do work around a rule of fluxion's (here: clip, then Adam), which a
// fused update would skip: its steps are composed, and train as the same chain of fluxion's does.
struct ClippedAdam {
    fx::Adam adam{.eta = 0.01};
    double delta = 0.05;
    void init(fx::ParamState& s, const Tensor& p) const { adam.init(s, p); }
    void step(fx::ParamState& s, Tensor& p, const Tensor& g) const { adam.step(s, p, fx::clamp(g, -delta, delta)); }
};

TEST(MixedPrecision, ARuleOfTheUsersOwnIsComposed) {
    const auto [x, target] = problem();
    fx::seed(12);
    const auto init = small_model();
    auto own = fx::MixedPrecision(ClippedAdam{}, init, DType::bf16);
    auto chain = fx::MixedPrecision(fx::OptimiserChain(fx::ClipGrad{0.05}, fx::Adam{.eta = 0.01}), init, DType::bf16);
    for (int step = 0; step < 10; ++step) EXPECT_EQ(own.step(lossfn, x, target), chain.step(lossfn, x, target));
    EXPECT_EQ(values(own.model()), values(chain.model()));
    EXPECT_NE(values(own.model()).at("layers.0.weight"), values(init).at("layers.0.weight"));
    EXPECT_EQ(own.optimiser().params[0].t, 10);
}

TEST(MixedPrecision, RefusesAComputeTypeThatIsNotHalf) {
    EXPECT_THROW(fx::MixedPrecision(fx::Adam{}, small_model(), DType::f32), fx::DTypeError);
    EXPECT_THROW(fx::MixedPrecision(fx::Adam{}, small_model(), DType::f16, {.backoff = 2}), fx::ValueError);
}

}  // namespace
