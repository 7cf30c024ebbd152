// bench_models.cpp — whole models as a user runs them, on the CPU and on every other functional
// device: the seed's forward pass, and one training step (forward, gradient, Adam update) of
// models from small to large. bench/compare.py runs the same models in PyTorch beside these.
//
//   mlp_forward    Dense 100 => 200 (relu) => 1, batch 128, forward only (the seed's comparison)
//   mlp_train      the same MLP, one step of mse + Adam
//   lenet5_train   LeNet-5 on 1×28×28, batch 64, logitcrossentropy + Adam (the main job's step)
//   wide_train     Dense 784 => 1024 => 1024 => 10 (relu), batch 256 (matmul-bound)
//   convnet_train  3×32×32 images, Conv 3=>32 => Conv 32=>64 => Conv 64=>128 (3×3, pad 1, relu,
//                  each followed by MaxPool 2), Dense 2048 => 10, batch 64 (convolution-bound)
//   lstm_train     LSTM 28 => 128 over 28 steps of 28 features, Dense 128 => 10 on the last step,
//                  batch 64, logitcrossentropy + Adam (examples/sequence_lstm's step)
//   encoder_train  one TransformerEncoderLayer (width 64, 4 heads, feed-forward 128, relu, no
//                  dropout) on 49 tokens, the mean over tokens into Dense 64 => 10, batch 64
//   lenet5_bf16_train  lenet5_train in bf16 mixed precision (fx::MixedPrecision: f32 masters and
//                  Adam state, forward and backward in bf16), beside lenet5_train in f32
//   wide_bf16_train, convnet_bf16_train  the same for the wide MLP and the convnet
//   resnet18_forward  fx::models::resnet18 (ImageNet's 1000 classes) in test mode, batch 8 of
//                  3×224×224, forward only
//   resnet18_train  ResNet-18 with 10 classes in train mode, batch 32 of 3×64×64,
//                  logitcrossentropy + Adam
//   unet_train     examples/unet_denoise's U-Net (width 16: 3×3 convolutions without bias, each
//                  followed by GroupNorm(·, 4) and relu, at 28², 14², 7²; MaxPool 2 down;
//                  ConvTranspose 2×2 stride 2 and nearest Upsample then a 3×3 convolution up; the
//                  skips concatenated; a 1×1 head subtracted from the input), batch 64 of 1×28×28,
//                  mse + Adam
//   *_compiled     the same through fx::compile: a recorded step replayed
#include <benchmark/benchmark.h>

#include <fluxion/fluxion.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace fx = fluxion;

namespace {

// lstm_train's model: the LSTM's hidden state after the last step, classified.
struct LastStep {
    fx::LSTM lstm{28, 128};
    fx::Dense head{128, 10};
    fx::Tensor operator()(const fx::Tensor& x) const { return head(lstm(x).output.select(1, x.shape(1) - 1)); }
};

// encoder_train's model: one encoder layer, its tokens averaged and classified.
struct Encoder {
    fx::TransformerEncoderLayer layer{64, 4, {.feedforward = 128, .dropout = 0.0}};
    fx::Dense head{64, 10};
    fx::Tensor operator()(const fx::Tensor& x) const { return head(fx::mean(layer(x), 1)); }
};

// unet_train's model: examples/unet_denoise's U-Net (kept in step with it by hand).
struct UNetBlock {
    fx::Conv conv;
    fx::GroupNorm norm;
    UNetBlock(std::int64_t in, std::int64_t out)
        : conv({3, 3}, in, out, {.pad = 1, .bias = false}), norm(out, 4, fx::relu) {}
    fx::Tensor operator()(const fx::Tensor& x) const { return norm(conv(x)); }
};

struct UNet {
    static constexpr std::int64_t w = 16;
    UNetBlock enc1{1, w}, enc2{w, 2 * w}, bottleneck{2 * w, 4 * w}, dec2{4 * w, 2 * w}, dec1{2 * w, w};
    fx::ConvTranspose up2{{2, 2}, 4 * w, 2 * w, {.stride = 2}};
    fx::Conv up1{{3, 3}, 2 * w, w, {.pad = 1}}, head{{1, 1}, w, 1};
    fx::MaxPool pool = fx::MaxPool({2, 2});
    fx::Upsample upsample{fx::UpsampleMode::nearest, {.scale = {2}}};
    fx::Tensor operator()(const fx::Tensor& x) const {
        const fx::Tensor e1 = enc1(x), e2 = enc2(pool(e1)), b = bottleneck(pool(e2));
        const fx::Tensor d2 = dec2(fx::concat({up2(b), e2}, 1));
        return x - head(dec1(fx::concat({up1(upsample(d2)), e1}, 1)));
    }
};

}  // namespace

FLUXION_FUNCTOR(LastStep, lstm, head);
FLUXION_FUNCTOR(Encoder, layer, head);
FLUXION_FUNCTOR(UNetBlock, conv, norm);
FLUXION_FUNCTOR(UNet, enc1, enc2, bottleneck, dec2, dec1, up2, up1, head);

namespace {

void sync_and_keep(const fx::Tensor& t) {
    fx::synchronize(t.device());
    benchmark::DoNotOptimize(t.data_ptr());
}

void mlp_forward(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    const auto model = fx::Chain(fx::Dense(100, 200, fx::relu), fx::Dense(200, 1)) | dev;
    const fx::Tensor x = fx::randn({128, 100}) | dev;
    fx::NoGrad no_grad;
    for (auto _ : state) sync_and_keep(model(x));
}

void mlp_forward_compiled(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    const auto model = fx::Chain(fx::Dense(100, 200, fx::relu), fx::Dense(200, 1)) | dev;
    const fx::Tensor x = fx::randn({128, 100}) | dev;
    auto fwd = fx::compile(model);
    sync_and_keep(fwd(x));  // the recording, outside the timed replays
    for (auto _ : state) sync_and_keep(fwd(x));
}

// One step as the main job takes it: the loss and gradients, then the optimiser's update in place.
template <class Model, class Loss>
void train_steps(benchmark::State& state, Model model, const fx::Tensor& x, const fx::Tensor& y, Loss loss) {
    auto opt = fx::setup(fx::Adam{.eta = 1e-3}, model);
    for (auto _ : state) {
        auto [lv, grads] = fx::withgradient([&](const Model& m) { return loss(m(x), y); }, model);
        fx::update(opt, model, grads);
        sync_and_keep(lv);
    }
}

template <class Model, class Loss>
void compiled_steps(benchmark::State& state, Model model, const fx::Tensor& x, const fx::Tensor& y, Loss loss) {
    auto opt = fx::setup(fx::Adam{.eta = 1e-3}, model);
    auto step = fx::compile([&](const Model& m, const fx::Tensor& xb, const fx::Tensor& yb) { return loss(m(xb), yb); },
                            model, opt);
    benchmark::DoNotOptimize(step(x, y));  // the recording, outside the timed replays
    for (auto _ : state) benchmark::DoNotOptimize(step(x, y));
    // Whether a GPU replays the step as one submission (else call by call), and how many calls.
    const fx::CompileStats stats = step.stats(x, y);
    state.counters["recorded"] = stats.recorded;
    state.counters["kernels"] = double(stats.kernels);
}

auto crossentropy_on(const fx::Tensor& labels, std::int64_t classes) {
    return [onehot = fx::onehot(labels, classes)](const fx::Tensor& logits, const fx::Tensor&) {
        return fx::logitcrossentropy(logits, onehot);
    };
}

fx::Tensor labels(std::int64_t n, std::int64_t classes, const fx::Device& dev) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i % classes;
    return fx::tensor(v) | dev;
}

template <bool compiled> void mlp_train(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    auto model = fx::Chain(fx::Dense(100, 200, fx::relu), fx::Dense(200, 1)) | dev;
    const fx::Tensor x = fx::randn({128, 100}) | dev, y = fx::randn({128, 1}) | dev;
    auto mse = [](const fx::Tensor& yhat, const fx::Tensor& t) { return fx::mse(yhat, t); };
    if constexpr (compiled) compiled_steps(state, model, x, y, mse);
    else train_steps(state, model, x, y, mse);
}

auto lenet5() {
    return fx::Chain(fx::Conv({5, 5}, 1, 6, fx::relu), fx::MaxPool({2, 2}), fx::Conv({5, 5}, 6, 16, fx::relu),
                     fx::MaxPool({2, 2}), fx::Flatten(), fx::Dense(256, 120, fx::relu), fx::Dense(120, 84, fx::relu),
                     fx::Dense(84, 10));
}

template <bool compiled> void lenet5_train(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    auto model = lenet5() | dev;
    const fx::Tensor x = fx::randn({64, 1, 28, 28}) | dev, y = labels(64, 10, dev);
    if constexpr (compiled) compiled_steps(state, model, x, y, crossentropy_on(y, 10));
    else train_steps(state, model, x, y, crossentropy_on(y, 10));
}

// The step of fx::MixedPrecision: the gradient of a bf16 copy, widened to f32 for Adam on the f32
// masters, which are rounded into the copy again.
template <bool compiled, class Model>
void bf16_steps(benchmark::State& state, const Model& model, const fx::Tensor& x, const fx::Tensor& y) {
    auto mp = fx::MixedPrecision(fx::Adam{.eta = 1e-3}, model, fx::DType::bf16);
    const auto loss = crossentropy_on(y, 10);
    const auto lossfn = [&](const auto& m, const fx::Tensor& xb, const fx::Tensor& yb) { return loss(m(xb), yb); };
    if constexpr (compiled) {
        auto step = fx::compile(lossfn, mp);
        benchmark::DoNotOptimize(step(x, y));
        for (auto _ : state) benchmark::DoNotOptimize(step(x, y));
    } else {
        for (auto _ : state) benchmark::DoNotOptimize(mp.step(lossfn, x, y));
    }
}

template <bool compiled> void lenet5_bf16_train(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    const auto model = lenet5() | dev;
    bf16_steps<compiled>(state, model, fx::randn({64, 1, 28, 28}) | dev, labels(64, 10, dev));
}

template <bool compiled> void lstm_train(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    const fx::Tensor x = fx::randn({64, 28, 28}) | dev, y = labels(64, 10, dev);
    if constexpr (compiled) compiled_steps(state, LastStep{} | dev, x, y, crossentropy_on(y, 10));
    else train_steps(state, LastStep{} | dev, x, y, crossentropy_on(y, 10));
}

template <bool compiled> void encoder_train(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    const fx::Tensor x = fx::randn({64, 49, 64}) | dev, y = labels(64, 10, dev);
    if constexpr (compiled) compiled_steps(state, Encoder{} | dev, x, y, crossentropy_on(y, 10));
    else train_steps(state, Encoder{} | dev, x, y, crossentropy_on(y, 10));
}

auto wide() {
    return fx::Chain(fx::Dense(784, 1024, fx::relu), fx::Dense(1024, 1024, fx::relu), fx::Dense(1024, 10));
}

auto convnet() {
    const fx::ConvOptions same{.pad = 1};
    return fx::Chain(fx::Conv({3, 3}, 3, 32, fx::relu, same), fx::MaxPool({2, 2}), fx::Conv({3, 3}, 32, 64, fx::relu, same),
                     fx::MaxPool({2, 2}), fx::Conv({3, 3}, 64, 128, fx::relu, same), fx::MaxPool({2, 2}), fx::Flatten(),
                     fx::Dense(2048, 10));
}

template <bool compiled> void wide_train(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    const fx::Tensor x = fx::randn({256, 784}) | dev, y = labels(256, 10, dev);
    if constexpr (compiled) compiled_steps(state, wide() | dev, x, y, crossentropy_on(y, 10));
    else train_steps(state, wide() | dev, x, y, crossentropy_on(y, 10));
}

template <bool compiled> void convnet_train(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    const fx::Tensor x = fx::randn({64, 3, 32, 32}) | dev, y = labels(64, 10, dev);
    if constexpr (compiled) compiled_steps(state, convnet() | dev, x, y, crossentropy_on(y, 10));
    else train_steps(state, convnet() | dev, x, y, crossentropy_on(y, 10));
}

template <bool compiled> void wide_bf16_train(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    bf16_steps<compiled>(state, wide() | dev, fx::randn({256, 784}) | dev, labels(256, 10, dev));
}

template <bool compiled> void convnet_bf16_train(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    bf16_steps<compiled>(state, convnet() | dev, fx::randn({64, 3, 32, 32}) | dev, labels(64, 10, dev));
}

template <bool compiled> void resnet18_forward(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    auto model = fx::models::resnet18() | dev;
    fx::testmode(model);
    const fx::Tensor x = fx::randn({8, 3, 224, 224}) | dev;
    if constexpr (compiled) {
        auto fwd = fx::compile(model);
        sync_and_keep(fwd(x));
        for (auto _ : state) sync_and_keep(fwd(x));
    } else {
        fx::NoGrad no_grad;
        for (auto _ : state) sync_and_keep(model(x));
    }
}

template <bool compiled> void resnet18_train(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    auto model = fx::models::resnet18({.num_classes = 10}) | dev;
    const fx::Tensor x = fx::randn({32, 3, 64, 64}) | dev, y = labels(32, 10, dev);
    if constexpr (compiled) compiled_steps(state, model, x, y, crossentropy_on(y, 10));
    else train_steps(state, model, x, y, crossentropy_on(y, 10));
}

template <bool compiled> void unet_train(benchmark::State& state, fx::Device dev) {
    fx::seed(0);
    const fx::Tensor x = fx::randn({64, 1, 28, 28}) | dev, y = fx::randn({64, 1, 28, 28}) | dev;
    auto mse = [](const fx::Tensor& yhat, const fx::Tensor& t) { return fx::mse(yhat, t); };
    if constexpr (compiled) compiled_steps(state, UNet{} | dev, x, y, mse);
    else train_steps(state, UNet{} | dev, x, y, mse);
}

int register_all() {
    // What ran, before the figures (stderr: compare.py reads the JSON on stdout).
    std::fprintf(stderr, "%s\n", fx::info().c_str());
    // Every functional GPU's first device; devices that run on the CPU (lavapipe) are not timed.
    std::vector<fx::Device> devices{fx::Device{}};
    for (const auto& name : fx::supported_devices()) {
        if (name == "CPU" || name == "AMDGPU" || name == "Metal" || !fx::functional(name)) continue;
        const auto infos = fx::devices(name);
        if (!infos.empty() && infos[0].kind != fx::DeviceKind::cpu) devices.push_back(infos[0].device);
    }
    for (const auto& dev : devices) {
        // A case the device cannot run (a kernel it lacks for a dtype) is reported as skipped with
        // fluxion's message, and the other cases still run.
        auto add = [&](const char* model, void (*fn)(benchmark::State&, fx::Device)) {
            auto guarded = [fn](benchmark::State& state, fx::Device d) {
                try {
                    fn(state, d);
                } catch (const fx::Error& e) {
                    state.SkipWithError(e.what());
                }
            };
            benchmark::RegisterBenchmark((std::string(model) + "/" + dev.type).c_str(), guarded, dev)->UseRealTime();
        };
        add("mlp_forward", mlp_forward);
        add("mlp_train", mlp_train<false>);
        add("lenet5_train", lenet5_train<false>);
        add("wide_train", wide_train<false>);
        add("convnet_train", convnet_train<false>);
        add("lstm_train", lstm_train<false>);
        add("encoder_train", encoder_train<false>);
        add("lenet5_bf16_train", lenet5_bf16_train<false>);
        add("wide_bf16_train", wide_bf16_train<false>);
        add("convnet_bf16_train", convnet_bf16_train<false>);
        add("resnet18_forward", resnet18_forward<false>);
        add("resnet18_train", resnet18_train<false>);
        add("unet_train", unet_train<false>);
        add("mlp_forward_compiled", mlp_forward_compiled);
        add("mlp_train_compiled", mlp_train<true>);
        add("lenet5_train_compiled", lenet5_train<true>);
        add("wide_train_compiled", wide_train<true>);
        add("convnet_train_compiled", convnet_train<true>);
        add("lstm_train_compiled", lstm_train<true>);
        add("encoder_train_compiled", encoder_train<true>);
        add("lenet5_bf16_train_compiled", lenet5_bf16_train<true>);
        add("wide_bf16_train_compiled", wide_bf16_train<true>);
        add("convnet_bf16_train_compiled", convnet_bf16_train<true>);
        add("resnet18_forward_compiled", resnet18_forward<true>);
        add("resnet18_train_compiled", resnet18_train<true>);
        add("unet_train_compiled", unet_train<true>);
    }
    return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
