// Transfer learning with the zoo's ResNet-18 (fx::models::resnet18) on Fashion-MNIST. No network is
// reachable here, so no ImageNet weights: the pretrained network is learnt first, on half of the
// classes, and then carried over to the other half, where few labelled images are given. Run with --help.
//
// Source task: T-shirt/top, Trouser, Pullover, Dress, Coat (labels 0-4). Target task: Sandal, Shirt,
// Sneaker, Bag, Ankle boot (5-9), --target-limit training images of them (default 1000). The 28×28
// grey images are resized bilinearly to --size (default 32) and repeated over three channels, each
// standardised with ImageNet's mean and std, as torchvision's weights expect.
//  1. pretrain: ResNet-18 with a 5-class head on the source classes. With --weights FILE (a ResNet-18
//     state_dict under torchvision's names saved as safetensors: its ImageNet weights, say) the
//     model starts from those instead and this phase is skipped.
//  2. head: fc replaced by a new Dense(512 => 5), the trunk frozen: fx::freeze on every prefix of
//     fx::models::trunk, and test mode so that its BatchNorms keep their statistics. Adam, η.
//  3. fine-tune: the trunk thawed (fx::thaw), train mode again, η / 10 (fx::adjust).
// The target's test accuracy after phases 2 and 3, each phase's time; with --scratch, the same
// network trained from random weights on the same target images for as many epochs, to compare.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fluxion/fluxion.hpp>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "command_line.hpp"

namespace fx = fluxion;
namespace fs = std::filesystem;
namespace models = fx::models;

namespace {

constexpr std::int64_t kClasses = 5;  // per task
constexpr std::uint64_t kSeed = 42;
// ImageNet's per-channel statistics (torchvision's transforms.Normalize for its weights).
constexpr double kMean[3] = {0.485, 0.456, 0.406}, kStd[3] = {0.229, 0.224, 0.225};

struct Options {
    int pretrain_epochs = 2, head_epochs = 3, finetune_epochs = 3;
    std::int64_t batchsize = 64, size = 32;
    double eta = 1e-3;
    std::optional<std::int64_t> source_limit;  // source training images (default: all 30000)
    std::int64_t target_limit = 1000;          // target training images
    std::optional<std::int64_t> test_limit;    // test images of each task
    std::optional<fs::path> weights;           // start from these instead of pretraining
    std::optional<std::string> device;         // the best one when not given
    fs::path out = ".";
    bool eager = false;    // eager steps instead of compiled ones
    bool scratch = false;  // also train from random weights on the target images
};

const char* const kUsage = R"(usage: transfer_learning [options]

Pretrains a ResNet-18 on five Fashion-MNIST classes (T-shirt/top, Trouser, Pullover, Dress, Coat),
then transfers it to the other five (Sandal, Shirt, Sneaker, Bag, Ankle boot) from few images: a
new head with the trunk frozen, then the whole network thawed at a lower learning rate. Reports the
target classes' test accuracy and the time of each phase; saves transfer_learning.safetensors
(torchvision's names).

  --pretrain-epochs N  passes over the source images (default 2)
  --head-epochs N      passes over the target images with the trunk frozen (default 3)
  --finetune-epochs N  passes over the target images with the trunk thawed (default 3)
  --source-limit N     pretrain on the first N source training images only (default: all 30000)
  --target-limit N     target training images, the few labelled ones (default 1000)
  --test-limit N       measure on the first N test images of each task only (default: all 5000)
  --weights FILE       start from a ResNet-18 state_dict under torchvision's names (safetensors,
                       e.g. torchvision's ImageNet weights) instead of pretraining
  --size N             images resized to N×N, at least 28 (default 32)
  --batchsize N        images per step (default 64)
  --eta X              Adam's learning rate for pretraining and the head; fine-tuning takes X/10
                       (default 0.001)
  --scratch            also train a ResNet-18 from random weights on the target images, as many
                       epochs as head and fine-tuning together, to compare
  --device NAME        CPU, CUDA, ... (default: the best functional device, see fx::get_device)
  --out DIR            where the model goes (default: the working directory)
  --eager              eager training steps (default: compiled with fx::compile)
  --help               this text

The data is read from $FLUXION_DATA, else /usr/share/datasets/fashion-mnist.
)";

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string percent(double fraction) {
    char text[16];
    std::snprintf(text, sizeof text, "%.2f%%", 100 * fraction);
    return text;
}

// The images (u8 {N, 1, 28, 28}) and labels (i64 {N}, counted from 0) of one task.
struct Task {
    fx::Tensor x, y;
    std::int64_t size() const { return y.shape(0); }
};

// The first `limit` images whose label is in [first, first + kClasses), relabelled from 0.
Task pick(const fx::Tensor& images, const fx::Tensor& labels, std::int64_t first, std::optional<std::int64_t> limit) {
    const auto all = labels.to_vector<std::int64_t>();
    std::vector<std::int64_t> index, relabelled;
    for (std::int64_t i = 0; i < std::int64_t(all.size()) && !(limit && std::int64_t(index.size()) == *limit); ++i)
        if (all[i] >= first && all[i] < first + kClasses) index.push_back(i), relabelled.push_back(all[i] - first);
    return {fx::index_select(images, 0, fx::tensor(index)), fx::tensor(relabelled)};
}

// u8 images {N, 1, 28, 28} -> f32 {N, 3, size, size}: resized, then standardised per channel.
struct Preprocess {
    fx::Upsample resize;
    fx::Tensor operator()(const fx::Tensor& bytes) const {
        const fx::Tensor grey = resize(fx::cast(bytes, fx::DType::f32) * (1.0 / 255));
        return fx::concat({grey * (1 / kStd[0]) - kMean[0] / kStd[0], grey * (1 / kStd[1]) - kMean[1] / kStd[1],
                           grey * (1 / kStd[2]) - kMean[2] / kStd[2]},
                          1);
    }
};

// The fraction of `task`'s images whose largest logit is the label's (the model in its current
// mode: automatic is test mode here, under NoGrad).
double accuracy(const models::ResNet& model, const Task& task, const Preprocess& preprocess, const fx::Device& dev) {
    fx::NoGrad no_grad;
    std::int64_t correct = 0;
    for (auto [x, y] : fx::DataLoader(std::tuple{task.x, task.y} | dev, {.batchsize = 500}))
        correct += fx::sum(fx::argmax(model(preprocess(x)), 1) == y).item<std::int64_t>();
    return double(correct) / double(task.size());
}

struct Phase {
    std::string name;
    double seconds = 0;
    std::optional<double> accuracy;  // on the target's test images
};

// `epochs` passes over `task` with `opt`, each followed by the test accuracy on `test`; returns the
// last accuracy. `what` names the phase in the epoch lines.
template <class Opt> double train(const char* what, models::ResNet& model, Opt& opt, const Task& task, const Task& test,
                                  int epochs, const Preprocess& preprocess, const Options& o, const fx::Device& dev) {
    auto lossfn = [&preprocess](const models::ResNet& m, const fx::Tensor& x, const fx::Tensor& y) {
        return fx::logitcrossentropy(m(preprocess(x)), fx::onehot(y, kClasses));
    };
    auto compiled = fx::compile(lossfn, model, opt, {.fall_back = true});
    // The last, smaller batch is dropped: a compiled step traces once per batch shape.
    fx::DataLoader loader({task.x, task.y},
                          {.batchsize = o.batchsize, .shuffle = true, .partial = false, .seed = kSeed});
    fx::Progress progress({.epochs = epochs, .steps = loader.size(), .unit = "images", .terminal_only = true});
    double acc = 0;
    for (int epoch = 1; epoch <= epochs; ++epoch) {
        const auto start = std::chrono::steady_clock::now();
        double loss_sum = 0;
        std::size_t steps = 0;
        for (auto [x, y] : loader | dev) {
            double loss = 0;
            if (o.eager) {
                auto [l, grads] = fx::withgradient([&](const models::ResNet& m) { return lossfn(m, x, y); }, model);
                fx::update(opt, model, grads);
                loss = l.item();
            } else {
                loss = compiled(x, y);
            }
            loss_sum += loss;
            progress.step(epoch, ++steps, loss, x.shape(0));
        }
        progress.clear();
        const double train_seconds = seconds_since(start);
        acc = accuracy(model, test, preprocess, dev);
        std::printf("%s epoch %d/%d  train loss %.4f  test accuracy %.2f%%  %.1f s (training %.1f s, %.0f images/s)\n",
                    what, epoch, epochs, loss_sum / double(std::max<std::size_t>(steps, 1)), 100 * acc,
                    seconds_since(start), train_seconds, double(steps) * double(o.batchsize) / train_seconds);
        std::fflush(stdout);
    }
    return acc;
}

// A ResNet-18 from `file`, its head sized by the file's fc.weight; loaded strictly.
models::ResNet resnet18_from(const fs::path& file) {
    const auto state = fx::load_state(file);
    const auto fc = state.find("fc.weight");
    if (fc == state.end() || fc->second.ndim() != 2)
        throw fx::IOError("transfer_learning: " + file.string() +
                          " has no fc.weight {classes, 512}: not a ResNet-18 state_dict under torchvision's names");
    auto model = models::resnet18({.num_classes = fc->second.shape(0)});
    fx::load(file, model);
    return model;
}

int run(const Options& o, const fx::Device& dev) {
    fs::create_directories(o.out);  // before training, so that a bad --out fails at once
    // The weights first too: a file that is not a ResNet-18 fails before the data is read.
    std::vector<Phase> phases;
    models::ResNet model = models::resnet18({.num_classes = kClasses});
    if (o.weights) {
        const auto start = std::chrono::steady_clock::now();
        model = resnet18_from(*o.weights);
        phases.push_back({"weights loaded", seconds_since(start), std::nullopt});
        std::printf("weights: %s (ResNet-18, %lld classes), no pretraining\n", o.weights->c_str(),
                    static_cast<long long>(model.fc.out_features()));
    }
    const auto [Xtr, Ytr] = fx::datasets::fashion_mnist(fx::datasets::Split::Train, fx::datasets::Pixels::bytes);
    const auto [Xte, Yte] = fx::datasets::fashion_mnist(fx::datasets::Split::Test, fx::datasets::Pixels::bytes);
    const Task source = pick(Xtr, Ytr, 0, o.source_limit), target = pick(Xtr, Ytr, kClasses, o.target_limit);
    const Task source_test = pick(Xte, Yte, 0, o.test_limit), target_test = pick(Xte, Yte, kClasses, o.test_limit);
    const Preprocess preprocess{fx::Upsample(fx::UpsampleMode::bilinear, {.size = {o.size, o.size}})};
    std::printf("source: %lld training and %lld test images of T-shirt/top, Trouser, Pullover, Dress, Coat\n",
                static_cast<long long>(source.size()), static_cast<long long>(source_test.size()));
    std::printf("target: %lld training and %lld test images of Sandal, Shirt, Sneaker, Bag, Ankle boot\n",
                static_cast<long long>(target.size()), static_cast<long long>(target_test.size()));
    std::printf("inputs: 28×28 grey resized to %lld×%lld, three channels standardised as ImageNet's\n",
                static_cast<long long>(o.size), static_cast<long long>(o.size));

    model = model | dev;
    std::cout << model << "\n";
    if (!o.weights) {
        const auto start = std::chrono::steady_clock::now();
        auto opt = fx::setup(fx::Adam{.eta = o.eta}, model);
        const double acc = train("pretrain", model, opt, source, source_test, o.pretrain_epochs, preprocess, o, dev);
        phases.push_back({"pretrain (source: " + percent(acc) + ")", seconds_since(start), std::nullopt});
    }

    // Phase 2: a new head, the trunk frozen and in test mode. A new model value replaces the old
    // head: fx::setup sees the new Dense.
    model.fc = fx::Dense(512, kClasses) | dev;
    auto opt = fx::setup(fx::Adam{.eta = o.eta}, model);
    const std::vector<std::string> trunk = models::trunk(model);
    std::string frozen;
    for (const auto& prefix : trunk) {
        fx::freeze(opt, prefix);
        frozen += (frozen.empty() ? "" : ", ") + prefix;
    }
    fx::testmode(model);
    std::cout << "new head " << model.fc << "; frozen, in test mode: " << frozen << "\n";
    auto start = std::chrono::steady_clock::now();
    double acc = train("head", model, opt, target, target_test, o.head_epochs, preprocess, o, dev);
    phases.push_back({"head, trunk frozen", seconds_since(start), acc});

    // Phase 3: everything trains, at a tenth of the rate; BatchNorm follows the batches again.
    for (const auto& prefix : trunk) fx::thaw(opt, prefix);
    fx::adjust(opt, o.eta / 10);
    fx::automode(model);
    start = std::chrono::steady_clock::now();
    acc = train("fine-tune", model, opt, target, target_test, o.finetune_epochs, preprocess, o, dev);
    phases.push_back({"fine-tune, trunk thawed", seconds_since(start), acc});
    fx::save(o.out / "transfer_learning.safetensors", model);
    std::cout << "saved " << (o.out / "transfer_learning.safetensors").string() << "\n";

    if (o.scratch) {
        models::ResNet fresh = models::resnet18({.num_classes = kClasses}) | dev;
        auto fresh_opt = fx::setup(fx::Adam{.eta = o.eta}, fresh);
        start = std::chrono::steady_clock::now();
        acc = train("scratch", fresh, fresh_opt, target, target_test, o.head_epochs + o.finetune_epochs, preprocess, o,
                    dev);
        phases.push_back({"from scratch (for comparison)", seconds_since(start), acc});
    }

    std::printf("\n%-32s %16s %10s\n", "phase", "target accuracy", "time");
    for (const auto& p : phases)
        std::printf("%-32s %16s %8.1f s\n", p.name.c_str(), p.accuracy ? percent(*p.accuracy).c_str() : "-", p.seconds);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    return examples::main_with(
        "transfer_learning", kUsage, argc, argv,
        {examples::count("--pretrain-epochs", o.pretrain_epochs), examples::count("--head-epochs", o.head_epochs),
         examples::count("--finetune-epochs", o.finetune_epochs), examples::count("--source-limit", o.source_limit),
         examples::count("--target-limit", o.target_limit), examples::count("--test-limit", o.test_limit),
         examples::text("--weights", o.weights), examples::count("--size", o.size),
         examples::count("--batchsize", o.batchsize), examples::number("--eta", o.eta),
         examples::toggle("--scratch", o.scratch), examples::text("--device", o.device), examples::text("--out", o.out),
         examples::toggle("--eager", o.eager)},
        [&] {
            fx::seed(kSeed);  // weights; the loaders' orders come from their own seed
            const fx::Device dev = o.device ? fx::get_device(*o.device) : fx::get_device({.verbose = true});
            std::cout << "device: " << dev.str() << "\n";
            return run(o, dev);
        },
        [&] {
            if (o.size < 28) throw std::invalid_argument("--size must be at least 28, got " + std::to_string(o.size));
        });
}
