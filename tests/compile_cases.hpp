// compile_cases.hpp — models, data and the eager-against-compiled comparison shared by the tests
// of fx::compile on the CPU (test_compile.cpp) and on the other devices (test_compile_devices.cpp).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "fluxion/fluxion.hpp"

namespace compile_cases {

namespace fx = fluxion;
using fx::Tensor;

using Batches = std::vector<std::tuple<Tensor, Tensor>>;

template <class M> M deep_copy(const M& m) {
    return fx::fmap([](const Tensor& t) { return t.clone(); }, m);
}

// The largest difference between two models' tensors (parameters and running statistics alike),
// relative to the larger magnitude of the two.
template <class M> double max_difference(const M& a, const M& b) {
    std::vector<Tensor> ta, tb;
    fx::for_each_tensor(a, [&](const Tensor& t) { ta.push_back(t); });
    fx::for_each_tensor(b, [&](const Tensor& t) { tb.push_back(t); });
    EXPECT_EQ(ta.size(), tb.size());
    double worst = 0;
    for (std::size_t i = 0; i < ta.size(); ++i) {
        auto va = ta[i].to_vector<float>(), vb = tb[i].to_vector<float>();
        for (std::size_t j = 0; j < va.size(); ++j)
            worst = std::max(worst, std::abs(double(va[j]) - vb[j]) / std::max(1.0, std::abs(double(va[j]))));
    }
    return worst;
}

inline Batches regression_batches(int steps, int batch, int in) {
    Batches out;
    for (int i = 0; i < steps; ++i) out.emplace_back(fx::randn({batch, in}), fx::randn({batch, 1}));
    return out;
}

inline Batches class_batches(int steps, const fx::Shape& x_shape, int classes) {
    Batches out;
    for (int i = 0; i < steps; ++i) {
        std::vector<std::int64_t> labels(static_cast<std::size_t>(x_shape[0]));
        for (std::size_t j = 0; j < labels.size(); ++j)
            labels[j] = static_cast<std::int64_t>((i * 7 + j * 3) % classes);
        out.emplace_back(fx::randn(x_shape), fx::tensor(labels));
    }
    return out;
}

// Trains copies of `model` for every batch by `rule`, eagerly and compiled, from the same random
// state, on `device`; returns the largest relative difference between the two trained models.
template <class M, class Loss, class Rule = fx::Adam>
double eager_vs_compiled(const M& model, const Loss& loss, const Batches& data, const fx::Device& device = {},
                         const Rule& rule = fx::Adam{.eta = 1e-3}) {
    M eager = deep_copy(model) | device, compiled = deep_copy(model) | device;
    auto opt_e = fx::setup(rule, eager);
    auto opt_c = fx::setup(rule, compiled);
    fx::seed(7);
    std::vector<double> loss_e, loss_c;
    Batches there;
    for (const auto& [x, y] : data) there.emplace_back(x | device, y | device);
    for (const auto& [x, y] : there) {
        auto [l, g] = fx::withgradient([&](const M& m) { return loss(m, x, y); }, eager);
        fx::update(opt_e, eager, g);
        loss_e.push_back(l.item());
    }
    fx::seed(7);
    auto step = fx::compile(loss, compiled, opt_c);
    for (const auto& [x, y] : there) loss_c.push_back(step(x, y));
    for (std::size_t i = 0; i < loss_e.size(); ++i) EXPECT_NEAR(loss_e[i], loss_c[i], 1e-4 * (1 + std::abs(loss_e[i])));
    EXPECT_EQ(opt_e.params[0].t, opt_c.params[0].t);
    double difference = max_difference(eager, compiled);
    std::printf("%s: largest relative difference after %zu steps: %.3g\n", device.str().c_str(), data.size(),
                difference);
    return difference;
}

inline auto mse_loss = [](const auto& m, const Tensor& x, const Tensor& y) { return fx::mse(m(x), y); };
inline auto class_loss = [](const auto& m, const Tensor& x, const Tensor& y) {
    return fx::logitcrossentropy(m(x), fx::onehot(y, 10));
};

inline auto lenet5() {
    return fx::Chain(fx::Conv({5, 5}, 1, 6, fx::relu), fx::MaxPool({2, 2}), fx::Conv({5, 5}, 6, 16, fx::relu),
                     fx::MaxPool({2, 2}), fx::Flatten(), fx::Dense(256, 120, fx::relu), fx::Dense(120, 84, fx::relu),
                     fx::Dense(84, 10));
}

inline auto norm_dropout_mlp() {
    return fx::Chain(fx::Dense(20, 32), fx::BatchNorm(32, fx::relu), fx::Dropout(0.3), fx::Dense(32, 10));
}

// check(rule, name) for each rule the compiled-step tests run beyond Descent ... AdamW.
template <class F> void for_each_rule(F&& check) {
    check(fx::AMSGrad{}, "AMSGrad");
    check(fx::OAdam{}, "OAdam");
    check(fx::AdaGrad{}, "AdaGrad");
    check(fx::AdaDelta{}, "AdaDelta");
    check(fx::AdaMax{}, "AdaMax");
    check(fx::NAdam{}, "NAdam");
    check(fx::RAdam{}, "RAdam");
    check(fx::AdaBelief{}, "AdaBelief");
    check(fx::Lion{}, "Lion");
    check(fx::Rprop{}, "Rprop");
}

}  // namespace compile_cases
