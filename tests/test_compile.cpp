// test_compile.cpp — fx::compile: compiled and eager steps train a model to the same parameters,
// inference matches the model, and what a trace must notice (new shapes, a replaced parameter,
// inputs on another device).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "allocation_counting.hpp"
#include "compile_cases.hpp"
#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

using namespace compile_cases;

// Same kernels in the same order on the same data: the tolerance only allows for summation order
// inside the kernel libraries, which may differ with the buffers' alignment.
// Measured here: 0 (bit-identical) for all four.
constexpr double kTolerance = 1e-5;

}  // namespace

TEST(Compile, MlpTrainsLikeEagerSteps) {
    fx::seed(0);
    auto model = fx::Chain(fx::Dense(100, 200, fx::relu), fx::Dense(200, 1));
    auto data = regression_batches(100, 32, 100);
    EXPECT_LE(eager_vs_compiled(model, mse_loss, data), kTolerance);
}

TEST(Compile, LeNet5TrainsLikeEagerSteps) {
    fx::seed(1);
    auto model = lenet5();
    auto data = class_batches(100, {16, 1, 28, 28}, 10);
    EXPECT_LE(eager_vs_compiled(model, class_loss, data), kTolerance);
}

TEST(Compile, BatchNormAndDropoutTrainLikeEagerSteps) {
    fx::seed(2);
    auto model = norm_dropout_mlp();
    auto data = class_batches(100, {32, 20}, 10);
    // Dropout draws fresh masks at every replay, from the generator the eager steps use.
    EXPECT_LE(eager_vs_compiled(model, class_loss, data), kTolerance);
}

TEST(Compile, BatchNormAndDropoutInTestModeTrainLikeEagerSteps) {
    fx::seed(3);
    auto model = norm_dropout_mlp();
    fx::testmode(model);  // running statistics used, no dropout
    auto data = class_batches(100, {32, 20}, 10);
    EXPECT_LE(eager_vs_compiled(model, class_loss, data), kTolerance);
}

// A compiled forward refers to its model: compiling a temporary (fx::compile(fx::onnx::load(f)))
// would leave it referring to a model that is gone, so it does not compile.
template <class M> concept CompilesFrom = requires { fx::compile(std::declval<M>()); };
static_assert(CompilesFrom<const fx::Dense&>);
static_assert(!CompilesFrom<fx::Dense>, "a temporary model is refused");
static_assert(!CompilesFrom<const fx::Dense&&>);

TEST(Compile, ForwardMatchesTheModel) {
    fx::seed(4);
    auto model = lenet5();
    auto fwd = fx::compile(model);
    for (int i = 0; i < 3; ++i) {
        Tensor x = fx::randn({8, 1, 28, 28});
        Tensor expected = [&] {
            fx::NoGrad no_grad;
            return model(x);
        }();
        Tensor y = fwd(x);
        ASSERT_EQ(y.shape(), expected.shape());
        auto a = y.to_vector<float>(), b = expected.to_vector<float>();
        for (std::size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], 1e-5);
    }
    auto stats = fwd.stats(fx::randn({8, 1, 28, 28}));
    EXPECT_GT(stats.kernels, 0u);
    EXPECT_LT(stats.arena_bytes, stats.intermediate_bytes);  // buffers share memory by lifetime
}

// ---- plans by shape, a replaced parameter, devices ----

// A run that traces again midway (a restart from a checkpoint makes its compiled step anew) ends
// with the unbroken run's parameters bit for bit: the step that traces is undone and replayed, so
// every step of both runs is a replay, whether or not a fused kernel rounds like the eager ones it
// replaces (on this machine they do; oneDNN's blocked convolutions with a fused relu did not).
// Dropout's masks come from the generator, which the undone step gives back.
template <class M, class Loss>
void expect_retraced_run_matches(const M& model, const Loss& loss, const Batches& data, const char* what) {
    auto run = [&](std::size_t retrace_at) {
        M m = deep_copy(model);
        auto opt = fx::setup(fx::Adam{.eta = 1e-3}, m);
        fx::seed(11);
        using Step = decltype(fx::compile(loss, m, opt));
        std::optional<Step> step;
        std::vector<float> losses;
        for (std::size_t i = 0; i < data.size(); ++i) {
            if (i == 0 || i == retrace_at) step.emplace(fx::compile(loss, m, opt));
            losses.push_back((*step)(std::get<0>(data[i]), std::get<1>(data[i])));
        }
        return std::pair{m, losses};
    };
    auto [unbroken, losses_u] = run(0);
    auto [retraced, losses_r] = run(data.size() / 2);
    EXPECT_EQ(max_difference(unbroken, retraced), 0) << what;
    EXPECT_EQ(losses_u, losses_r) << what;
}

TEST(Compile, ARunTracedAgainMidwayEndsAsTheUnbrokenRunBitForBit) {
    fx::seed(4);
    expect_retraced_run_matches(lenet5(), class_loss, class_batches(8, {16, 1, 28, 28}, 10), "LeNet-5");
    fx::seed(5);
    expect_retraced_run_matches(norm_dropout_mlp(), class_loss, class_batches(8, {32, 20}, 10),
                                "BatchNorm and Dropout");
}

// NNlib's activations are op-registry kernels like relu, and rrelu's random slopes come from the
// generator that the eager steps use, as Dropout's masks do.
TEST(Compile, NNlibActivationsTrainLikeEagerSteps) {
    fx::seed(10);
    auto model = fx::Chain(fx::Dense(10, 16, fx::mish), fx::Dense(16, 16, fx::logσ), fx::Dense(16, 16, fx::hardtanh),
                           fx::Dense(16, 16, fx::selu), fx::RReLU(), fx::Dense(16, 16, fx::softshrink), fx::Dense(16, 1));
    auto data = regression_batches(50, 32, 10);
    EXPECT_LE(eager_vs_compiled(model, mse_loss, data), kTolerance);
}

TEST(Compile, EachInputShapeGetsItsOwnPlan) {
    fx::seed(8);
    auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
    Batches data;
    for (int i = 0; i < 20; ++i) data.emplace_back(fx::randn({i % 3 == 2 ? 5 : 32, 10}), fx::randn({i % 3 == 2 ? 5 : 32, 1}));
    EXPECT_LE(eager_vs_compiled(model, mse_loss, data), kTolerance);  // the last, smaller batch of each epoch
}

// Each rule's step constants (bias corrections, NAdam's momentum weights, RAdam's rectification)
// follow the step count on every replay as they do eagerly; Rprop's and AdaDelta's second state too.
TEST(Compile, EveryRuleTrainsLikeEagerSteps) {
    const auto check = [](const auto& rule, const char* name) {
        fx::seed(4);
        auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
        EXPECT_LE(eager_vs_compiled(model, mse_loss, regression_batches(20, 32, 10), {}, rule), kTolerance) << name;
    };
    compile_cases::for_each_rule(check);
    check(fx::OptimiserChain(fx::SignDecay{}, fx::Adam{}), "SignDecay, Adam");
    check(fx::OptimiserChain(fx::Adam{}, fx::WeightDecay{1e-4}, fx::ClipGrad{1e-3}), "Adam, WeightDecay, ClipGrad");
}

TEST(Compile, WithoutCacheANewShapeIsAnError) {
    fx::seed(9);
    auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
    auto opt = fx::setup(fx::Adam{}, model);
    auto step = fx::compile(mse_loss, model, opt, {.cache = false});
    step(fx::randn({32, 10}), fx::randn({32, 1}));
    step(fx::randn({32, 10}), fx::randn({32, 1}));
    try {
        step(fx::randn({5, 10}), fx::randn({5, 1}));
        FAIL() << "expected fx::ValueError";
    } catch (const fx::ValueError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("{5, 10}"), std::string::npos) << m;
        EXPECT_NE(m.find("{32, 10}"), std::string::npos) << m;
        EXPECT_NE(m.find("cache"), std::string::npos) << m;
    }
}

TEST(Compile, AReplacedParameterIsTracedAgain) {
    fx::seed(10);
    auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
    auto opt = fx::setup(fx::Adam{}, model);
    auto step = fx::compile(mse_loss, model, opt);
    Tensor x = fx::randn({32, 10}), y = fx::randn({32, 1});
    for (int i = 0; i < 3; ++i) step(x, y);
    Tensor old_weight = std::get<0>(model.layers).weight;
    Tensor fresh = fx::randn({16, 10}) * 0.1;
    std::get<0>(model.layers).weight = fresh;  // the user replaces a parameter between steps
    auto expected = [&] {  // what an eager step computes on the replaced model
        auto copy = deep_copy(model);
        fx::NoGrad no_grad;
        return mse_loss(copy, x, y).item();
    }();
    EXPECT_NEAR(step(x, y), expected, 1e-5);
    Tensor fresh_before = fresh.clone();
    step(x, y);
    EXPECT_EQ(std::get<0>(model.layers).weight.data_ptr(), fresh.data_ptr());
    EXPECT_GT(fx::max(fx::abs(fresh - fresh_before)).item(), 0);  // the new tensor trains
    auto before = old_weight.to_vector<float>();
    step(x, y);
    EXPECT_EQ(old_weight.to_vector<float>(), before);  // the old one is left alone
}

TEST(Compile, InputsOnAnotherDeviceAreAnError) {
    if (!fx::functional("TestHost")) GTEST_SKIP() << "the TestHost plugin is not built";
    fx::Device host{"TestHost", 0};
    auto model = fx::Chain(fx::Dense(10, 1));
    auto opt = fx::setup(fx::Descent{}, model);
    auto step = fx::compile(mse_loss, model, opt);
    try {
        step(fx::randn({4, 10}) | host, fx::randn({4, 1}) | host);
        FAIL() << "expected fx::DeviceError";
    } catch (const fx::DeviceError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("TestHost:0"), std::string::npos) << m;
        EXPECT_NE(m.find("CPU"), std::string::npos) << m;
    }
}

TEST(Compile, AStepThatKeepsATensorIsRefusedOrRunsEagerly) {
    fx::seed(11);
    auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
    Tensor x = fx::randn({32, 10}), y = fx::randn({32, 1});
    Tensor saved;
    auto saving_loss = [&](const auto& m, const Tensor& xb, const Tensor& yb) {
        Tensor out = m(xb);
        saved = out.detach();  // a replay would not write this tensor
        return fx::mse(out, yb);
    };
    auto opt = fx::setup(fx::Adam{}, model);
    auto step = fx::compile(saving_loss, model, opt);
    try {
        step(x, y);
        FAIL() << "expected fx::ValueError";
    } catch (const fx::ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("keeps a tensor"), std::string::npos) << e.what();
    }
    auto eager_model = deep_copy(model);
    auto eager_opt = fx::setup(fx::Adam{}, eager_model);
    eager_opt.params = opt.params;  // the refused step was taken
    for (auto& s : eager_opt.params) s.state1 = s.state1.clone(), s.state2 = s.state2.clone();
    auto fallback = fx::compile(saving_loss, model, opt, {.fall_back = true});
    for (int i = 0; i < 5; ++i) {
        fallback(x, y);
        auto [l, g] = fx::withgradient([&](const auto& m) { return fx::mse(m(x), y); }, eager_model);
        fx::update(eager_opt, eager_model, g);
    }
    EXPECT_EQ(max_difference(model, eager_model), 0);
}

// A modifier whose work is not a backend kernel (here: host arithmetic on a read-back value) would
// be skipped by a replay: compile refuses the
// optimiser, and with .fall_back (as fx::train asks) every step runs eagerly.
struct HalveOnTheHost {
    static constexpr bool replayable = false;
    void modify(std::vector<Tensor>& grads, const std::vector<Tensor>&) const {
        for (auto& g : grads) g = fx::tensor(g.to_vector<float>(), g.shape()) * 0.5f;
    }
};

TEST(Compile, AnOptimiserWithHostWorkIsRefusedOrRunsEagerly) {
    static_assert(!fx::replayable<fx::OptimiserChain<HalveOnTheHost, fx::Adam>>());
    static_assert(fx::replayable<fx::OptimiserChain<fx::ClipNorm, fx::Adam>>());
    fx::seed(12);
    auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
    Tensor x = fx::randn({32, 10}), y = fx::randn({32, 1});
    auto eager_model = deep_copy(model);
    auto opt = fx::setup(fx::OptimiserChain(HalveOnTheHost{}, fx::Adam{.eta = 1e-2}), model);
    auto eager_opt = fx::setup(fx::OptimiserChain(HalveOnTheHost{}, fx::Adam{.eta = 1e-2}), eager_model);
    auto step = fx::compile(mse_loss, model, opt);
    try {
        step(x, y);
        FAIL() << "expected fx::ValueError";
    } catch (const fx::ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("outside the backend's kernels"), std::string::npos) << e.what();
    }
    EXPECT_EQ(max_difference(model, eager_model), 0) << "a refused step changed the model";
    auto fallback = fx::compile(mse_loss, model, opt, {.fall_back = true});
    for (int i = 0; i < 5; ++i) {
        fallback(x, y);
        auto [l, g] = fx::withgradient([&](const auto& m) { return fx::mse(m(x), y); }, eager_model);
        fx::update(eager_opt, eager_model, g);
    }
    EXPECT_EQ(max_difference(model, eager_model), 0);
}

TEST(Compile, AStepThatFreesATensorItUsedIsRefused) {
    fx::seed(13);
    auto model = fx::Chain(fx::Dense(10, 1));
    Tensor scale = fx::ones({1});
    auto replacing_loss = [&](const auto& m, const Tensor& xb, const Tensor& yb) {
        Tensor l = fx::mse(m(xb), yb) * scale;
        scale = fx::full({1}, 2.0);  // the old scale's memory is freed; a replay would still read it
        return l;
    };
    auto opt = fx::setup(fx::Descent{}, model);
    auto step = fx::compile(replacing_loss, model, opt);
    try {
        step(fx::randn({4, 10}), fx::randn({4, 1}));
        FAIL() << "expected fx::ValueError";
    } catch (const fx::ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("frees a tensor"), std::string::npos) << e.what();
    }
}

TEST(Compile, TrainRunsCompiledStepsByDefault) {
    fx::seed(12);
    auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
    auto data = regression_batches(10, 16, 10);
    data.emplace_back(fx::randn({5, 10}), fx::randn({5, 1}));  // the last, smaller batch
    auto eager = deep_copy(model);
    auto opt = fx::setup(fx::Adam{}, model), opt_e = fx::setup(fx::Adam{}, eager);
    auto compiled_history = fx::train(mse_loss, model, data, opt, {.epochs = 3, .progress = false});
    auto eager_history = fx::train(mse_loss, eager, data, opt_e, {.epochs = 3, .progress = false, .compile = false});
    ASSERT_EQ(compiled_history.size(), eager_history.size());
    for (std::size_t i = 0; i < eager_history.size(); ++i) EXPECT_FLOAT_EQ(compiled_history[i], eager_history[i]);
    EXPECT_EQ(max_difference(model, eager), 0);
}

// ---- fusion (src/core/compile/fusion.hpp) ----
namespace {

struct FusedAndPlain {
    double difference;  // between the two trained models, relative
    fx::CompileStats fused, plain;
};

// max_difference over the tensors two models hold (a Conv without a bias holds an empty one).
template <class M> double held_difference(const M& a, const M& b) {
    std::vector<Tensor> ta, tb;
    fx::for_each_tensor(a, [&](const Tensor& t) { ta.push_back(t); });
    fx::for_each_tensor(b, [&](const Tensor& t) { tb.push_back(t); });
    EXPECT_EQ(ta.size(), tb.size());
    double worst = 0;
    for (std::size_t i = 0; i < ta.size() && i < tb.size(); ++i) {
        EXPECT_EQ(ta[i].defined(), tb[i].defined());
        if (!ta[i].defined() || !tb[i].defined()) continue;
        auto va = ta[i].to(fx::DType::f64).to_vector<double>(), vb = tb[i].to(fx::DType::f64).to_vector<double>();
        for (std::size_t j = 0; j < va.size(); ++j)
            worst = std::max(worst, std::abs(va[j] - vb[j]) / std::max(1.0, std::abs(va[j])));
    }
    return worst;
}

// Trains two copies of `model` by compiled steps of `rule` on the same batches, one plan fused and
// one not.
template <class Rule, class M, class Loss>
FusedAndPlain fused_vs_plain(const Rule& rule, const M& model, const Loss& loss, const Batches& data) {
    M fused = deep_copy(model), plain = deep_copy(model);
    auto opt_f = fx::setup(rule, fused), opt_p = fx::setup(rule, plain);
    auto step_f = fx::compile(loss, fused, opt_f);
    auto step_p = fx::compile(loss, plain, opt_p, {.fuse = false});
    for (const auto& [x, y] : data) EXPECT_NEAR(step_f(x, y), step_p(x, y), 1e-5);
    const auto& [x, y] = data[0];
    return {held_difference(fused, plain), step_f.stats(x, y), step_p.stats(x, y)};
}

}  // namespace

// 40,801 parameters: more than one thread's share, so the fused step's slices cross tensors. Four
// optimiser calls become one (3 fewer), the first layer's product and relu one call (1 fewer).
TEST(CompileFusion, OptimiserStepsRunAsOneCallBitForBit) {
    auto model = fx::Chain(fx::Dense(100, 400, fx::relu), fx::Dense(400, 1));
    auto data = regression_batches(20, 32, 100);
    auto check = [&](const auto& rule, const char* name) {
        fx::seed(20);
        auto r = fused_vs_plain(rule, model, mse_loss, data);
        EXPECT_EQ(r.difference, 0) << name;
        EXPECT_EQ(r.plain.kernels, r.plain.traced_kernels) << name;
        EXPECT_EQ(r.fused.traced_kernels, r.plain.traced_kernels) << name;
        EXPECT_EQ(r.fused.kernels, r.plain.kernels - 4) << name;
    };
    check(fx::Adam{.eta = 1e-3}, "Adam");
    check(fx::AdamW{.eta = 1e-3}, "AdamW");
    check(fx::Momentum{.eta = 1e-3}, "Momentum");  // one state buffer
    check(fx::Descent{.eta = 1e-3}, "Descent");    // none
}

// relu's gradient reads the relu's output, so each Conv's bias add and relu join its convolution (4
// calls fewer), each Dense relu its product (2), the ten Adam steps become one (9), each max pool's
// gradient takes the relu's gradient before it (2), and the loss's negation, whose gradient reads
// neither its input nor its output (the op registry's `reads`), chains with the product before it (1).
TEST(CompileFusion, LeNet5TrainsLikeTheUnfusedPlan) {
    fx::seed(21);
    auto data = class_batches(30, {16, 1, 28, 28}, 10);
    auto r = fused_vs_plain(fx::Adam{.eta = 1e-3}, lenet5(), class_loss, data);
    std::printf("LeNet-5, fused against unfused: largest relative difference %.3g; %zu calls for %zu\n", r.difference,
                r.fused.kernels, r.fused.traced_kernels);
    EXPECT_LE(r.difference, kTolerance);
    EXPECT_EQ(r.fused.kernels, r.plain.kernels - 18);
}

// Without a backward pass the intermediates go: each convolution takes its bias and relu (4 calls
// fewer), each Dense relu runs in place on its product (2 fewer), and the arena shrinks.
TEST(CompileFusion, InferenceFusesEpiloguesInPlace) {
    fx::seed(22);
    auto model = lenet5();
    auto fused = fx::compile(model), plain = fx::compile(model, {.fuse = false});
    for (int i = 0; i < 3; ++i) {  // a trace, then replays
        Tensor x = fx::randn({8, 1, 28, 28});
        auto a = fused(x).to_vector<float>(), b = plain(x).to_vector<float>();
        ASSERT_EQ(a.size(), b.size());
        for (std::size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], 1e-5);
    }
    Tensor x = fx::randn({8, 1, 28, 28});
    auto f = fused.stats(x), p = plain.stats(x);
    EXPECT_EQ(f.kernels, p.kernels - 6);
    EXPECT_LT(f.arena_bytes, p.arena_bytes);
    EXPECT_EQ(f.intermediate_bytes, p.intermediate_bytes);  // what the traced step allocated
}

// Convolutions with a bias and sigmoid, and without a bias with relu, in f32 (oneDNN's bias and
// post-op) and f64 (the im2col path and fluxion's own epilogue). Training: each convolution takes
// its bias and activation (sigmoid's gradient, like relu's, reads only its output), five Adam steps
// become one, the loss's negation chains with the product before it (8 calls fewer); inference:
// both activations join (3 fewer).
TEST(CompileFusion, ConvolutionEpiloguesMatchInEveryVariant) {
    for (fx::DType t : {fx::DType::f32, fx::DType::f64}) {
        SCOPED_TRACE(fx::name(t));
        fx::seed(24);
        auto model = fx::PrecisionMover{t}(fx::Chain(fx::Conv({3, 3}, 2, 4, fx::sigmoid, {.pad = 1}),
                                                     fx::Conv({3, 3}, 4, 3, fx::relu, {.bias = false}), fx::Flatten(),
                                                     fx::Dense(48, 10)));
        auto data = class_batches(10, {8, 2, 6, 6}, 10);
        for (auto& [x, y] : data) x = x.to(t);
        auto r = fused_vs_plain(fx::Adam{.eta = 1e-2}, model, class_loss, data);
        EXPECT_LE(r.difference, kTolerance);
        EXPECT_EQ(r.fused.kernels, r.plain.kernels - 8);
        auto fused = fx::compile(model), plain = fx::compile(model, {.fuse = false});
        for (int i = 0; i < 3; ++i) {
            const Tensor& x = std::get<0>(data[std::size_t(i)]);
            auto a = fused(x).to(fx::DType::f64).to_vector<double>(),
                 b = plain(x).to(fx::DType::f64).to_vector<double>();
            ASSERT_EQ(a.size(), b.size());
            for (std::size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(a[j], b[j], 1e-6);
        }
        const Tensor& x = std::get<0>(data[0]);
        EXPECT_EQ(fused.stats(x).kernels, plain.stats(x).kernels - 3);
    }
}

// A target transformed inside the loss, tanh((2 - y/2) y), then subtracted from the model's output:
// five elementwise calls (a scalar on either side, a second operand of the value's size, the value on
// either side), each result read only by the next, become one; with the two Adam steps, 5 calls
// fewer. 33,033 elements: more than one thread's share, and not a whole number of blocks.
TEST(CompileFusion, ElementwiseChainsRunAsOneLoop) {
    fx::seed(25);
    auto model = fx::Chain(fx::Dense(10, 1001));
    Batches data;
    for (int i = 0; i < 5; ++i) data.emplace_back(fx::randn({33, 10}), fx::randn({33, 1001}));
    auto loss = [](const auto& m, const Tensor& x, const Tensor& y) {
        Tensor out = m(x);
        Tensor difference = out - fx::tanh((2.0 - y * 0.5) * y);
        return fx::mean(difference * difference);
    };
    auto r = fused_vs_plain(fx::Adam{.eta = 1e-3}, model, loss, data);
    EXPECT_EQ(r.difference, 0);
    EXPECT_EQ(r.fused.kernels, r.plain.kernels - 5);
}

TEST(CompileFusion, EnvironmentTurnsItOff) {
    fx::seed(23);
    auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
    Tensor x = fx::randn({4, 10});
    setenv("FLUXION_FUSE", "0", 1);
    auto off = fx::compile(model);
    off(x);
    unsetenv("FLUXION_FUSE");
    auto on = fx::compile(model);
    on(x);
    EXPECT_EQ(off.stats(x).kernels, off.stats(x).traced_kernels);
    EXPECT_LT(on.stats(x).kernels, on.stats(x).traced_kernels);
}

// ---- allocations (tests/allocation_counting.cpp counts them) ----
#if !defined(__SANITIZE_ADDRESS__)
namespace {
using allocation_counting::Allocations;
template <class F> Allocations allocations_in(int steps, F&& f) { return allocation_counting::in(steps, f); }
// OpenBLAS's small-matrix kernels and its threaded driver malloc a little per call; that is theirs.
void report(const char* what, int steps, Allocations a, fx::CompileStats s) {
    std::printf("%s: %zu kernels, arena %zu bytes for %zu bytes of tensors; %ld allocations by fluxion, %ld inside "
                "OpenBLAS/oneDNN in %d replayed steps\n",
                what, s.kernels, s.arena_bytes, s.intermediate_bytes, a.ours, a.libraries, steps);
}
}  // namespace

TEST(CompileAllocations, CountingHookSeesEagerSteps) {
    fx::seed(5);
    auto model = fx::Chain(fx::Dense(100, 200, fx::relu), fx::Dense(200, 1));
    auto opt = fx::setup(fx::Adam{}, model);
    Tensor x = fx::randn({128, 100}), y = fx::randn({128, 1});
    auto eager = allocations_in(10, [&] {
        auto [l, g] = fx::withgradient([&](const auto& m) { return mse_loss(m, x, y); }, model);
        fx::update(opt, model, g);
    });
    EXPECT_GT(eager.ours, 10 * 20);  // the hook works: an eager step allocates its tensors and its tape
}

// The test program's own allocations (fluxion's headers are compiled into it) are counted as ours, at
// every optimisation level: the hook looks up the stack only to give the C++ library's templates, which
// a kernel library may call in the program, to whoever called them.
TEST(CompileAllocations, CountingHookSeesTheProgramsOwnAllocations) {
    static std::vector<std::unique_ptr<int[]>> kept;  // escapes, so the compiler cannot drop the allocation
    auto a = allocation_counting::in(10, [] { kept.push_back(std::make_unique<int[]>(100)); });
    EXPECT_GE(a.ours, 10);
    kept.clear();
}

TEST(CompileAllocations, MlpReplaysAllocateNothing) {
    fx::seed(5);
    auto model = fx::Chain(fx::Dense(100, 200, fx::relu), fx::Dense(200, 1));
    auto opt = fx::setup(fx::Adam{}, model);
    Tensor x = fx::randn({128, 100}), y = fx::randn({128, 1});
    auto step = fx::compile(mse_loss, model, opt);
    auto steps = allocations_in(1000, [&] { step(x, y); });
    report("MLP step", 1000, steps, step.stats(x, y));
    EXPECT_EQ(steps.ours, 0);
    auto fwd = fx::compile(model);
    auto forwards = allocations_in(1000, [&] { fwd(x); });
    report("MLP forward", 1000, forwards, fwd.stats(x));
    EXPECT_EQ(forwards.ours, 0);
}

// A schedule of η and β1 (fluxion/schedules.hpp) is followed by every replay without allocating.
TEST(CompileAllocations, ScheduledReplaysAllocateNothing) {
    fx::seed(5);
    auto model = fx::Chain(fx::Dense(100, 200, fx::relu), fx::Dense(200, 1));
    auto opt = fx::setup(fx::Adam{}, model);
    fx::schedule(opt, &fx::Adam::eta,
                 fx::Sequence({{fx::Triangle{.l0 = 0, .l1 = 1e-3, .period = 20}, 10},
                               {fx::CosAnneal{.l0 = 1e-3, .l1 = 0, .period = 100}, 100}}));
    fx::schedule(opt, &fx::Adam::beta1, fx::Step{.start = 0.9, .decay = 0.9, .step_sizes = {50}});
    Tensor x = fx::randn({128, 100}), y = fx::randn({128, 1});
    auto step = fx::compile(mse_loss, model, opt);
    auto steps = allocations_in(1000, [&] { step(x, y); });
    report("scheduled MLP step", 1000, steps, step.stats(x, y));
    EXPECT_EQ(steps.ours, 0) << steps.ours_from;
    EXPECT_DOUBLE_EQ(opt.rule.beta1, 0.9 * std::pow(0.9, 20));  // t = 1002: 20 step sizes of 50 passed
}

TEST(CompileAllocations, BatchNormAndDropoutReplaysAllocateNothing) {
    fx::seed(6);
    auto model = norm_dropout_mlp();
    auto opt = fx::setup(fx::Adam{}, model);
    auto data = class_batches(1, {32, 20}, 10);
    auto [x, y] = data[0];
    auto step = fx::compile(class_loss, model, opt);
    auto steps = allocations_in(1000, [&] { step(x, y); });
    report("BatchNorm + Dropout step", 1000, steps, step.stats(x, y));
    EXPECT_EQ(steps.ours, 0);
}

TEST(CompileAllocations, LeNet5ReplaysAllocateNothing) {
    fx::seed(7);
    auto model = lenet5();
    auto opt = fx::setup(fx::Adam{}, model);
    auto data = class_batches(1, {16, 1, 28, 28}, 10);
    auto [x, y] = data[0];
    auto step = fx::compile(class_loss, model, opt);
    auto steps = allocations_in(100, [&] { step(x, y); });  // 100: a LeNet-5 step is 30 times an MLP's
    report("LeNet-5 step", 100, steps, step.stats(x, y));
    EXPECT_LT(step.stats(x, y).arena_bytes, step.stats(x, y).intermediate_bytes);  // memory reused by lifetime
    EXPECT_EQ(steps.ours, 0);  // oneDNN's memories are bound once per thread; pooling rows are kept
}
#endif

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);  // the TestHost device, for the device errors
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
