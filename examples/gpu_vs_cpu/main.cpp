// The SimpleNNs seed's comparison: the forward pass of a small MLP (100 => 200 => 1, batch 128)
// timed on the CPU and on the GPU. At this size the two are close; a GPU pays off for larger models.
//
//   gpu_vs_cpu [runs]     (default 2000 timed runs per device, after warming up)
#include <fluxion/fluxion.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "command_line.hpp"

namespace fx = fluxion;

namespace {

const char* const kUsage = R"(usage: gpu_vs_cpu [runs]

Times the forward pass of a small MLP (100 => 200 => 1, batch 128) on the CPU and on the GPU.

  runs              timed runs per device, a positive whole number (default 2000)
  --help            this text
)";

struct Timing {
    double median_us, min_us;
};

// Each run is one forward pass followed by fx::synchronize, so that a GPU's queued work counts
// (CUDA.@sync in the seed).
template <class Model> Timing time_forward(const Model& model, const fx::Tensor& x, int runs) {
    fx::NoGrad no_grad;
    const fx::Device& dev = x.device();
    for (int i = 0; i < std::max(10, runs / 10); ++i) model(x);  // warm-up: caches, allocator, kernels
    fx::synchronize(dev);
    std::vector<double> us(static_cast<std::size_t>(runs));
    for (auto& t : us) {
        const auto start = std::chrono::steady_clock::now();
        model(x);
        fx::synchronize(dev);
        t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    }
    std::sort(us.begin(), us.end());
    return {us[us.size() / 2], us.front()};
}

void print(const char* label, const fx::Device& dev, Timing t) {
    std::printf("%-4s %-8s median %8.1f us   min %8.1f us\n", label, dev.str().c_str(), t.median_us, t.min_us);
}

// The timings on the CPU, then on the GPU where there is one.
int compare(int runs) {
    fx::seed(42);
    const auto cpu_model = fx::Chain(fx::Dense(100, 200, fx::relu), fx::Dense(200, 1));
    const fx::Tensor cpu_x = fx::randn({128, 100});
    std::cout << cpu_model << "\n";
    std::printf("forward pass of a batch of 128, %d timed runs each\n", runs);
    print("CPU", fx::Device{}, time_forward(cpu_model, cpu_x, runs));

    const fx::Device gpu = fx::get_device();
    if (gpu.is_cpu()) {
        std::printf("GPU  no GPU (no functional GPU backend; see fx::get_device({.verbose = true}))\n");
        return 0;
    }
    print("GPU", gpu, time_forward(cpu_model | gpu, cpu_x | gpu, runs));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    int runs = 2000;
    const auto runs_option = examples::positional("runs", [&](const std::string& v) {
        runs = static_cast<int>(examples::positive("runs", v, std::numeric_limits<int>::max()));
    });
    return examples::main_with("gpu_vs_cpu", kUsage, argc, argv, {runs_option}, [&] { return compare(runs); });
}
