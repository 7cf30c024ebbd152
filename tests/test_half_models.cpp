// test_half_models.cpp — whole models in f16 and bf16: fx::f16, fx::bf16 and fx::f32 convert every
// floating tensor of a structure; a converted model runs, trains and saves in its type, and
// PyTorch (Debian's /usr/bin/python3, skipped with the reason where it cannot import torch) reads
// the F16 and BF16 safetensors it writes; every other backend that runs the half type (Vulkan,
// CUDA) computes and trains a converted model as the CPU does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "fluxion/io.hpp"
#include "fluxion/layers.hpp"
#include "other_devices.hpp"
#include "test_io_support.hpp"

namespace {

using fx::DType;
using fx::Tensor;
using io_test::ScratchDir;

constexpr const char* kPython = "/usr/bin/python3";

auto small_cnn() {
    return fx::Chain(fx::Conv({3, 3}, 1, 4, fx::relu), fx::BatchNorm(4), fx::MaxPool({2, 2}), fx::Flatten(),
                     fx::Dense(4 * 3 * 3, 5));
}

// The largest |a - b| over the largest |b|.
double relative_difference(const Tensor& a, const Tensor& b) {
    const auto x = a.to(DType::f64).to_vector<double>(), y = b.to(DType::f64).to_vector<double>();
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        diff = std::max(diff, std::abs(x[i] - y[i]));
        scale = std::max(scale, std::abs(y[i]));
    }
    return diff / scale;
}

std::map<std::string, Tensor> state_map(const auto& model) {
    const auto state = fx::state(model);
    return {state.begin(), state.end()};
}

std::vector<DType> dtypes_of(const auto& model) {
    std::vector<DType> types;
    fx::visit_tensors(model, [&](const std::string&, const Tensor& t) { types.push_back(t.dtype()); });
    return types;
}

TEST(HalfModels, ConversionChangesEveryFloatingTensorAndKeepsTheRest) {
    const auto labels = std::make_tuple(fx::tensor<std::int64_t>({1, 2}, {2}), fx::ones({2}));
    const auto half = fx::f16(labels);
    EXPECT_EQ(std::get<0>(half).dtype(), DType::i64) << "integer tensors are not parameters";
    EXPECT_EQ(std::get<1>(half).dtype(), DType::f16);

    const auto model = small_cnn();
    for (DType u : dtypes_of(model | fx::bf16)) EXPECT_EQ(u, DType::bf16) << "the pipe form converts too";
    for (auto [convert, t] : {std::pair{fx::bf16, DType::bf16}, std::pair{fx::f16, DType::f16}}) {
        auto converted = convert(model);
        const auto types = dtypes_of(converted);
        ASSERT_EQ(types.size(), dtypes_of(model).size());
        for (DType u : types) EXPECT_EQ(u, t);
        // Back to f32: each value is the original rounded once to the half type.
        const auto back = fx::f32(converted);
        fx::visit_tensors(back,
                          [&](const std::string& path, const Tensor& b) { EXPECT_EQ(b.dtype(), DType::f32) << path; });
        const auto original = state_map(model), returned = state_map(back);
        for (const auto& [name, t0] : original)
            EXPECT_EQ(returned.at(name).to_vector<float>(), t0.to(t).to(DType::f32).to_vector<float>()) << name;
    }
}

TEST(HalfModels, ConvertedModelsComputeCloseToF32) {
    fx::seed(3);
    auto model = small_cnn();
    fx::testmode(model);
    const Tensor x = fx::randn({2, 1, 8, 8});
    const Tensor want = model(x);
    for (auto [convert, t, tol] : {std::tuple{fx::bf16, DType::bf16, 2e-2}, std::tuple{fx::f16, DType::f16, 3e-3}}) {
        auto half = convert(model);
        const Tensor got = half(x.to(t));
        EXPECT_EQ(got.dtype(), t);
        EXPECT_LT(relative_difference(got, want), tol) << fx::name(t);
    }
}

// Parameters and optimiser state stay in bf16; the loss of a separable problem still falls.
TEST(HalfModels, ABf16ModelTrainsInBf16) {
    fx::seed(5);
    auto model = fx::bf16(fx::Chain(fx::Dense(4, 16, fx::relu), fx::Dense(16, 2)));
    const Tensor x = fx::randn({64, 4}).to(DType::bf16);
    const Tensor labels = fx::cast(fx::gt(fx::sum(x, 1), fx::zeros({64}).to(DType::bf16)), DType::i64);
    const Tensor target = fx::onehot(labels, 2).to(DType::bf16);
    auto loss = [&](const auto& m) { return fx::logitcrossentropy(m(x), target); };
    auto opt = fx::setup(fx::Adam(0.01), model);
    const double first = loss(model).to(DType::f32).item();
    for (int step = 0; step < 60; ++step) {
        auto [l, g] = fx::withgradient(loss, model);
        EXPECT_EQ(l.dtype(), DType::bf16);
        fx::update(opt, model, g);
    }
    for (DType t : dtypes_of(model)) EXPECT_EQ(t, DType::bf16);
    const double last = loss(model).to(DType::f32).item();
    EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}

// fx::compile (and so fx::train) replays a bf16 step: the same first loss as an eager step, and
// the loss keeps falling.
TEST(HalfModels, ACompiledStepTrainsABf16Model) {
    fx::seed(6);
    auto model = fx::bf16(fx::Chain(fx::Dense(4, 16, fx::relu), fx::Dense(16, 2)));
    const Tensor x = fx::randn({64, 4}).to(DType::bf16);
    const Tensor labels = fx::cast(fx::gt(fx::sum(x, 1), fx::zeros({64}).to(DType::bf16)), DType::i64);
    const Tensor target = fx::onehot(labels, 2).to(DType::bf16);
    auto lossfn = [](const auto& m, const Tensor& xb, const Tensor& yb) { return fx::logitcrossentropy(m(xb), yb); };
    const double eager = [&] {
        fx::NoGrad no_grad;
        return lossfn(model, x, target).to(DType::f32).item();
    }();
    auto opt = fx::setup(fx::Adam(0.01), model);
    auto step = fx::compile(lossfn, model, opt);
    const double first = step(x, target);
    EXPECT_EQ(first, eager);
    double last = first;
    for (int i = 0; i < 60; ++i) last = step(x, target);
    for (DType t : dtypes_of(model)) EXPECT_EQ(t, DType::bf16);
    EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}

// test_half.cpp's tolerances between the CPU and another backend: 8 units of bf16's last place
// (2^-8 relative) and 4 of f16's (2^-11).
double other_backend_tolerance(DType t) { return t == DType::bf16 ? 1e-2 : 2e-3; }

// The losses of 5 Adam steps on `model` (moved where xs and ys are), eager or through fx::compile.
// ε = 1e-3: in f16, (1 - β2) g² underflows to 0 and the default 1e-8 would then blow the step up.
std::vector<double> adam_losses(auto model, const Tensor& xs, const Tensor& ys, bool compiled) {
    auto lossfn = [](const auto& m, const Tensor& xb, const Tensor& yb) { return fx::logitcrossentropy(m(xb), yb); };
    auto opt = fx::setup(fx::Adam{.eta = 0.01, .epsilon = 1e-3}, model);
    std::vector<double> losses;
    if (compiled) {
        auto step = fx::compile(lossfn, model, opt);
        for (int i = 0; i < 5; ++i) losses.push_back(step(xs, ys));
        return losses;
    }
    for (int i = 0; i < 5; ++i) {
        auto [l, g] = fx::withgradient([&](const auto& m) { return lossfn(m, xs, ys); }, model);
        losses.push_back(l.to(DType::f32).item());
        fx::update(opt, model, g);
    }
    return losses;
}

// A converted CNN's forward pass (convolution, batch norm, pooling, dense) and the losses of Adam
// steps on half parameters and state, eager and compiled, on every other backend against the CPU.
TEST(HalfModels, OtherBackendsComputeAndTrainAsTheCpuDoes) {
    for (auto [convert, t] : {std::pair{fx::bf16, DType::bf16}, std::pair{fx::f16, DType::f16}}) {
        const double tol = other_backend_tolerance(t);
        fx::seed(8);
        auto cnn = convert(small_cnn());
        fx::testmode(cnn);
        const Tensor image = fx::randn({2, 1, 8, 8}).to(t);
        const Tensor want = cnn(image);
        // A fresh model with the same parameters each time: fx::update changes them in place.
        const auto mlp = [&] {
            fx::seed(9);
            return convert(fx::Chain(fx::Dense(4, 16, fx::relu), fx::Dense(16, 2)));
        };
        fx::seed(10);
        const Tensor x = fx::randn({64, 4}).to(t);
        const Tensor labels = fx::cast(fx::gt(fx::sum(x, 1), fx::zeros({64}).to(t)), DType::i64);
        const Tensor target = fx::onehot(labels, 2).to(t);
        const auto cpu_losses = adam_losses(mlp(), x, target, false);
        for (const auto& d : fx::testing::other_devices(t)) {
            const std::string where = std::string(fx::name(t)) + " on " + d.str();
            const Tensor got = (cnn | d)(image | d);
            EXPECT_EQ(got.device(), d) << where;
            EXPECT_LT(relative_difference(got | fx::cpu, want), tol) << where;
            for (bool compiled : {false, true}) {
                const auto losses = adam_losses(mlp() | d, x | d, target | d, compiled);
                for (std::size_t i = 0; i < losses.size(); ++i)
                    EXPECT_NEAR(losses[i], cpu_losses[i], tol * std::abs(cpu_losses[i]))
                        << where << (compiled ? ", compiled" : ", eager") << " step " << i;
            }
        }
    }
}

// The parameters and the optimiser's state (momentum, moments: "state1 of weight", ...) after 3
// steps of `rule` on a converted Dense layer, on `d`; the state stays in the half type too.
std::map<std::string, Tensor> after_steps(const auto& rule, const auto& convert, DType t, const fx::Device& d) {
    fx::seed(11);
    auto model = convert(fx::Dense(4, 3)) | d;
    fx::seed(12);
    const Tensor x = fx::randn({8, 4}).to(t) | d;
    auto opt = fx::setup(rule, model);
    for (int i = 0; i < 3; ++i) {
        auto [l, g] = fx::withgradient([&](const auto& m) { return fx::sum(fx::square(m(x))); }, model);
        fx::update(opt, model, g);
    }
    auto out = state_map(model);
    for (const auto& p : opt.params) {
        if (p.state1.defined()) out.emplace("state1 of " + p.path, p.state1);
        if (p.state2.defined()) out.emplace("state2 of " + p.path, p.state2);
        if (p.state3.defined()) out.emplace("state3 of " + p.path, p.state3);
    }
    return out;
}

// Every rule's step on half parameters and state, on every other backend against the CPU.
TEST(HalfModels, OtherBackendsStepEveryRuleAsTheCpuDoes) {
    const auto check = [](const auto& rule, const std::string& name, std::size_t states) {
        for (auto [convert, t] : {std::pair{fx::bf16, DType::bf16}, std::pair{fx::f16, DType::f16}}) {
            const auto want = after_steps(rule, convert, t, fx::Device{});
            EXPECT_EQ(want.size(), 2 + 2 * states) << name << ": weight, bias and their state";
            for (const auto& d : fx::testing::other_devices(t)) {
                const auto got = after_steps(rule, convert, t, d);
                ASSERT_EQ(got.size(), want.size()) << name << " on " << d.str();
                for (const auto& [path, w] : want) {
                    EXPECT_EQ(got.at(path).dtype(), t) << name << " " << path;
                    EXPECT_LT(relative_difference(got.at(path) | fx::cpu, w), other_backend_tolerance(t))
                        << name << " " << path << " in " << fx::name(t) << " on " << d.str();
                }
            }
        }
    };
    check(fx::Descent{}, "Descent", 0);
    check(fx::Momentum{.eta = 0.05}, "Momentum", 1);
    check(fx::Nesterov{.eta = 0.05}, "Nesterov", 1);
    check(fx::RMSProp{.eta = 0.01, .epsilon = 1e-3}, "RMSProp", 1);  // ε as in adam_losses
    check(fx::Adam{.eta = 0.01, .epsilon = 1e-3}, "Adam", 2);
    check(fx::AdamW{.eta = 0.01, .lambda = 0.1, .epsilon = 1e-3}, "AdamW", 2);
    check(fx::AMSGrad{.eta = 0.01, .epsilon = 1e-3}, "AMSGrad", 3);
    check(fx::OAdam{.eta = 0.01, .epsilon = 1e-3}, "OAdam", 3);
    check(fx::AdaGrad{.eta = 0.01, .epsilon = 1e-3}, "AdaGrad", 1);
    check(fx::AdaDelta{.epsilon = 1e-3}, "AdaDelta", 2);
    check(fx::AdaMax{.eta = 0.01, .epsilon = 1e-3}, "AdaMax", 2);
    check(fx::NAdam{.eta = 0.01, .epsilon = 1e-3}, "NAdam", 2);
    check(fx::RAdam{.eta = 0.01, .epsilon = 1e-3}, "RAdam", 2);
    check(fx::AdaBelief{.eta = 0.01, .epsilon = 1e-3}, "AdaBelief", 2);
    check(fx::Lion{.eta = 0.01}, "Lion", 1);
    check(fx::Rprop{.eta = 0.01}, "Rprop", 2);
}

TEST(HalfModels, SavingKeepsTheHalfType) {
    ScratchDir dir;
    for (auto [convert, t, tag] : {std::tuple{fx::bf16, DType::bf16, "BF16"}, std::tuple{fx::f16, DType::f16, "F16"}}) {
        const auto model = convert(small_cnn());
        const auto path = dir / (std::string(tag) + ".safetensors");
        fx::save(path, model);
        EXPECT_NE(io_test::file_bytes(path).find(std::string("\"dtype\":\"") + tag + "\""), std::string::npos) << tag;
        auto loaded = convert(small_cnn());
        EXPECT_TRUE(fx::load(path, loaded).complete());
        const auto want = state_map(model), got = state_map(loaded);
        for (const auto& [name, tensor] : want) {
            EXPECT_EQ(got.at(name).dtype(), t) << name;
            EXPECT_EQ(got.at(name).to_vector<float>(), tensor.to_vector<float>()) << name;
        }
    }
}

// PyTorch loads a bf16 and an f16 model's file as those dtypes, with the same values.
TEST(HalfModels, PyTorchReadsTheHalfFiles) {
    if (std::system((std::string(kPython) + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0)
        GTEST_SKIP() << kPython << " cannot import torch (Debian's python3-torch)";
    ScratchDir dir;
    const auto model = fx::Chain(fx::Dense(3, 4), fx::Dense(4, 2));
    fx::save(dir / "bf16.safetensors", fx::bf16(model));
    fx::save(dir / "f16.safetensors", fx::f16(model));
    const auto script = std::filesystem::path(FLUXION_SOURCE_DIR) / "tests" / "interop" / "torch_half.py";
    const std::string command = std::string(kPython) + " '" + script.string() + "' '" + dir.path().string() + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    for (auto [name, t] : {std::pair{"bf16", DType::bf16}, std::pair{"f16", DType::f16}}) {
        const auto read = fx::load_state(dir / (std::string(name) + "_as_f32.safetensors"));
        for (const auto& [key, tensor] : fx::state(model))
            EXPECT_EQ(read.at(key).to_vector<float>(), tensor.to(t).to(DType::f32).to_vector<float>())
                << name << " " << key;
    }
}

}  // namespace

// The test backend plugin is a second device for OtherBackendsComputeAndTrainAsTheCpuDoes.
int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
