// test_schedules.cpp — the schedules of fluxion/schedules.hpp: values against PyTorch's schedulers
// where they coincide (tests/reference/torch_schedules.py, t = e + 1) and against
// ParameterSchedulers.jl's published formulas elsewhere; printing; composition; bad arguments; an
// optimiser following a schedule eagerly and compiled alike; a checkpoint resuming it exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "compile_cases.hpp"
#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"
#include "test_io_support.hpp"
#include "torch_reference.hpp"

namespace {

using namespace compile_cases;
using std::numbers::pi;
constexpr int kSteps = 40;           // torch_schedules.py's N
constexpr double kTolerance = 1e-5;  // eager against compiled on another device, as test_compile_devices

std::vector<double> first_steps(const fx::Schedule& s, int n = kSteps) {
    std::vector<double> v;
    for (int t = 1; t <= n; ++t) v.push_back(s(t));
    return v;
}

const fx_test::TorchResults& torch_schedules() {
    static const fx_test::TorchResults r =
        fx_test::run_torch_script(FLUXION_SOURCE_DIR "/tests/reference/torch_schedules.py", "", "torch_schedules");
    return r;
}

void expect_torch(const char* name, const fx::Schedule& s) {
    if (!fx_test::ran(torch_schedules())) GTEST_SKIP() << torch_schedules().skip;
    fx_test::expect_close(first_steps(s), torch_schedules().results.at(name), 1e-12, 1e-15, name);
}

// A formula of t checked at t = 1 .. 200.
void expect_formula(const fx::Schedule& s, const std::function<double(double)>& f) {
    for (int t = 1; t <= 200; ++t)
        EXPECT_NEAR(s(t), f(t), 1e-12 * std::max(1.0, std::abs(f(t)))) << fx::repr(s) << " t = " << t;
}

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const fx::ValueError& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected fx::ValueError";
    return "";
}

}  // namespace

// ---- against PyTorch ----
TEST(Schedules, StepIsStepLR) { expect_torch("StepLR", fx::Step{.start = 0.1, .decay = 0.5, .step_sizes = {3}}); }
TEST(Schedules, StepWithSeveralSizesIsMultiStepLR) {
    expect_torch("MultiStepLR", fx::Step{.start = 1, .decay = 0.8, .step_sizes = {2, 3, 2}});
}
TEST(Schedules, ExpIsExponentialLR) { expect_torch("ExponentialLR", fx::Exp{.start = 0.1, .decay = 0.9}); }
TEST(Schedules, PolyIsPolynomialLR) {
    expect_torch("PolynomialLR", fx::Poly{.start = 0.1, .degree = 2, .max_iter = kSteps});
}
TEST(Schedules, CosAnnealWithoutRestartIsCosineAnnealingLR) {
    expect_torch("CosineAnnealingLR", fx::CosAnneal{.l0 = 0.1, .l1 = 0.01, .period = 10, .restart = false});
}
TEST(Schedules, CosAnnealIsCosineAnnealingWarmRestarts) {
    expect_torch("CosineAnnealingWarmRestarts", fx::CosAnneal{.l0 = 0.1, .l1 = 0.01, .period = 7});
}
TEST(Schedules, TrianglesAreCyclicLR) {
    expect_torch("CyclicLR", fx::Triangle{.l0 = 0.01, .l1 = 0.1, .period = 8});
    expect_torch("CyclicLR2", fx::TriangleDecay2{.l0 = 0.01, .l1 = 0.1, .period = 8});
    expect_torch("CyclicLRExp", fx::TriangleExp{.l0 = 0.01, .l1 = 0.1, .period = 8, .decay = 0.95});
}

// ---- against ParameterSchedulers.jl's formulas ----
TEST(Schedules, DecayFormulas) {
    expect_formula(fx::Exp{.start = 0.5, .decay = 0.97}, [](double t) { return 0.5 * std::pow(0.97, t - 1); });
    expect_formula(fx::Inv{.start = 0.5, .decay = 0.1, .degree = 2},
                   [](double t) { return 0.5 / std::pow(1 + (t - 1) * 0.1, 2); });
    expect_formula(fx::Poly{.start = 2, .degree = 3, .max_iter = 200},
                   [](double t) { return 2 * std::pow(1 - (t - 1) / 200, 3); });
    expect_formula(fx::Step{.start = 1, .decay = 0.5, .step_sizes = {2, 3}}, [](double t) {
        return t <= 2 ? 1.0 : t <= 5 ? 0.5 : 0.25;
    });
}

TEST(Schedules, WaveFormulas) {
    auto tri = [](double t, double period) { return (2 / pi) * std::abs(std::asin(std::sin(pi * (t - 1) / period))); };
    auto sine = [](double t, double period) { return std::abs(std::sin(pi * (t - 1) / period)); };
    // l0 > l1: the wave is the same (amplitude |l0 - l1| above the smaller).
    expect_formula(fx::Triangle{.l0 = 0.5, .l1 = 0.1, .period = 10}, [&](double t) { return 0.4 * tri(t, 10) + 0.1; });
    expect_formula(fx::TriangleDecay2{.l0 = 0.1, .l1 = 0.5, .period = 10},
                   [&](double t) { return 0.4 * tri(t, 10) / std::pow(2, std::floor((t - 1) / 10)) + 0.1; });
    expect_formula(fx::TriangleExp{.l0 = 0.1, .l1 = 0.5, .period = 10, .decay = 0.97},
                   [&](double t) { return 0.4 * tri(t, 10) * std::pow(0.97, t - 1) + 0.1; });
    expect_formula(fx::Sin{.l0 = 0.1, .l1 = 0.5, .period = 10}, [&](double t) { return 0.4 * sine(t, 10) + 0.1; });
    expect_formula(fx::SinDecay2{.l0 = 0.1, .l1 = 0.5, .period = 10},
                   [&](double t) { return 0.4 * sine(t, 10) / std::pow(2, std::floor((t - 1) / 10)) + 0.1; });
    expect_formula(fx::SinExp{.l0 = 0.1, .l1 = 0.5, .period = 10, .decay = 0.97},
                   [&](double t) { return 0.4 * sine(t, 10) * std::pow(0.97, t - 1) + 0.1; });
    expect_formula(fx::CosAnneal{.l0 = 1, .l1 = 0.2, .period = 30},
                   [](double t) { return 0.8 * (1 + std::cos(pi * std::fmod(t - 1, 30) / 30)) / 2 + 0.2; });
}

TEST(Schedules, OneCycleRisesThenFalls) {
    // ParameterSchedulers: Sequence(Shifted(CosAnneal(maxval, startval, warmup, no restart), warmup + 1)
    // => warmup, CosAnneal(maxval, endval, warmdown, no restart) => warmdown), warmup = ceil(0.25 nsteps).
    const fx::OneCycle s{.nsteps = 100, .maxval = 0.1};
    auto f = [](double t) {
        if (t <= 25) return (0.1 - 0.004) * (1 + std::cos(pi * (t + 24) / 25)) / 2 + 0.004;
        return (0.1 - 1e-6) * (1 + std::cos(pi * (t - 26) / 75)) / 2 + 1e-6;
    };
    for (int t = 1; t <= 100; ++t) EXPECT_NEAR(s(t), f(t), 1e-15) << t;
    EXPECT_NEAR(s(1), 0.004, 1e-15);  // startval = maxval / 25
    EXPECT_NEAR(s(26), 0.1, 1e-15);   // maxval after the warm-up
    EXPECT_GT(s(100), 1e-6);          // endval = maxval / 1e5 is approached
    EXPECT_LT(s(100), 1e-4);
    const fx::OneCycle given{.nsteps = 10, .maxval = 1, .startval = 0.5, .endval = 0.25, .percent_start = 0.5};
    EXPECT_DOUBLE_EQ(given(1), 0.5);
    EXPECT_DOUBLE_EQ(given(6), 1);
}

// ---- composition ----
TEST(Schedules, SequenceRunsEachStageFromItsOwnFirstStep) {
    const fx::Schedule warm = fx::Sequence({{fx::Triangle{.l0 = 0, .l1 = 1, .period = 20}, 10},
                                            {fx::CosAnneal{.l0 = 1, .l1 = 0, .period = 90, .restart = false}, 90}});
    for (int t = 1; t <= 10; ++t) EXPECT_NEAR(warm(t), (t - 1) / 10.0, 1e-12) << t;  // linear warm-up
    EXPECT_DOUBLE_EQ(warm(11), 1);                                                   // the cosine's t = 1
    EXPECT_NEAR(warm(56), 0.5, 1e-12);
    EXPECT_NEAR(warm(150), (fx::CosAnneal{.l0 = 1, .l1 = 0, .period = 90, .restart = false}(140)), 1e-15);  // continues
    const fx::Schedule numbers = fx::Sequence({{1.0, 2}, {0.5, 3}, {0.25, 1}});
    EXPECT_EQ(first_steps(numbers, 8), (std::vector<double>{1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25}));
}

TEST(Schedules, LoopShiftedAndCallables) {
    const fx::Schedule loop = fx::Loop{fx::Exp{.start = 1, .decay = 0.5}, 3};
    EXPECT_EQ(first_steps(loop, 7), (std::vector<double>{1, 0.5, 0.25, 1, 0.5, 0.25, 1}));
    const fx::Schedule shifted = fx::Shifted{fx::Exp{.start = 1, .decay = 0.5}, 3};
    EXPECT_EQ(first_steps(shifted, 3), (std::vector<double>{0.25, 0.125, 0.0625}));
    const fx::Schedule mine = [](std::int64_t t) { return 1.0 / double(t); };
    EXPECT_DOUBLE_EQ((fx::Loop{mine, 2}(4)), 0.5);
    EXPECT_EQ(fx::repr(fx::Loop{mine, 2}), "Loop(λ, 2)");
}

TEST(Schedules, InterpolatorFollowsAScheduleAtAFractionOfItsSteps) {
    // ParameterSchedulers: Interpolator(s, rate)(t) = s(ceil(t / rate)); rate 3: each of s's steps lasts 3.
    const fx::Schedule per_epoch = fx::Exp{.start = 1, .decay = 0.5};
    EXPECT_EQ(first_steps(fx::Interpolator{per_epoch, 3}, 7), (std::vector<double>{1, 1, 1, 0.5, 0.5, 0.5, 0.25}));
    // A rate below 1 skips steps of s: s(ceil(t / 0.5)) = s(2t).
    EXPECT_EQ(first_steps(fx::Interpolator{per_epoch, 0.5}, 3), (std::vector<double>{0.5, 0.125, 0.03125}));
    // A fractional rate: ceil(1/2.5) = 1, ceil(2/2.5) = 1, ceil(3/2.5) = 2, ..., ceil(6/2.5) = 3.
    EXPECT_EQ(first_steps(fx::Interpolator{per_epoch, 2.5}, 6), (std::vector<double>{1, 1, 0.5, 0.5, 0.5, 0.25}));
}

TEST(Schedules, ShortenedEndsAfterItsSteps) {
    const fx::Schedule s = fx::Shortened{fx::Exp{.start = 1, .decay = 0.5}, 3};
    EXPECT_EQ(first_steps(s, 3), (std::vector<double>{1, 0.5, 0.25}));
    EXPECT_EQ(message_of([&] { s(4); }), "Shortened: the step t = 4 is past nsteps = 3");
    // Inside a Sequence it is a stage like any other.
    const fx::Schedule seq = fx::Sequence({{fx::Shortened{fx::Constant{2}, 2}, 2}, {1.0, 1}});
    EXPECT_EQ(first_steps(seq, 4), (std::vector<double>{2, 2, 1, 1}));
}

// ---- printing ----
TEST(Schedules, PrintAsWritten) {
    EXPECT_EQ(fx::repr(fx::CosAnneal{.l0 = 0.1, .l1 = 0, .period = 100}),
              "CosAnneal(l0 = 0.1, l1 = 0, period = 100, restart = true)");
    EXPECT_EQ(fx::repr(fx::Step{.start = 0.1, .decay = 0.5, .step_sizes = {2, 3}}),
              "Step(start = 0.1, decay = 0.5, step_sizes = [2, 3])");
    EXPECT_EQ(fx::repr(fx::Exp{.start = 1e-3, .decay = 0.99}), "Exp(start = 0.001, decay = 0.99)");
    EXPECT_EQ(fx::repr(fx::TriangleExp{.l0 = 0, .l1 = 1, .period = 8, .decay = 0.9}),
              "TriangleExp(l0 = 0, l1 = 1, period = 8, decay = 0.9)");
    EXPECT_EQ(fx::repr(fx::OneCycle{.nsteps = 100, .maxval = 0.1}),
              "OneCycle(nsteps = 100, maxval = 0.1, startval = 0.004, endval = 1e-06, percent_start = 0.25)");
    EXPECT_EQ(fx::repr(fx::Sequence({{fx::Triangle{.l0 = 0, .l1 = 1, .period = 20}, 10}, {0.5, 5}})),
              "Sequence(Triangle(l0 = 0, l1 = 1, period = 20) => 10, Constant(0.5) => 5)");
    EXPECT_EQ(fx::repr(fx::Shifted{fx::Inv{.start = 1, .decay = 0.1, .degree = 1}, 4}),
              "Shifted(Inv(start = 1, decay = 0.1, degree = 1), 4)");
    EXPECT_EQ(fx::repr(fx::Interpolator{fx::Exp{.start = 1, .decay = 0.5}, 2.5}),
              "Interpolator(Exp(start = 1, decay = 0.5), 2.5)");
    EXPECT_EQ(fx::repr(fx::Shortened{fx::Constant{0.1}, 100}), "Shortened(Constant(0.1), 100)");
    std::ostringstream os;
    os << fx::Poly{.start = 1, .degree = 2, .max_iter = 10};
    EXPECT_EQ(os.str(), "Poly(start = 1, degree = 2, max_iter = 10)");
}

// ---- bad arguments ----
TEST(Schedules, BadArgumentsAreValueErrors) {
    EXPECT_EQ(message_of([] { fx::CosAnneal{.l0 = 1, .l1 = 0, .period = 0}(1); }),
              "CosAnneal: period must be at least 1, got 0");
    EXPECT_EQ(message_of([] { fx::Exp{}(0); }), "Exp: the step t counts from 1, got 0");
    EXPECT_EQ(message_of([] { fx::Triangle{}(-3); }), "Triangle: the step t counts from 1, got -3");
    EXPECT_EQ(message_of([] {
                  fx::Step{.step_sizes = {2, -1}}(1);
              }),
              "Step: each of step_sizes must be at least 1, got -1");
    EXPECT_EQ(message_of([] { fx::Poly{.max_iter = 5}(6); }), "Poly: the step t = 6 is past max_iter = 5");
    EXPECT_EQ(message_of([] { fx::OneCycle{.nsteps = 10}(11); }), "OneCycle: the step t = 11 is past nsteps = 10");
    EXPECT_EQ(message_of([] { fx::OneCycle{.nsteps = 10, .percent_start = 1}(1); }),
              "OneCycle: percent_start must be in (0, 1), got 1");
    EXPECT_EQ(message_of([] { fx::Loop{1.0, 0}(1); }), "Loop: period must be at least 1, got 0");
    EXPECT_EQ(message_of([] {
                  fx::Sequence({{1.0, 0}})(1);
              }),
              "Sequence: each stage's steps must be at least 1, got 0");
    EXPECT_EQ(message_of([] { fx::Shifted{fx::Exp{}, -2}(1); }), "Exp: the step t counts from 1, got -2");
    EXPECT_EQ(message_of([] { fx::Interpolator{fx::Exp{}, 0}(1); }),
              "Interpolator: rate must be a positive number, got 0");
    EXPECT_EQ(message_of([] { fx::Interpolator{fx::Exp{}, -1}(1); }),
              "Interpolator: rate must be a positive number, got -1");
    EXPECT_EQ(message_of([] { fx::Interpolator{fx::Exp{}, 1}(0); }), "Interpolator: the step t counts from 1, got 0");
    EXPECT_EQ(message_of([] { fx::Shortened{fx::Exp{}, 0}(1); }), "Shortened: nsteps must be at least 1, got 0");
    EXPECT_EQ(message_of([] { fx::Shortened{fx::Exp{}, 5}(0); }), "Shortened: the step t counts from 1, got 0");
}

// ---- driving an optimiser ----
namespace {

auto scheduled_adam(const auto& model) {
    auto opt = fx::setup(fx::Adam{}, model);
    fx::schedule(opt, &fx::Adam::eta,
                 fx::Sequence({{fx::Triangle{.l0 = 0, .l1 = 1e-2, .period = 10}, 5},
                               {fx::CosAnneal{.l0 = 1e-2, .l1 = 1e-4, .period = 20}, 100}}));
    fx::schedule(opt, &fx::Adam::beta1, fx::Step{.start = 0.9, .decay = 0.5, .step_sizes = {7}});
    return opt;
}

}  // namespace

TEST(Schedules, UpdateSetsTheRulesFieldsAtEachStep) {
    fx::seed(3);
    auto model = fx::Chain(fx::Dense(3, 2));
    auto opt = scheduled_adam(model);
    const auto x = fx::randn({4, 3});
    for (int t = 1; t <= 9; ++t) {
        auto [loss, grads] = fx::withgradient([&](const auto& m) { return fx::mean(fx::square(m(x))); }, model);
        fx::update(opt, model, grads);
        const fx::CosAnneal cosine{.l0 = 1e-2, .l1 = 1e-4, .period = 20};
        EXPECT_DOUBLE_EQ(opt.rule.eta, t <= 5 ? 1e-2 * (t - 1) / 5.0 : cosine(t - 5));
        EXPECT_DOUBLE_EQ(opt.rule.beta1, t <= 7 ? 0.9 : 0.45);
    }
}

TEST(Schedules, TrainFollowsThemEagerAndCompiledAlike) {
    fx::seed(12);
    auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
    auto data = regression_batches(10, 16, 10);
    auto eager = deep_copy(model), unscheduled = deep_copy(model);
    auto opt = scheduled_adam(model), opt_e = scheduled_adam(eager);
    auto opt_u = fx::setup(fx::Adam{}, unscheduled);
    auto compiled_history = fx::train(mse_loss, model, data, opt, {.epochs = 3, .progress = false});
    auto eager_history = fx::train(mse_loss, eager, data, opt_e, {.epochs = 3, .progress = false, .compile = false});
    fx::train(mse_loss, unscheduled, data, opt_u, {.epochs = 3, .progress = false});
    ASSERT_EQ(compiled_history.size(), eager_history.size());
    for (std::size_t i = 0; i < eager_history.size(); ++i) EXPECT_FLOAT_EQ(compiled_history[i], eager_history[i]);
    EXPECT_EQ(max_difference(model, eager), 0);
    EXPECT_GT(max_difference(model, unscheduled), 1e-4);       // the schedule made a difference
    EXPECT_DOUBLE_EQ(opt.rule.beta1, 0.9 * std::pow(0.5, 4));  // t = 30: four step sizes of 7 passed
}

TEST(Schedules, CompiledStepsFollowThemOnEveryOtherDevice) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(24);
        auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1)) | d;
        Batches data;
        for (const auto& [x, y] : regression_batches(6, 8, 10)) data.emplace_back(x | d, y | d);
        auto eager = deep_copy(model);
        auto opt = scheduled_adam(model), opt_e = scheduled_adam(eager);
        fx::train(mse_loss, model, data, opt, {.epochs = 2, .progress = false});
        fx::train(mse_loss, eager, data, opt_e, {.epochs = 2, .progress = false, .compile = false});
        EXPECT_LE(max_difference(model, eager), kTolerance) << d.str();
        EXPECT_DOUBLE_EQ(opt.rule.beta1, 0.45) << d.str();
    }
}

TEST(Schedules, ACheckpointResumesTheScheduleExactly) {
    io_test::ScratchDir dir;
    fx::seed(5);
    auto unbroken = fx::Chain(fx::Dense(10, 8, fx::relu), fx::Dense(8, 1));
    auto first_half = deep_copy(unbroken);
    auto data = regression_batches(6, 8, 10);
    auto opt_unbroken = scheduled_adam(unbroken);
    fx::train(mse_loss, unbroken, data, opt_unbroken, {.epochs = 2, .progress = false});
    {
        auto opt = scheduled_adam(first_half);
        fx::train(mse_loss, first_half, data, opt, {.epochs = 1, .progress = false});
        fx::save_checkpoint(dir / "run.safetensors", first_half, opt);
    }
    fx::seed(99);
    auto resumed = fx::Chain(fx::Dense(10, 8, fx::relu), fx::Dense(8, 1));
    auto opt = scheduled_adam(resumed);
    fx::load_checkpoint(dir / "run.safetensors", resumed, opt);
    fx::train(mse_loss, resumed, data, opt, {.epochs = 1, .progress = false});
    EXPECT_EQ(max_difference(resumed, unbroken), 0);
    EXPECT_EQ(opt.rule.eta, opt_unbroken.rule.eta);
    EXPECT_EQ(opt.rule.beta1, opt_unbroken.rule.beta1);
}

// The warm-up and cosine examples/vision_transformer wrote by hand before (step s = t - 1 of `steps`),
// composed as the example now does.
TEST(Schedules, AShiftedTriangleThenACosineIsALinearWarmUpAndCosineDecay) {
    const double eta = 2e-3;
    const std::int64_t steps = 1000, warmup = 50;
    const fx::Schedule s =
        fx::Sequence({{fx::Shifted{fx::Triangle{.l0 = 0, .l1 = eta, .period = 2 * warmup}, 2}, warmup},
                      {fx::CosAnneal{.l0 = eta, .l1 = 0, .period = steps - warmup, .restart = false}, steps - warmup}});
    for (std::int64_t step = 0; step < steps; ++step) {
        const double by_hand = step < warmup
                                   ? eta * double(step + 1) / double(warmup)
                                   : eta * 0.5 * (1 + std::cos(pi * double(step - warmup) / double(steps - warmup)));
        EXPECT_NEAR(s(step + 1), by_hand, 1e-15) << step;
    }
}

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
