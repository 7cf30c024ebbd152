// What the op registry's `reads` column saves (core/elementwise_formulas.def): the tape keeps only
// the x or y that a unary op's gradient reads. Measured on the CPU allocator's counters, as the
// host memory tensors hold after the forward pass and at the peak of one eager gradient of the
// bench's LeNet-5 and encoder steps, with the registry's choice and with both x and y kept
// (detail::tape_keeps_x_and_y).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "compile_cases.hpp"
#include "core/ops/unary_registry.hpp"
#include "cpu/kernels.hpp"
#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
using fx::Tensor;
namespace cpu = fluxion::backend::cpu;

namespace {

struct Encoder {
    fx::TransformerEncoderLayer layer{64, 4, {.feedforward = 128, .dropout = 0.0}};
    fx::Dense head{64, 10};
    Tensor operator()(const Tensor& x) const { return head(fx::mean(layer(x), 1)); }
};

}  // namespace

FLUXION_FUNCTOR(Encoder, layer, head);

namespace {

Tensor labels(std::int64_t n) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i % 10;
    return fx::tensor(v);
}

struct Held {
    std::size_t after_forward = 0;  // what the tape holds when the loss is computed
    std::size_t peak = 0;           // the most at any time of the gradient
};

// Bytes held above what was held before, during one gradient of the loss of m on (x, y).
template <class M> Held held(const M& m, const Tensor& x, const Tensor& y, bool keep_both) {
    fx::detail::tape_keeps_x_and_y = keep_both;
    const std::size_t before = cpu::host_bytes_in_use();
    cpu::reset_host_peak();
    Held h;
    {
        auto [loss, g] = fx::withgradient(
            [&](const M& model) {
                Tensor l = fx::logitcrossentropy(model(x), fx::onehot(y, 10));
                h.after_forward = cpu::host_bytes_in_use() - before;
                return l;
            },
            m);
        EXPECT_TRUE(std::isfinite(loss.template item<float>()));
    }
    fx::detail::tape_keeps_x_and_y = false;
    h.peak = cpu::host_peak_bytes() - before;
    return h;
}

// The tape keeps at least `saved` bytes less after the forward pass, and the step's peak is lower.
template <class M>
void expect_saving(const char* name, const M& m, const Tensor& x, const Tensor& y, std::size_t saved) {
    held(m, x, y, false);  // once first: lazily made constants and plans are not the tape's
    const Held registry = held(m, x, y, false), both = held(m, x, y, true);
    std::printf(
        "%s: after the forward pass the tape holds %.2f MB with the registry's reads, %.2f MB keeping x "
        "and y; the step's peak %.2f MB against %.2f MB (%.0f%% less)\n",
        name, registry.after_forward / 1e6, both.after_forward / 1e6, registry.peak / 1e6, both.peak / 1e6,
        100.0 * (double(both.peak) - double(registry.peak)) / double(both.peak));
    EXPECT_LE(registry.after_forward + saved, both.after_forward) << name;
    EXPECT_LT(registry.peak, both.peak) << name;
}

TEST(TapeMemory, TheRegistrysReadsKeepLessOnTheLeNet5Step) {
    fx::seed(0);
    const Tensor x = fx::randn({64, 1, 28, 28}), y = labels(64);
    // relu reads only y: the pre-activations of the two convolutions (64·6·24·24 and 64·16·8·8 f32)
    // and of the two hidden Dense layers are freed after the forward pass reads them.
    const std::size_t pre_activations = 4 * (64 * 6 * 24 * 24 + 64 * 16 * 8 * 8 + 64 * 120 + 64 * 84);
    expect_saving("LeNet-5, batch 64", compile_cases::lenet5(), x, y, pre_activations);
}

TEST(TapeMemory, TheRegistrysReadsKeepLessOnTheEncoderStep) {
    fx::seed(0);
    const Tensor x = fx::randn({64, 49, 64}), y = labels(64);
    // The feed-forward block's relu: its pre-activation, 64·49·128 f32.
    expect_saving("encoder layer, batch 64 of 49 tokens", Encoder{}, x, y, 4 * 64 * 49 * 128);
}

}  // namespace
