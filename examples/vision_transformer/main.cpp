// A vision transformer: each Fashion-MNIST image is cut into 4×4 patches (49 tokens of 16 pixels),
// embedded linearly, a learned class token is put in front, a learned position embedding is added,
// Transformer encoder layers read the 50 tokens, and the class token's output is classified, on the
// best device there is. Run with --help.
//
// Default: width 64, 4 heads, 2 pre-norm encoder layers with a feed-forward width of 128, AdamW
// (η = 2e-3, warm-up then cosine decay), batch 64, 12 epochs; the target is 87% test accuracy
// (issue 14). One run on the CPU (2 cores shared with other builds, FLUXION_NUM_THREADS=1
// OMP_WAIT_POLICY=passive, 2026-11-25): 82.2% after 1 epoch, 87.3% after 6, 89.1% after 12, in
// 20 min 42 s (75-139 s an epoch); PyTorch 1.13 loads the saved file into nn.TransformerEncoderLayer
// modules and gets the same 89.10%.
//
// Choices measured on the CPU (2026-11-25, one run each): a class token against the mean of the 49
// tokens, 1 epoch on 20,000 images, 80.6% against 79.6% test accuracy (η = 2e-3) and 81.0% against
// 80.3% (η = 3e-3). Positions drawn from N(0, 1) rather than ViT's N(0, 0.02²): one layer, mean
// pooling, η = 3e-3, 2 epochs on 5,000 images, 74.1% against 70.0% (a likely reason: with tiny
// positions every token looks alike to attention until they have grown). Batch 64 rather than 128:
// twice the updates per epoch, and a step of 64 images still fills the matrix products.
#include <fluxion/fluxion.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "command_line.hpp"

namespace fx = fluxion;
namespace fs = std::filesystem;

namespace {

constexpr double kTargetAccuracy = 0.87;
constexpr std::int64_t kClasses = 10, kSide = 28, kPatch = 4;
constexpr std::int64_t kGrid = kSide / kPatch, kTokens = kGrid * kGrid, kPatchValues = kPatch * kPatch;
constexpr std::uint64_t kSeed = 42;

struct Options {
    int epochs = 12;
    std::int64_t batchsize = 64, width = 64, heads = 4, layers = 2;
    double eta = 2e-3;                  // AdamW's peak learning rate
    std::optional<std::string> device;  // the best one when not given
    std::optional<std::int64_t> limit;  // training images used
    fs::path out = ".";
    bool eager = false;  // eager steps instead of compiled ones
};

const char* const kUsage = R"(usage: vision_transformer [options]

Trains a vision transformer on Fashion-MNIST cut into 4×4 patches (49 tokens of 16 values, and a
class token) and saves vision_transformer.safetensors (the encoder layers under PyTorch's
nn.TransformerEncoderLayer names: layers.0.self_attn.in_proj_weight, ...).

  --epochs N        passes over the training set (default 12)
  --batchsize N     images per step (default 64)
  --width N         the token width (default 64); the feed-forward blocks are twice as wide
  --heads N         attention heads per layer, dividing the width (default 4)
  --layers N        encoder layers (default 2)
  --eta X           AdamW's peak learning rate (default 0.002)
  --device NAME     CPU, CUDA, ... (default: the best functional device, see fx::get_device)
  --limit N         train on the first N training images only (quick runs)
  --out DIR         where the model goes (default: the working directory)
  --eager           eager training steps (default: compiled with fx::compile)
  --help            this text

The data is read from $FLUXION_DATA, else /usr/share/datasets/fashion-mnist.
)";

// Images {N, 1, 28, 28} as 49 tokens {N, 49, 16}: patch (r, c) is token 7r + c, its pixels row by row.
fx::Tensor patches(const fx::Tensor& images) {
    const std::int64_t n = images.shape(0);
    return images.reshape({n, kGrid, kPatch, kGrid, kPatch})
        .permute({0, 1, 3, 2, 4})
        .reshape({n, kTokens, kPatchValues});
}

struct VisionTransformer {
    fx::Dense patch_embed;   // 16 => width, the same for every patch
    fx::Tensor class_token;  // {1, 1, width}: token 0 of every image, whose output is classified
    fx::Tensor position;     // {50, width}: added to token i
    std::vector<fx::TransformerEncoderLayer> layers;
    fx::LayerNorm norm;  // pre-norm layers leave their output unnormalised
    fx::Dense head;

    explicit VisionTransformer(const Options& o)
        : patch_embed(kPatchValues, o.width),
          class_token(fx::randn({1, 1, o.width})),
          position(fx::randn({kTokens + 1, o.width})),
          norm(o.width),
          head(o.width, kClasses) {
        // Pre-norm (x + f(norm(x))) trains without a long warm-up; no dropout: over the 12 epochs of
        // the default run the test accuracy still rose at every epoch.
        for (std::int64_t i = 0; i < o.layers; ++i)
            layers.emplace_back(
                o.width, o.heads,
                fx::TransformerEncoderOptions{
                    .feedforward = 2 * o.width, .dropout = 0.0, .activation = fx::gelu_erf, .norm_first = true});
    }

    fx::Tensor operator()(const fx::Tensor& images) const {
        fx::Tensor x = patch_embed(patches(images));  // {N, 49, width}
        x = fx::concat({class_token.expand({x.shape(0), 1, x.shape(2)}), x}, 1) + position;
        for (const auto& layer : layers) x = layer(x);
        return head(norm(x).select(1, 0));  // {N, 50, width} -> {N, width} -> {N, 10}
    }

    void show(fx::detail::Shower& s) const {
        s.open("VisionTransformer");
        s.layer(patch_embed);
        for (const auto& [name, t] : {std::pair{"class_token", &class_token}, std::pair{"position", &position}})
            s.item(std::string(name) + " " + fx::to_string(t->shape()),
                   fx::detail::layer_comment(fx::detail::count_params(*t)));
        for (const auto& layer : layers) s.layer(layer);
        s.layer(norm);
        s.layer(head);
        s.close();
    }
};

}  // namespace

FLUXION_FUNCTOR(VisionTransformer, patch_embed, class_token, position, layers, norm, head);

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Linear warm-up over the first 5% of the steps (at least one), then a cosine decay to zero: Adam's
// first steps, with moments estimated from a handful of gradients, do not get the full rate. The
// warm-up is the rising half of a triangle, shifted by one step so that the first rate is not 0.
fx::Schedule warmup_then_cosine(double eta, std::int64_t steps) {
    const std::int64_t warmup = std::max<std::int64_t>(1, steps / 20);
    return fx::Sequence({{fx::Shifted{fx::Triangle{.l0 = 0, .l1 = eta, .period = 2 * warmup}, 2}, warmup},
                         {fx::CosAnneal{.l0 = eta, .l1 = 0, .period = std::max<std::int64_t>(1, steps - warmup),
                                        .restart = false},
                          std::max<std::int64_t>(1, steps - warmup)}});
}

template <class Data> double accuracy(const VisionTransformer& model, const fx::DataLoader<Data>& test) {
    fx::NoGrad no_grad;
    std::int64_t correct = 0;
    for (auto [x, y] : test) correct += fx::sum(fx::argmax(model(x), 1) == y).template item<std::int64_t>();
    return double(correct) / double(test.nobs());
}

int run(const Options& o, const fx::Device& dev) {
    fs::create_directories(o.out);  // before training, so that a bad --out fails at once
    auto [Xtr, Ytr] = fx::datasets::fashion_mnist(fx::datasets::Split::Train);
    auto [Xte, Yte] = fx::datasets::fashion_mnist(fx::datasets::Split::Test);
    if (o.limit && *o.limit < Xtr.shape(0)) {
        Xtr = Xtr.slice(0, 0, *o.limit);
        Ytr = Ytr.slice(0, 0, *o.limit);
    }
    // Standardised in place a slice at a time, as examples/fashion_mnist does: one copy of the
    // training images (188 MB) instead of three.
    const double mean = fx::mean(Xtr).item(), sd = std::sqrt(fx::mean(fx::square(Xtr)).item() - mean * mean);
    for (fx::Tensor* X : {&Xtr, &Xte})
        for (std::int64_t i = 0; i < X->shape(0); i += 5000) {
            fx::Tensor part = X->slice(0, i, std::min(i + 5000, X->shape(0)));
            part.copy_((part - mean) / sd);
        }
    std::printf("data: %lld training and %lld test images, read as %lld patches of %lld×%lld\n",
                static_cast<long long>(Xtr.shape(0)), static_cast<long long>(Xte.shape(0)),
                static_cast<long long>(kTokens), static_cast<long long>(kPatch), static_cast<long long>(kPatch));

    fx::DataLoader train_loader({Xtr, Ytr}, {.batchsize = o.batchsize, .shuffle = true, .seed = kSeed});
    fx::DataLoader test_loader(std::tuple{Xte, Yte} | dev, {.batchsize = 1000});

    VisionTransformer model = VisionTransformer(o) | dev;
    using fx::operator<<;  // the model is ours, found by no lookup in fluxion
    std::cout << model << "\n";
    auto opt = fx::setup(fx::AdamW{.eta = o.eta}, model);
    auto lossfn = [](const VisionTransformer& m, const fx::Tensor& x, const fx::Tensor& y) {
        return fx::logitcrossentropy(m(x), fx::onehot(y, kClasses));
    };
    auto compiled = fx::compile(lossfn, model, opt, {.fall_back = true});
    auto train_step = [&](const fx::Tensor& x, const fx::Tensor& y) -> double {
        if (!o.eager) return compiled(x, y);
        auto [loss, grads] = fx::withgradient([&](const VisionTransformer& m) { return lossfn(m, x, y); }, model);
        fx::update(opt, model, grads);
        return loss.item();
    };
    const auto steps_per_epoch = static_cast<std::int64_t>(train_loader.size());
    const fx::Schedule schedule = warmup_then_cosine(o.eta, steps_per_epoch * o.epochs);
    fx::schedule(opt, &fx::AdamW::eta, schedule);  // followed by every step, compiled or eager
    std::cout << "AdamW, η of " << steps_per_epoch * o.epochs << " steps: " << schedule << "\n";

    fx::Progress progress({.epochs = o.epochs, .steps = steps_per_epoch, .unit = "images", .terminal_only = true});
    double final_accuracy = 0, total = 0;
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
        final_accuracy = accuracy(model, test_loader);
        const double seconds = seconds_since(start);
        total += seconds;
        std::printf(
            "epoch %d/%d  train loss %.4f  test accuracy %.2f%%  %.1f s (training %.1f s, %.0f "
            "images/s)\n",
            epoch, o.epochs, loss_sum / double(steps), 100 * final_accuracy, seconds, train_seconds,
            double(Xtr.shape(0)) / train_seconds);
        std::fflush(stdout);
    }

    fx::save(o.out / "vision_transformer.safetensors", model);
    std::cout << "saved " << (o.out / "vision_transformer.safetensors").string() << "\n";
    std::printf("final test accuracy %.2f%% after %d epoch%s in %.1f s: %s the %.0f%% target\n", 100 * final_accuracy,
                o.epochs, o.epochs == 1 ? "" : "s", total,
                final_accuracy >= kTargetAccuracy ? "reached" : "did NOT reach", 100 * kTargetAccuracy);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    return examples::main_with(
        "vision_transformer", kUsage, argc, argv,
        {examples::count("--epochs", o.epochs), examples::count("--batchsize", o.batchsize),
         examples::count("--width", o.width), examples::count("--heads", o.heads), examples::count("--layers", o.layers),
         examples::number("--eta", o.eta), examples::text("--device", o.device), examples::count("--limit", o.limit),
         examples::text("--out", o.out), examples::toggle("--eager", o.eager)},
        [&] {
            fx::seed(kSeed);  // weights; the loader's order comes from its own seed
            const fx::Device dev = o.device ? fx::get_device(*o.device) : fx::get_device({.verbose = true});
            std::cout << "device: " << dev.str() << "\n";
            return run(o, dev);
        },
        [&] {
            if (o.width % o.heads != 0)
                throw std::invalid_argument("--heads " + std::to_string(o.heads) + " does not divide --width " +
                                            std::to_string(o.width));
        });
}
