// test_train.cpp — fx::train: an MLP fits sin(3x), a small CNN learns a synthetic image task, the
// loss history, progress output, and the error for a NaN loss. Each runs in seconds.
#include <gtest/gtest.h>

#include <cmath>
#include <ranges>
#include <sstream>
#include <tuple>
#include <vector>

#include "fluxion/data.hpp"
#include "fluxion/layers.hpp"
#include "fluxion/losses.hpp"
#include "fluxion/tensorboard.hpp"
#include "fluxion/train.hpp"
#include "tensorboard_reading.hpp"
#include "test_io_support.hpp"

namespace fx = fluxion;
using fx::Tensor;
using Batches = std::vector<std::tuple<Tensor, Tensor>>;

namespace {

// n points of sin(3x) on [-1, 1], shuffled into batches.
Batches sine_batches(int n, int batch) {
    Tensor x = fx::rand({n, 1}) * 2.0 - 1.0;
    Tensor y = fx::sin(x * 3.0);
    Batches out;
    for (int i = 0; i < n; i += batch) out.emplace_back(x.slice(0, i, i + batch), y.slice(0, i, i + batch));
    return out;
}

auto mse_loss = [](const auto& m, const Tensor& x, const Tensor& y) { return fx::mse(m(x), y); };

TEST(Train, MlpFitsSinOf3x) {
    fx::seed(0);
    auto model = fx::Chain(fx::Dense(1, 32, fx::tanh), fx::Dense(32, 32, fx::tanh), fx::Dense(32, 1));
    auto data = sine_batches(256, 32);
    auto opt = fx::setup(fx::Adam{.eta = 0.01}, model);
    auto history = fx::train(mse_loss, model, data, opt, {.epochs = 300, .progress = false});
    ASSERT_EQ(history.size(), 300u * 8);
    fx::adjust(opt, 0.002);  // a smaller step to settle
    auto settle = fx::train(mse_loss, model, data, opt, {.epochs = 100, .progress = false});

    Tensor grid = fx::arange(-1, 1, 0.01).reshape({-1, 1});
    double test_mse = fx::mse(model(grid), fx::sin(grid * 3.0)).item();
    EXPECT_LT(test_mse, 2e-3);
    EXPECT_LT(settle.back(), history.front() / 20);
}

// 8×8 images with one bright bar, horizontal (class 0) or vertical (class 1), plus noise.
std::tuple<Tensor, Tensor> bars(int n) {
    std::vector<float> pixels;
    std::vector<std::int64_t> labels;
    Tensor noise = fx::rand({n, 64});
    Tensor where = fx::rand({n});
    auto nv = noise.to_vector<float>();
    auto wv = where.to_vector<float>();
    for (int i = 0; i < n; ++i) {
        int label = i % 2, at = 1 + int(wv[i] * 6);
        labels.push_back(label);
        for (int r = 0; r < 8; ++r)
            for (int c = 0; c < 8; ++c) pixels.push_back(0.3f * nv[i * 64 + r * 8 + c] + ((label ? c : r) == at ? 1.0f : 0.0f));
    }
    return {fx::tensor(pixels, {n, 1, 8, 8}), fx::tensor(labels)};
}

double accuracy(const Tensor& logits, const Tensor& labels) {
    auto predicted = fx::argmax(logits, 1).to_vector<std::int64_t>();
    auto want = labels.to_vector<std::int64_t>();
    int right = 0;
    for (std::size_t i = 0; i < want.size(); ++i) right += predicted[i] == want[i];
    return double(right) / double(want.size());
}

TEST(Train, SmallCnnLearnsBarOrientation) {
    fx::seed(1);
    auto model = fx::Chain(fx::Conv({3, 3}, 1, 4, fx::relu, {.pad = fx::SamePad()}), fx::MaxPool({2, 2}),
                           fx::Flatten(), fx::Dense(64, 2));
    Batches data;
    for (int b = 0; b < 8; ++b) {
        auto [x, y] = bars(32);
        data.emplace_back(x, y);
    }
    auto lossfn = [](const auto& m, const Tensor& x, const Tensor& y) {
        return fx::logitcrossentropy(m(x), fx::onehot(y, 2));
    };
    auto [xt, yt] = bars(200);
    EXPECT_LT(accuracy(model(xt), yt), 0.8) << "the task is not solved before training";
    auto opt = fx::setup(fx::Adam{.eta = 0.01}, model);
    fx::train(lossfn, model, data, opt, {.epochs = 15, .progress = false});
    EXPECT_GT(accuracy(model(xt), yt), 0.95);
}

TEST(Train, ReturnsEveryStepsLossAndReportsProgressAsPlainLines) {
    fx::seed(2);
    fx::Dense model(1, 1);
    auto data = sine_batches(64, 16);
    auto opt = fx::setup(fx::Descent{.eta = 0.1}, model);
    std::ostringstream out;
    auto history = fx::train(mse_loss, model, data, opt, {.epochs = 2, .out = &out});
    ASSERT_EQ(history.size(), 8u);
    std::string text = out.str();
    EXPECT_NE(text.find("epoch 1/2 4/4 steps"), std::string::npos) << text;
    EXPECT_NE(text.find("epoch 2/2 4/4 steps"), std::string::npos) << text;
    EXPECT_EQ(text.find('\r'), std::string::npos) << "no bar redraws outside a terminal";
    double mean2 = (history[4] + history[5] + history[6] + history[7]) / 4;
    std::ostringstream want;
    want << "loss " << mean2;
    EXPECT_NE(text.find(want.str()), std::string::npos) << text;
}

TEST(Train, TakesADataLoaderAndCountsItsBatches) {
    fx::seed(4);
    Tensor x = fx::rand({50, 1}), y = x * 2.0;
    fx::DataLoader loader({x, y}, {.batchsize = 16, .shuffle = true});
    fx::Dense model(1, 1);
    auto opt = fx::setup(fx::Descent{.eta = 0.2}, model);
    std::ostringstream out;
    auto history = fx::train(mse_loss, model, loader, opt, {.epochs = 30, .out = &out});
    EXPECT_EQ(history.size(), 30u * 4);
    EXPECT_NE(out.str().find("epoch 30/30 4/4 steps"), std::string::npos) << out.str();
    EXPECT_LT(history.back(), history.front() / 10);
}

TEST(Train, WorksWithDataOfUnknownLengthAndPairs) {
    fx::Dense model(1, 1);
    std::vector<std::pair<Tensor, Tensor>> pairs{{fx::ones({4, 1}), fx::ones({4, 1})}, {fx::ones({4, 1}), fx::zeros({4, 1})}};
    auto unsized = pairs | std::views::filter([](const auto&) { return true; });
    auto opt = fx::setup(fx::Descent{}, model);
    std::ostringstream out;
    auto history = fx::train(mse_loss, model, unsized, opt, {.out = &out});
    EXPECT_EQ(history.size(), 2u);
    EXPECT_NE(out.str().find("epoch 1/1 2 steps"), std::string::npos) << out.str();
}

TEST(Train, NanLossThrowsNamingEpochAndStepBeforeChangingTheModel) {
    fx::seed(3);
    fx::Dense model(1, 1);
    Batches data = sine_batches(48, 16);
    std::get<1>(data[2]) = fx::full({16, 1}, std::nan(""));
    auto opt = fx::setup(fx::Descent{.eta = 0.1}, model);
    fx::Dense after_two = model;
    try {
        fx::train(
            [&](const auto& m, const Tensor& x, const Tensor& y) {
                after_two = fx::fmap([](const Tensor& t) { return t.clone(); }, model);
                return fx::mse(m(x), y);
            },
            model, data, opt, {.epochs = 3, .progress = false});
        FAIL() << "no NumericalError";
    } catch (const fx::NumericalError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("epoch 1, step 3"), std::string::npos) << m;
        EXPECT_NE(m.find("nan"), std::string::npos) << m;
    }
    EXPECT_EQ(model.weight.to_vector<float>(), after_two.weight.to_vector<float>());
    EXPECT_TRUE(std::isfinite(model.weight.to_vector<float>()[0]));
}

TEST(Train, InfiniteLossIsAnErrorToo) {
    fx::Dense model(1, 1);
    Batches data{{fx::ones({2, 1}), fx::ones({2, 1})}};
    auto opt = fx::setup(fx::Descent{}, model);
    auto infinite = [](const auto& m, const Tensor& x, const Tensor&) { return fx::sum(m(x)) / 0.0; };
    EXPECT_THROW(fx::train(infinite, model, data, opt, {.progress = false}), fx::NumericalError);
}

// ---- callbacks ----

TEST(TrainCallbacks, SeeEveryStepThenEachEpochsMean) {
    fx::seed(2);
    fx::Dense model(1, 1);
    auto data = sine_batches(64, 16);
    auto opt = fx::setup(fx::Descent{.eta = 0.1}, model);
    std::vector<fx::TrainEvent> events;
    auto history = fx::train(mse_loss, model, data, opt,
                             {.epochs = 2, .progress = false, .callbacks = {[&](const fx::TrainEvent& e) { events.push_back(e); }}});
    ASSERT_EQ(events.size(), 2u * (4 + 1));
    for (int epoch = 1; epoch <= 2; ++epoch)
        for (std::size_t step = 1; step <= 4; ++step) {
            const auto& e = events[static_cast<std::size_t>((epoch - 1) * 5) + step - 1];
            EXPECT_EQ(e.epoch, epoch);
            EXPECT_EQ(e.step, step);
            EXPECT_EQ(e.steps, (epoch - 1) * 4 + static_cast<std::int64_t>(step));
            EXPECT_FALSE(e.epoch_end);
            EXPECT_EQ(e.loss, history[static_cast<std::size_t>(e.steps - 1)]);
        }
    const auto& end = events[9];
    EXPECT_TRUE(end.epoch_end);
    EXPECT_EQ(end.epoch, 2);
    EXPECT_EQ(end.step, 4u);
    EXPECT_DOUBLE_EQ(end.loss, (history[4] + history[5] + history[6] + history[7]) / 4);
}

TEST(TrainCallbacks, EveryEachEpochAndThrottleFilterEvents) {
    fx::Dense model(1, 1);
    auto data = sine_batches(64, 8);  // 8 steps an epoch
    auto opt = fx::setup(fx::Descent{.eta = 0.01}, model);
    std::vector<std::int64_t> every3, epochs, always, once;
    fx::train(mse_loss, model, data, opt,
              {.epochs = 2, .progress = false,
               .callbacks = {fx::every(3, [&](const fx::TrainEvent& e) { every3.push_back(e.steps); }),
                             fx::each_epoch([&](const fx::TrainEvent& e) { epochs.push_back(e.epoch); }),
                             fx::throttle(0, [&](const fx::TrainEvent& e) { always.push_back(e.steps); }),
                             fx::throttle(1e9, [&](const fx::TrainEvent& e) { once.push_back(e.steps); })}});
    EXPECT_EQ(every3, (std::vector<std::int64_t>{3, 6, 9, 12, 15}));
    EXPECT_EQ(epochs, (std::vector<std::int64_t>{1, 2}));
    EXPECT_EQ(always.size(), 16u + 2u);
    EXPECT_EQ(once, (std::vector<std::int64_t>{1})) << "the first event, then nothing for 1e9 seconds";
    EXPECT_THROW(fx::every(0, [](const fx::TrainEvent&) {}), fx::ValueError);
    EXPECT_THROW(fx::throttle(-1, [](const fx::TrainEvent&) {}), fx::ValueError);
}

TEST(TrainCallbacks, StopEndsTrainingAfterThatStep) {
    fx::Dense model(1, 1);
    auto data = sine_batches(64, 8);
    auto opt = fx::setup(fx::Descent{.eta = 0.01}, model);
    fx::Dense before = fx::fmap([](const Tensor& t) { return t.clone(); }, model);
    auto history = fx::train(mse_loss, model, data, opt,
                             {.epochs = 5, .progress = false, .callbacks = {[](const fx::TrainEvent& e) {
                                  if (e.steps == 11) fx::stop();
                              }}});
    EXPECT_EQ(history.size(), 11u) << "the step that stopped counts; none after it";
    EXPECT_NE(model.weight.to_vector<float>(), before.weight.to_vector<float>());
    // Outside fx::train, stop() is an exception like any other.
    EXPECT_THROW(fx::stop(), fx::StopTraining);
}

TEST(TrainCallbacks, EarlyStoppingAndPlateauFollowFlux) {
    fx::EarlyStopping patience(2, 0.1);
    EXPECT_FALSE(patience(5.0));   // the first score is the best so far
    EXPECT_FALSE(patience(4.0));   // better by more than 0.1
    EXPECT_FALSE(patience(3.95));  // not by 0.1: one
    EXPECT_TRUE(patience(3.99));   // two in a row: stop
    EXPECT_FALSE(patience(1.0));   // better again: waiting starts over
    fx::Plateau flat(2, 0.01);
    EXPECT_FALSE(flat(1.0));
    EXPECT_FALSE(flat(1.005));  // within 0.01 of the one before: one
    EXPECT_FALSE(flat(1.5));    // a jump: starts over
    EXPECT_FALSE(flat(1.501));
    EXPECT_TRUE(flat(1.502));
    EXPECT_THROW(fx::EarlyStopping(0), fx::ValueError);
    EXPECT_THROW(fx::Plateau(1, -1), fx::ValueError);
    // In training: stop when the epoch's loss stops improving.
    fx::Dense model(1, 1);
    auto data = sine_batches(64, 64);
    auto opt = fx::setup(fx::Descent{.eta = 0.0}, model);  // nothing changes: no improvement after the first
    fx::EarlyStopping stale(3);
    auto history = fx::train(mse_loss, model, data, opt,
                             {.epochs = 100, .progress = false, .callbacks = {fx::each_epoch([&](const fx::TrainEvent& e) {
                                  if (stale(e.loss)) fx::stop();
                              })}});
    EXPECT_EQ(history.size(), 4u) << "one best epoch, then three without improvement";
}

TEST(TrainCallbacks, TensorBoardLogsLossesAsTrainingRuns) {
    io_test::ScratchDir dir;
    fx::Dense model(1, 1);
    auto data = sine_batches(64, 16);
    auto opt = fx::setup(fx::Descent{.eta = 0.1}, model);
    std::vector<double> history;
    {
        fx::TensorBoardLogger tb(dir.path() / "runs");
        history = fx::train(mse_loss, model, data, opt, {.epochs = 2, .progress = false, .callbacks = {tb.callback()}});
    }
    const auto r = fx_test::read_with_tensorboard(dir.path() / "runs");
    if (!r.error.empty()) FAIL() << r.error;
    if (!r.skip.empty()) GTEST_SKIP() << r.skip;
    const auto& loss = r.json["scalars"]["train/loss"];
    ASSERT_EQ(loss.size(), 8u);
    for (std::size_t i = 0; i < 8; ++i) {
        EXPECT_EQ(loss[i][0], i + 1);
        EXPECT_EQ(loss[i][1].get<double>(), static_cast<double>(static_cast<float>(history[i])));
    }
    EXPECT_EQ(r.json["scalars"]["train/epoch_loss"].size(), 2u);
}

}  // namespace
