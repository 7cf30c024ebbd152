// bench_dense.cpp — the seed's comparison: Dense 100 => 200 (relu) => 1, forward, batch 128,
// on the CPU and on every other functional device. bench/compare.py times PyTorch beside it.
#include <benchmark/benchmark.h>

#include <fluxion/fluxion.hpp>

namespace fx = fluxion;

namespace {

struct Mlp {
    fx::Tensor w1, b1, w2, b2;
    fx::Tensor operator()(const fx::Tensor& x) const {
        fx::Tensor h = fx::relu(fx::matmul(x, w1.transpose()) + b1);
        return fx::matmul(h, w2.transpose()) + b2;
    }
};

void dense_forward(benchmark::State& state, fx::Device device) {
    fx::seed(0);
    Mlp m{fx::randn({200, 100}) * 0.1, fx::zeros({200}), fx::randn({1, 200}) * 0.1, fx::zeros({1})};
    m = {m.w1 | device, m.b1 | device, m.w2 | device, m.b2 | device};
    fx::Tensor x = fx::randn({128, 100}) | device;
    fx::NoGrad no_grad;
    for (auto _ : state) {
        fx::Tensor y = m(x);
        fx::synchronize(device);
        benchmark::DoNotOptimize(y.data_ptr());
    }
}

int register_all() {
    benchmark::RegisterBenchmark("dense_forward/CPU", dense_forward, fx::Device{})->UseRealTime();
    for (const auto& name : fx::supported_devices())
        if (name != "CPU" && fx::functional(name))
            benchmark::RegisterBenchmark(("dense_forward/" + name).c_str(), dense_forward, fx::Device{name, 0})->UseRealTime();
    return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
