// scaling.cpp — training throughput of data parallelism on this machine: run under mpirun with 1,
// then 2 processes; each takes global_batch / N images per step (scaling.sh runs it all).
//   scaling lenet5|wide STEPS [plain]   prints, on rank 0, "<model> <processes> <images/s>"
// `plain` averages the gradients after the backward pass instead of overlapping the two.
// LeNet-5: global batch 64 of 28×28 images; wide MLP 784 => 1024 => 1024 => 10: global batch 256.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fluxion/distributed.hpp>
#include <fluxion/fluxion.hpp>
#include <string>
#include <vector>

namespace fx = fluxion;
namespace dist = fluxion::distributed;

namespace {

bool g_overlap = true;

template <class Model> double images_per_second(Model model, const fx::Tensor& x, const fx::Tensor& y, int steps) {
    model = dist::broadcast(model);
    auto opt = fx::setup(fx::OptimiserChain(dist::AverageGradients{.overlap = g_overlap}, fx::Adam{}), model);
    const fx::Tensor target = fx::onehot(y, 10);
    // Compiled steps, as fx::train and fashion_mnist take them: the allreduce is replayed with them.
    auto lossfn = [](const Model& m, const fx::Tensor& a, const fx::Tensor& b) {
        return fx::logitcrossentropy(m(a), b);
    };
    auto compiled = fx::compile(lossfn, model, opt);
    auto step = [&] { compiled(x, target); };
    for (int i = 0; i < 5; ++i) step();  // warm-up: caches, oneDNN plans
    dist::barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) step();
    dist::barrier();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return double(steps) * double(x.shape(0)) * dist::world_size() / seconds;
}

fx::Tensor labels(std::int64_t n) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = (i * 7 + dist::rank()) % 10;
    return fx::tensor(v);
}

}  // namespace

int main(int argc, char** argv) {
    dist::init();
    const std::string name = argc > 1 ? argv[1] : "";
    const int steps = argc > 2 ? std::atoi(argv[2]) : 0;
    g_overlap = !(argc > 3 && std::string(argv[3]) == "plain");
    if ((name != "lenet5" && name != "wide") || steps < 1 || (argc > 3 && g_overlap)) {
        std::fprintf(stderr, "usage: scaling lenet5|wide STEPS [plain]\n");
        return 2;
    }
    fx::seed(dist::rank());  // each process its own images
    double rate = 0;
    if (name == "lenet5") {
        const std::int64_t batch = 64 / dist::world_size();
        rate =
            images_per_second(fx::Chain(fx::Conv({5, 5}, 1, 6, fx::relu), fx::MaxPool({2, 2}),
                                        fx::Conv({5, 5}, 6, 16, fx::relu), fx::MaxPool({2, 2}), fx::Flatten(),
                                        fx::Dense(256, 120, fx::relu), fx::Dense(120, 84, fx::relu), fx::Dense(84, 10)),
                              fx::randn({batch, 1, 28, 28}), labels(batch), steps);
    } else {
        const std::int64_t batch = 256 / dist::world_size();
        rate = images_per_second(
            fx::Chain(fx::Dense(784, 1024, fx::relu), fx::Dense(1024, 1024, fx::relu), fx::Dense(1024, 10)),
            fx::randn({batch, 784}), labels(batch), steps);
    }
    if (dist::rank() == 0) std::printf("%s %d %.0f\n", name.c_str(), dist::world_size(), rate);
    return 0;
}
