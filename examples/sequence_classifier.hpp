// sequence_classifier.hpp — what audio_like_1d and sequence_lstm share: Fashion-MNIST images
// standardised, a classifier of them trained with Adam on one device (compiled steps, or eager ones),
// its test accuracy printed after every epoch, and the final line with the target.
//
//   auto data = examples::fashion_mnist(o.limit);
//   Model model = Model(...) | dev;
//   const auto result = examples::train(model, data, {.epochs = o.epochs, ...}, dev);
//   examples::report(result, o.epochs, 0.87);
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fluxion/fluxion.hpp>
#include <optional>
#include <tuple>

namespace examples {

// Fashion-MNIST's training and test images {N, 1, 28, 28}, standardised by the training set's mean
// and deviation, and their labels.
struct FashionMnist {
    fluxion::Tensor train_x, train_y, test_x, test_y;
};

// The first `limit` training images only, where given.
inline FashionMnist fashion_mnist(std::optional<std::int64_t> limit) {
    namespace fx = fluxion;
    auto [Xtr, Ytr] = fx::datasets::fashion_mnist(fx::datasets::Split::Train);
    auto [Xte, Yte] = fx::datasets::fashion_mnist(fx::datasets::Split::Test);
    if (limit && *limit < Xtr.shape(0)) {
        Xtr = Xtr.slice(0, 0, *limit);
        Ytr = Ytr.slice(0, 0, *limit);
    }
    const double mean = fx::mean(Xtr).item(), sd = std::sqrt(fx::mean(fx::square(Xtr - mean)).item());
    return {(Xtr - mean) / sd, Ytr, (Xte - mean) / sd, Yte};
}

struct TrainOptions {
    int epochs = 1;
    std::int64_t batchsize = 64, classes = 10;
    std::uint64_t seed = 42;  // the loader's order
    bool eager = false;       // eager steps instead of compiled ones
};

struct TrainResult {
    double accuracy = 0, seconds = 0;  // after the last epoch; every epoch's time, test included
};

inline double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The fraction of `test` that `model` classifies right.
template <class Model, class Data> double accuracy(const Model& model, const fluxion::DataLoader<Data>& test) {
    namespace fx = fluxion;
    fx::NoGrad no_grad;
    std::int64_t correct = 0;
    for (auto [x, y] : test) correct += fx::sum(fx::argmax(model(x), 1) == y).template item<std::int64_t>();
    return double(correct) / double(test.nobs());
}

// Trains `model` (already on `dev`) on the logit cross-entropy of its outputs with Adam (η = 1e-3),
// printing each epoch's loss, test accuracy and time.
template <class Model>
TrainResult train(Model& model, const FashionMnist& data, const TrainOptions& o, const fluxion::Device& dev) {
    namespace fx = fluxion;
    fx::DataLoader train_loader({data.train_x, data.train_y},
                                {.batchsize = o.batchsize, .shuffle = true, .seed = o.seed});
    fx::DataLoader test_loader(std::tuple{data.test_x, data.test_y} | dev, {.batchsize = 1000});
    auto opt = fx::setup(fx::Adam{.eta = 1e-3}, model);
    const std::int64_t classes = o.classes;
    auto lossfn = [classes](const Model& m, const fx::Tensor& x, const fx::Tensor& y) {
        return fx::logitcrossentropy(m(x), fx::onehot(y, classes));
    };
    auto compiled = fx::compile(lossfn, model, opt, {.fall_back = true});
    auto train_step = [&](const fx::Tensor& x, const fx::Tensor& y) -> double {
        if (!o.eager) return compiled(x, y);
        auto [loss, grads] = fx::withgradient([&](const Model& m) { return lossfn(m, x, y); }, model);
        fx::update(opt, model, grads);
        return loss.item();
    };

    fx::Progress progress({.epochs = o.epochs, .steps = train_loader.size(), .unit = "images", .terminal_only = true});
    TrainResult result;
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
        const auto start = std::chrono::steady_clock::now();
        double loss_sum = 0;
        std::size_t steps = 0;
        for (auto [x, y] : train_loader | dev) {
            const double loss = train_step(x, y);
            loss_sum += loss;
            progress.step(epoch, ++steps, loss, x.shape(0));
        }
        progress.clear();
        const double train_seconds = seconds_since(start);
        result.accuracy = accuracy(model, test_loader);
        const double seconds = seconds_since(start);
        result.seconds += seconds;
        std::printf(
            "epoch %d/%d  train loss %.4f  test accuracy %.2f%%  %.1f s (training %.1f s, %.0f "
            "images/s)\n",
            epoch, o.epochs, loss_sum / double(steps), 100 * result.accuracy, seconds, train_seconds,
            double(data.train_x.shape(0)) / train_seconds);
        std::fflush(stdout);
    }
    return result;
}

// The final line: the accuracy, the time and whether it reached `target`.
inline void report(const TrainResult& r, int epochs, double target) {
    std::printf("final test accuracy %.2f%% after %d epoch%s in %.1f s: %s the %.0f%% target\n", 100 * r.accuracy,
                epochs, epochs == 1 ? "" : "s", r.seconds, r.accuracy >= target ? "reached" : "did NOT reach",
                100 * target);
}

}  // namespace examples
