// bench_half_products.cpp — the wide MLP's five matrix products (bench_models' wide_train and
// wide_bf16_train), and the seed MLP's first, through fx::matmul on the CPU in f32, bf16 and f16.
// Run it twice to compare how 16-bit products are computed (src/cpu/gemm_half.cpp):
//
//   build/release/bin/bench_half_products                          (converted while packed)
//   FLUXION_HALF_GEMM=widen build/release/bin/bench_half_products  (f32 copies, then the f32 product)
//
// Each product is named by its role in the step; "ᵀ" marks an operand read transposed, as the
// layers read it (a transpose view, not a copy). The `GFLOP/s` counter is 2mnk per second.
#include <benchmark/benchmark.h>

#include <fluxion/fluxion.hpp>

#include <cstdint>
#include <string>

namespace fx = fluxion;

namespace {

struct Product {
    const char* name;
    bool ta, tb;
    std::int64_t m, n, k;
};

const Product kProducts[] = {
    {"wide_x_W1t", false, true, 256, 1024, 784},     {"wide_h_W2t", false, true, 256, 1024, 1024},
    {"wide_gW2_gyt_h", true, false, 1024, 1024, 256}, {"wide_gh_gy_W2", false, false, 256, 1024, 1024},
    {"wide_gW1_gyt_x", true, false, 1024, 784, 256},  {"mlp_x_W1t", false, true, 128, 200, 100},
};

// An m × n operand of type t, stored as itself or as its transpose (read through a transpose view).
fx::Tensor operand(std::int64_t rows, std::int64_t cols, bool transposed, fx::DType t, std::uint64_t seed) {
    fx::seed(seed);
    return transposed ? fx::randn({cols, rows}).to(t).transpose() : fx::randn({rows, cols}).to(t);
}

void run(benchmark::State& state, const Product& p, fx::DType t) {
    const fx::Tensor a = operand(p.m, p.k, p.ta, t, 1), b = operand(p.k, p.n, p.tb, t, 2);
    for (auto _ : state) benchmark::DoNotOptimize(fx::matmul(a, b));
    state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(p.m * p.n * p.k), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
    for (const Product& p : kProducts)
        for (fx::DType t : {fx::DType::f32, fx::DType::bf16, fx::DType::f16})
            benchmark::RegisterBenchmark((std::string(p.name) + "/" + fx::name(t)).c_str(),
                                         [&p, t](benchmark::State& s) { run(s, p, t); })
                ->UseRealTime();
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
}
