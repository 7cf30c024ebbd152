// A small U-Net that removes Gaussian noise from Fashion-MNIST images: noisy x = clean + σ·z in, clean
// out, trained on the mean squared error with a fresh z at every step. Reports the test set's PSNR
// (10·log10(1/MSE), pixels in [0, 1]) of the noisy images and of the U-Net's output. Run with --help.
//
// Default: width 16 (channels 16, 32, 64 at 28², 14², 7²), GroupNorm(·, 4) after each convolution,
// down by MaxPool, up by ConvTranspose((2, 2), stride 2) then by Upsample(:nearest), each up step
// concatenated with the encoder's output at its size (the skips); AdamW with a linear warm-up over
// the first 5% of the steps then a cosine decay to zero (fx::Sequence of fx::Triangle and
// fx::CosAnneal); σ = 0.2, batch 64, 3 epochs; the target is +6 dB (issue 26).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fluxion/fluxion.hpp>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "command_line.hpp"

namespace fx = fluxion;
namespace fs = std::filesystem;

namespace {

constexpr double kTargetGain = 6;  // dB
constexpr std::uint64_t kSeed = 42;

struct Options {
    int epochs = 3;
    std::int64_t batchsize = 64, width = 16;
    double sigma = 0.2, eta = 2e-3;
    std::optional<std::string> device;  // the best one when not given
    std::optional<std::int64_t> limit;  // training images used
    std::optional<std::int64_t> test_limit;  // test images used
    fs::path out = ".";
    bool eager = false;  // eager steps instead of compiled ones
};

const char* const kUsage = R"(usage: unet_denoise [options]

Trains a small U-Net to remove Gaussian noise (clean + sigma·z) from Fashion-MNIST images and
reports the test set's PSNR before and after; saves unet_denoise.safetensors (PyTorch's layouts).

  --epochs N        passes over the training set (default 3)
  --batchsize N     images per step (default 64)
  --width N         channels at full size, a multiple of 4; 2N at half, 4N at quarter size
                    (default 16)
  --sigma X         the noise's standard deviation, pixels being in [0, 1] (default 0.2)
  --eta X           the peak learning rate of the warm-up then cosine schedule (default 0.002)
  --device NAME     CPU, CUDA, ... (default: the best functional device, see fx::get_device)
  --limit N         train on the first N training images only (quick runs)
  --test-limit N    measure on the first N test images only (quick runs)
  --out DIR         where the model goes (default: the working directory)
  --eager           eager training steps (default: compiled with fx::compile)
  --help            this text

The data is read from $FLUXION_DATA, else /usr/share/datasets/fashion-mnist.
)";

// A 3×3 convolution that keeps the size, then a GroupNorm of 4 groups and relu (the bias is left
// out: the norm's own shift replaces it).
struct Block {
    fx::Conv conv;
    fx::GroupNorm norm;

    Block(std::int64_t in, std::int64_t out) : conv({3, 3}, in, out, {.pad = 1, .bias = false}), norm(out, 4, fx::relu) {}
    fx::Tensor operator()(const fx::Tensor& x) const { return norm(conv(x)); }
};

// Images {N, 1, 28, 28} -> {N, 1, 28, 28}. Encoder at 28² (w channels), 14² (2w), a bottleneck at 7²
// (4w); the decoder goes up by a learnt ConvTranspose at 7² -> 14² and by a nearest Upsample at
// 14² -> 28², each time concatenating the encoder's output of that size before its block. The head
// predicts the noise, which is subtracted from the input: the identity is the starting point.
struct UNet {
    Block enc1, enc2, bottleneck, dec2, dec1;
    fx::ConvTranspose up2;
    fx::Conv up1, head;
    fx::MaxPool pool = fx::MaxPool({2, 2});
    fx::Upsample upsample = fx::Upsample(fx::UpsampleMode::nearest, {.scale = {2}});

    explicit UNet(std::int64_t w)
        : enc1(1, w),
          enc2(w, 2 * w),
          bottleneck(2 * w, 4 * w),
          dec2(4 * w, 2 * w),
          dec1(2 * w, w),
          up2({2, 2}, 4 * w, 2 * w, {.stride = 2}),
          up1({3, 3}, 2 * w, w, {.pad = 1}),
          head({1, 1}, w, 1) {}

    fx::Tensor operator()(const fx::Tensor& x) const {
        const fx::Tensor e1 = enc1(x);                      // {N, w, 28, 28}
        const fx::Tensor e2 = enc2(pool(e1));               // {N, 2w, 14, 14}
        const fx::Tensor b = bottleneck(pool(e2));          // {N, 4w, 7, 7}
        const fx::Tensor d2 = dec2(fx::concat({up2(b), e2}, 1));            // {N, 2w, 14, 14}
        const fx::Tensor d1 = dec1(fx::concat({up1(upsample(d2)), e1}, 1));  // {N, w, 28, 28}
        return x - head(d1);
    }
};

}  // namespace

FLUXION_FUNCTOR(Block, conv, norm);
FLUXION_FUNCTOR(UNet, enc1, enc2, bottleneck, dec2, dec1, up2, up1, head);

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Linear warm-up over the first 5% of the steps (at least one), then a cosine decay to zero. The
// warm-up is the rising half of a triangle, shifted by one step so that the first rate is not 0.
fx::Schedule warmup_then_cosine(double eta, std::int64_t steps) {
    const std::int64_t warmup = std::max<std::int64_t>(1, steps / 20);
    const std::int64_t rest = std::max<std::int64_t>(1, steps - warmup);
    return fx::Sequence({{fx::Shifted{fx::Triangle{.l0 = 0, .l1 = eta, .period = 2 * warmup}, 2}, warmup},
                         {fx::CosAnneal{.l0 = eta, .l1 = 0, .period = rest, .restart = false}, rest}});
}

// 10·log10(1/MSE) over every pixel of the set, pixels in [0, 1]; `denoise` maps a noisy batch to its estimate.
template <class Data, class F> double psnr(const fx::DataLoader<Data>& test, F&& denoise) {
    fx::NoGrad no_grad;
    double squared = 0;
    std::int64_t pixels = 0;
    for (auto [noisy, clean] : test) {
        squared += fx::sum(fx::square(denoise(noisy) - clean)).item();
        pixels += clean.numel();
    }
    return 10 * std::log10(double(pixels) / squared);
}

int run(const Options& o, const fx::Device& dev) {
    fs::create_directories(o.out);  // before training, so that a bad --out fails at once
    auto [Xtr, Ytr] = fx::datasets::fashion_mnist(fx::datasets::Split::Train);
    auto [Xte, Yte] = fx::datasets::fashion_mnist(fx::datasets::Split::Test);
    if (o.limit && *o.limit < Xtr.shape(0)) Xtr = Xtr.slice(0, 0, *o.limit);
    if (o.test_limit && *o.test_limit < Xte.shape(0)) Xte = Xte.slice(0, 0, *o.test_limit);
    // The test set's noise is drawn once (from the seed), so that every run measures the same images.
    const fx::Tensor noisy_test = Xte + o.sigma * fx::randn(Xte.shape());
    std::printf("data: %lld training and %lld test images, noise σ = %g\n", static_cast<long long>(Xtr.shape(0)),
                static_cast<long long>(Xte.shape(0)), o.sigma);

    fx::DataLoader train_loader({Xtr}, {.batchsize = o.batchsize, .shuffle = true, .seed = kSeed});
    fx::DataLoader test_loader(std::tuple{noisy_test, Xte} | dev, {.batchsize = 1000});

    UNet model = UNet(o.width) | dev;
    std::cout << "UNet: blocks of " << model.enc1.conv.describe() << " and " << model.enc1.norm.describe() << ", "
              << model.pool.describe() << " down, " << model.up2.describe() << " and " << model.upsample.describe()
              << " up, skips concatenated, " << model.head.describe() << "\n";
    const double before = psnr(test_loader, [](const fx::Tensor& noisy) { return noisy; });
    std::printf("test PSNR of the noisy images: %.2f dB\n", before);
    std::fflush(stdout);

    auto opt = fx::setup(fx::AdamW{.eta = o.eta, .lambda = 0}, model);
    const fx::Schedule schedule = warmup_then_cosine(o.eta, std::int64_t(train_loader.size()) * o.epochs);
    fx::schedule(opt, &fx::AdamW::eta, schedule);  // followed by every step, compiled or eager
    std::cout << "AdamW, η: " << schedule << "\n";
    auto lossfn = [](const UNet& m, const fx::Tensor& noisy, const fx::Tensor& clean) { return fx::mse(m(noisy), clean); };
    auto compiled = fx::compile(lossfn, model, opt, {.fall_back = true});
    auto train_step = [&](const fx::Tensor& noisy, const fx::Tensor& clean) -> double {
        if (!o.eager) return compiled(noisy, clean);
        auto [loss, grads] = fx::withgradient([&](const UNet& m) { return lossfn(m, noisy, clean); }, model);
        fx::update(opt, model, grads);
        return loss.item();
    };

    fx::Progress progress({.epochs = o.epochs, .steps = train_loader.size(), .unit = "images", .terminal_only = true});
    double after = before, total = 0;
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
        const auto start = std::chrono::steady_clock::now();
        double loss_sum = 0;
        std::size_t steps = 0;
        for (auto [clean] : train_loader | dev) {
            const fx::Tensor noisy = clean + o.sigma * fx::randn(clean.shape(), {.device = dev});
            const double loss = train_step(noisy, clean);
            loss_sum += loss;
            progress.step(epoch, ++steps, loss, clean.shape(0));
        }
        progress.clear();
        const double train_seconds = seconds_since(start);
        after = psnr(test_loader, [&](const fx::Tensor& noisy) { return model(noisy); });
        const double seconds = seconds_since(start);
        total += seconds;
        std::printf("epoch %d/%d  train loss %.5f  test PSNR %.2f dB  %.1f s (training %.1f s, %.0f images/s)\n", epoch,
                    o.epochs, loss_sum / double(steps), after, seconds, train_seconds,
                    double(Xtr.shape(0)) / train_seconds);
        std::fflush(stdout);
    }

    fx::save(o.out / "unet_denoise.safetensors", model);
    std::cout << "saved " << (o.out / "unet_denoise.safetensors").string() << "\n";
    std::printf("test PSNR %.2f dB -> %.2f dB (%+.2f dB) after %d epoch%s in %.1f s: %s the %+.0f dB target\n",
                before, after, after - before, o.epochs, o.epochs == 1 ? "" : "s", total,
                after - before >= kTargetGain ? "reached" : "did NOT reach", kTargetGain);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    return examples::main_with(
        "unet_denoise", kUsage, argc, argv,
        {examples::count("--epochs", o.epochs), examples::count("--batchsize", o.batchsize),
         examples::count("--width", o.width), examples::number("--sigma", o.sigma), examples::number("--eta", o.eta),
         examples::text("--device", o.device), examples::count("--limit", o.limit),
         examples::count("--test-limit", o.test_limit), examples::text("--out", o.out),
         examples::toggle("--eager", o.eager)},
        [&] {
            fx::seed(kSeed);  // weights and noise; the loader's order comes from its own seed
            const fx::Device dev = o.device ? fx::get_device(*o.device) : fx::get_device({.verbose = true});
            std::cout << "device: " << dev.str() << "\n";
            return run(o, dev);
        },
        [&] {
            if (o.width % 4 != 0)
                throw std::invalid_argument("--width must be a multiple of 4 (GroupNorm's 4 groups), got " +
                                            std::to_string(o.width));
        });
}
