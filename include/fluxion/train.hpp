// fluxion/train.hpp — the training loop (Flux's train!):
//
//   auto lossfn = [](const auto& m, const fx::Tensor& x, const fx::Tensor& y) { return fx::mse(m(x), y); };
//   auto opt = fx::setup(fx::Adam{}, model);
//   std::vector<double> losses = fx::train(lossfn, model, data, opt, {.epochs = 5});
//
// `data` is anything iterable whose elements destructure as [x, y] (a vector of tuples or pairs, a
// DataLoader). Each step takes the gradient of lossfn(model, x, y) (a one-element tensor) and
// updates the model. Returns the loss of every step, all epochs in order.
//
// Progress (fluxion/progress.hpp, the same display for a loop of your own): on a terminal, one line
// redrawn in place (epoch, steps done/total when the data has a size, rate, time left, running mean
// loss of the epoch); otherwise a plain line every 10 seconds and one per epoch. A loss that is NaN
// or infinite throws fx::NumericalError naming the epoch and step, before that step changes the model.
//
// Steps whose batches are pairs of tensors run compiled, on every device (fx::compile: the first
// step of each batch shape is traced, the others replay it without allocating); a loss function
// that cannot be replayed (it saves tensors outside itself) falls back to eager steps.
// `.compile = false` runs every step eagerly. Callbacks (fluxion/callbacks.hpp) run after each step
// and at each epoch's end; one that calls fx::stop() ends training there.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <iterator>
#include <optional>
#include <type_traits>
#include <vector>

#include "fluxion/autodiff.hpp"
#include "fluxion/callbacks.hpp"
#include "fluxion/compile.hpp"
#include "fluxion/optimisers.hpp"
#include "fluxion/progress.hpp"

namespace fluxion {

struct TrainOptions {
    int epochs = 1;
    bool progress = true;
    std::ostream* out = nullptr;  // where progress goes: stdout (a bar when it is a terminal) unless set
    bool compile = true;          // compiled steps where they can run (see above)
    std::vector<Callback> callbacks = {};  // after each step and each epoch, in order (fluxion/callbacks.hpp)
};

namespace detail {
[[noreturn]] void throw_not_finite(int epoch, std::size_t step, double loss);
}  // namespace detail

template <class LossFn, class Model, class Data, class Rule>
std::vector<double> train(LossFn&& lossfn, Model& model, Data&& data, OptimiserState<Rule>& opt,
                          const TrainOptions& options = {}) {
    std::optional<std::int64_t> steps;
    if constexpr (requires { std::size(data); }) steps = static_cast<std::int64_t>(std::size(data));
    std::optional<Progress> progress;
    if (options.progress) progress.emplace(ProgressOptions{.epochs = options.epochs, .steps = steps, .out = options.out});
    std::vector<double> history;
    auto fn = [&lossfn](const Model& m, const auto& x, const auto& y) { return lossfn(m, x, y); };
    std::optional<CompiledStep<decltype(fn), Model, Rule>> compiled;
    if (options.compile) compiled.emplace(fn, model, opt, CompileOptions{.fall_back = true});
    std::int64_t total = 0;
    auto call = [&](const TrainEvent& event) {
        for (const auto& callback : options.callbacks) callback(event);
    };
    for (int epoch = 1; epoch <= options.epochs; ++epoch) {
        std::size_t step = 0;
        double epoch_sum = 0;
        try {
            for (auto&& batch : data) {
                ++step;
                auto&& [bx, by] = batch;
                const auto& x = bx;
                const auto& y = by;
                auto finite = [&](double v) {
                    if (!std::isfinite(v)) detail::throw_not_finite(epoch, step, v);
                };
                auto eager = [&] {
                    auto [loss, grads] = withgradient([&](const Model& m) { return lossfn(m, x, y); }, model);
                    double v = loss.item();
                    finite(v);
                    update(opt, model, grads);
                    return v;
                };
                double value;
                using X = std::remove_cvref_t<decltype(x)>;
                using Y = std::remove_cvref_t<decltype(y)>;
                if constexpr (std::is_same_v<X, Tensor> && std::is_same_v<Y, Tensor>)
                    value = compiled ? static_cast<double>((*compiled)(x, y, finite)) : eager();
                else
                    value = eager();
                history.push_back(value);
                epoch_sum += value;
                if (progress) progress->step(epoch, step, value);
                call({.epoch = epoch, .step = step, .steps = ++total, .loss = value});
            }
            call({.epoch = epoch, .step = step, .steps = total,
                  .loss = step ? epoch_sum / static_cast<double>(step) : 0.0, .epoch_end = true});
        } catch (const StopTraining&) {
            if (progress) progress->end_epoch(epoch, step);
            return history;
        }
        if (progress) progress->end_epoch(epoch, step);
    }
    return history;
}

}  // namespace fluxion
