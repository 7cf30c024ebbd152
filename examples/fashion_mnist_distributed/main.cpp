// Fashion-MNIST's LeNet-5 trained by several processes at once (data parallelism on MPI):
//
//   FLUXION_NUM_THREADS=1 mpirun -np 2 build/release/bin/fashion_mnist_distributed
//
// Every process holds the model and takes its share of each batch of 64 (--batchsize is the global
// batch), so the run takes the steps of one process with batch 64, each process doing 1/N of the
// work. Only rank 0 prints and saves. Without mpirun it trains alone. Run with --help for options.
#include <fluxion/distributed.hpp>
#include <fluxion/fluxion.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <tuple>

namespace fx = fluxion;
namespace dist = fluxion::distributed;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kClasses = 10;
constexpr std::uint64_t kSeed = 42;

struct Options {
    int epochs = 8;
    std::int64_t batchsize = 64;
    std::int64_t limit = 0;  // 0: every training image
    fs::path out = ".";
};

const char* const kUsage = R"(usage: mpirun -np N fashion_mnist_distributed [options]

Trains LeNet-5 on Fashion-MNIST on N processes and saves fashion_mnist_distributed.safetensors.

  --epochs N        passes over the training set (default 8)
  --batchsize N     images per step, over all processes together (default 64; a multiple of N)
  --limit N         train on the first N training images only (quick runs)
  --out DIR         where the model goes (default: the working directory)
  --help            this text

Each process takes the GPU of its local rank when there is one, else the CPU.
)";

std::int64_t positive(const std::string& flag, const std::string& text) {
    std::size_t used = 0;
    long long n = 0;
    try {
        n = std::stoll(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || n < 1)
        throw std::invalid_argument(flag + " expects a positive whole number, got '" + text + "'");
    return n;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag != "--epochs" && flag != "--batchsize" && flag != "--limit" && flag != "--out")
            throw std::invalid_argument("unknown option: " + flag);
        if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
        const std::string value = argv[++i];
        if (flag == "--epochs") o.epochs = static_cast<int>(positive(flag, value));
        else if (flag == "--batchsize") o.batchsize = positive(flag, value);
        else if (flag == "--limit") o.limit = positive(flag, value);
        else o.out = value;
    }
    if (o.batchsize % dist::world_size() != 0)
        throw std::invalid_argument("--batchsize " + std::to_string(o.batchsize) + " does not split among " +
                                    std::to_string(dist::world_size()) + " processes");
    return o;
}

auto lenet5() {
    return fx::Chain(fx::Conv({5, 5}, 1, 6, fx::relu), fx::MaxPool({2, 2}),
                     fx::Conv({5, 5}, 6, 16, fx::relu), fx::MaxPool({2, 2}),
                     fx::Flatten(),
                     fx::Dense(256, 120, fx::relu), fx::Dense(120, 84, fx::relu), fx::Dense(84, kClasses));
}
using Model = decltype(lenet5());

// A GPU per process on a machine with several: the one of its local rank.
fx::Device device_of_this_process() {
    const fx::Device best = fx::get_device();
    if (best.is_cpu()) return best;
    const auto count = static_cast<int>(fx::devices(best.type).size());
    return fx::get_device(best.type, dist::local_rank() % count);
}

// Test accuracy over all processes: each counts the hits of its shard, the counts are summed.
double accuracy(Model& model, const fx::Tensor& X, const fx::Tensor& Y, const fx::Device& dev) {
    fx::NoGrad no_grad;
    fx::testmode(model);
    fx::DataLoader test({X, Y}, {.batchsize = 1000 / dist::world_size(), .shard = dist::shard()});
    std::int64_t correct = 0, seen = 0;
    for (auto [x, y] : test | dev) {
        correct += fx::sum(fx::argmax(model(x), 1) == y).item<std::int64_t>();
        seen += y.shape(0);
    }
    fx::automode(model);
    const auto counts = dist::allreduce(fx::tensor(std::vector<std::int64_t>{correct, seen}));
    const auto total = counts.to_vector<std::int64_t>();
    return double(total[0]) / double(total[1]);
}

int run(const Options& o) {
    const bool leader = dist::rank() == 0;
    const fx::Device dev = device_of_this_process();
    auto [Xtr, Ytr] = fx::datasets::fashion_mnist(fx::datasets::Split::Train);
    auto [Xte, Yte] = fx::datasets::fashion_mnist(fx::datasets::Split::Test);
    if (o.limit && o.limit < Xtr.shape(0)) {
        Xtr = Xtr.slice(0, 0, o.limit);
        Ytr = Ytr.slice(0, 0, o.limit);
    }
    const double mean = fx::mean(Xtr).item(), sd = std::sqrt(fx::mean(fx::square(Xtr - mean)).item());
    Xtr = (Xtr - mean) / sd;
    Xte = (Xte - mean) / sd;

    fx::seed(kSeed);
    Model model = dist::broadcast(lenet5()) | dev;  // every process starts from rank 0's weights
    auto opt = fx::setup(fx::OptimiserChain(dist::AverageGradients{}, fx::Adam{.eta = 1e-3}), model);
    const std::int64_t per_process = o.batchsize / dist::world_size();
    fx::DataLoader train({Xtr, Ytr}, {.batchsize = per_process, .shuffle = true, .seed = kSeed, .shard = dist::shard()});
    if (leader)
        std::printf("%d processes on %s (rank 0), %lld images each of every batch of %lld, %lld steps per epoch\n",
                    dist::world_size(), dev.str().c_str(), static_cast<long long>(per_process),
                    static_cast<long long>(o.batchsize), static_cast<long long>(train.size()));

    auto lossfn = [](const Model& m, const fx::Tensor& x, const fx::Tensor& y) {
        return fx::logitcrossentropy(m(x), fx::onehot(y, kClasses));
    };
    double acc = 0;
    for (int epoch = 1; epoch <= o.epochs; ++epoch) {
        const auto start = std::chrono::steady_clock::now();
        double loss_sum = 0;
        for (auto [x, y] : train | dev) {
            auto [loss, grads] = fx::withgradient([&](const Model& m) { return lossfn(m, x, y); }, model);
            fx::update(opt, model, grads);
            loss_sum += loss.item();
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double images = double(train.size() * o.batchsize);  // by all processes together
        acc = accuracy(model, Xte, Yte, dev);
        if (leader)
            std::printf("epoch %d/%d  train loss %.4f (rank 0)  test accuracy %.2f%%  training %.1f s, %.0f images/s "
                        "over %d processes\n",
                        epoch, o.epochs, loss_sum / double(train.size()), 100 * acc, seconds, images / seconds,
                        dist::world_size());
        std::fflush(stdout);
    }
    fs::create_directories(o.out);
    dist::save(o.out / "fashion_mnist_distributed.safetensors", model);
    if (leader)
        std::printf("final test accuracy %.2f%%; saved %s\n", 100 * acc,
                    (o.out / "fashion_mnist_distributed.safetensors").c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        dist::init();
        for (int i = 1; i < argc; ++i)
            if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
                if (dist::rank() == 0) std::cout << kUsage;
                return 0;
            }
        Options options;
        try {
            options = parse(argc, argv);
        } catch (const std::invalid_argument& e) {
            if (dist::rank() == 0) std::cerr << "fashion_mnist_distributed: " << e.what() << "\n\n" << kUsage;
            return 2;
        }
        return run(options);
    } catch (const std::exception& e) {  // fx::Error names the operation itself
        std::cerr << "error on rank " << (fx::distributed::initialized() ? dist::rank() : 0) << ": " << e.what() << "\n";
        return 1;
    }
}
