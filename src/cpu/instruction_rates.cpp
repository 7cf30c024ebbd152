// Each rate is the best of several short runs, the two kinds of run taking turns, so that a run
// another process interrupts counts for nothing and a change of clock speed meets both.
#include "cpu/instruction_rates.hpp"

#include <immintrin.h>

#include <algorithm>
#include <chrono>

namespace fluxion::backend::cpu {
namespace {

volatile float kept;  // the loops' sums, so that they are not removed

constexpr int kSteps = 2000;  // per run, 12 instructions each: 24,000 instructions, some 10 µs

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Optimised in every build (a debug build would keep the accumulators in memory and time its loads).
// Twelve independent accumulators: more than the FMA latency (4 cycles) times its ports (2), so that
// throughput, not latency, bounds both loops. The sums go to `sink`, so that no loop is removed.
#define FLUXION_TWELVE(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

__attribute__((target("avx512f"), optimize("O2"))) double fma_seconds(float* sink) {
    const __m512 x = _mm512_set1_ps(1e-7f), y = _mm512_set1_ps(1.0f);
#define FLUXION_DECLARE(i) __m512 a##i = _mm512_set1_ps(float(i));
    FLUXION_TWELVE(FLUXION_DECLARE)
    const double start = now();
    for (int s = 0; s < kSteps; ++s) {
#define FLUXION_FMA(i) a##i = _mm512_fmadd_ps(x, y, a##i);
        FLUXION_TWELVE(FLUXION_FMA)
        __asm__ volatile("" ::: "memory");
    }
    const double seconds = now() - start;
#define FLUXION_SUM(i)          \
    _mm512_storeu_ps(lanes, a##i); \
    *sink += lanes[i];
    float lanes[16];
    FLUXION_TWELVE(FLUXION_SUM)
    return seconds;
}

__attribute__((target("avx512f,avx512bf16"), optimize("O2"))) double dot_seconds(float* sink) {
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x0080);  // 1, tiny
    FLUXION_TWELVE(FLUXION_DECLARE)
    const double start = now();
    for (int s = 0; s < kSteps; ++s) {
#define FLUXION_DOT(i) a##i = _mm512_dpbf16_ps(a##i, x, y);
        FLUXION_TWELVE(FLUXION_DOT)
        __asm__ volatile("" ::: "memory");
    }
    const double seconds = now() - start;
    float lanes[16];
    FLUXION_TWELVE(FLUXION_SUM)
    return seconds;
}

#undef FLUXION_DECLARE
#undef FLUXION_FMA
#undef FLUXION_DOT
#undef FLUXION_SUM
#undef FLUXION_TWELVE

}  // namespace

double bf16_dot_rate_over_f32_fma() {
    static const double rate = [] {
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bf16")) return 0.0;
        float sink = 0;
        double fma = 1e9, dot = 1e9;
        for (int run = 0; run < 9; ++run) {
            fma = std::min(fma, fma_seconds(&sink));
            dot = std::min(dot, dot_seconds(&sink));
        }
        // Multiply-adds per instruction: 16 for the FMA, 32 for the dot product.
        kept = sink;
        return (32.0 / dot) / (16.0 / fma);
    }();
    return rate;
}

}  // namespace fluxion::backend::cpu
