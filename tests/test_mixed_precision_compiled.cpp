// test_mixed_precision_compiled.cpp — fx::compile(lossfn, mp): a mixed-precision step traced once and
// replayed trains the f32 masters as MixedPrecision::step does, skips and counts the f16 steps whose
// gradients overflow (tracing again at the new loss scale), and replays without allocating; on the
// CPU and every other device (Vulkan on lavapipe under validation, CUDA where a GPU exists).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "allocation_counting.hpp"
#include "compile_cases.hpp"
#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"

namespace {

namespace fx = fluxion;
using compile_cases::max_difference;
using fx::DType;
using fx::Tensor;

auto small_model() { return fx::Chain(fx::Dense(4, 16), fx::BatchNorm(16, fx::relu), fx::Dense(16, 2)); }

const auto lossfn = [](const auto& m, const Tensor& x, const Tensor& target) {
    return fx::logitcrossentropy(m(x), target);
};

struct Batch {
    Tensor x, target;
};

// Two classes split by the sign of the inputs' sum; batch `overflow` (if any) holds inputs beyond
// f16's range, so that its forward pass in f16 gives infinities.
std::vector<Batch> batches(int steps, int overflow = -1) {
    fx::seed(11);
    std::vector<Batch> out;
    for (int i = 0; i < steps; ++i) {
        Tensor x = fx::randn({32, 4});
        const Tensor labels = fx::cast(fx::gt(fx::sum(x, 1), fx::zeros({32})), DType::i64);
        if (i == overflow) x = x * 1e6;
        out.push_back({x, fx::onehot(labels, 2)});
    }
    return out;
}

std::vector<fx::Device> every_device(DType t) {
    std::vector<fx::Device> out{fx::Device()};
    for (const auto& d : fx::testing::other_devices(t)) out.push_back(d);
    return out;
}

// Compiled and eager mixed-precision steps on the same batches from the same model. The masters
// are compared: the same kernels run in the same order, but the compiled CPU plan fuses
// elementwise chains (their results are rounded to the compute type at other points), so the f32
// masters agree to about the compute type's precision. Measured: at most 2e-3 (bf16) here.
constexpr double kTolerance = 2e-2;

TEST(MixedPrecisionCompiled, Bf16StepsTrainLikeEagerOnes) {
    for (const auto& d : every_device(DType::bf16)) {
        const auto data = batches(40);
        fx::seed(12);
        const auto init = small_model();
        auto eager = fx::MixedPrecision(fx::Adam{.eta = 0.01}, init | d, DType::bf16);
        auto mp = fx::MixedPrecision(fx::Adam{.eta = 0.01}, init | d, DType::bf16);
        auto step = fx::compile(lossfn, mp);
        double first = 0, last = 0, eager_last = 0;
        for (std::size_t i = 0; i < data.size(); ++i) {
            const Tensor x = data[i].x | d, y = data[i].target | d;
            eager_last = eager.step(lossfn, x, y);
            last = step(x, y);
            if (i == 0) first = last;
        }
        EXPECT_TRUE(step.stats(data[0].x | d, data[0].target | d).kernels > 0) << d.str() << ": no plan was kept";
        EXPECT_EQ(mp.steps(), 40) << d.str();
        EXPECT_EQ(mp.skipped_steps(), 0) << d.str();
        EXPECT_LT(last, 0.5 * first) << d.str();
        EXPECT_NEAR(last, eager_last, 0.05 * eager_last) << d.str();
        const double difference = max_difference(mp.model(), eager.model());
        std::printf("%s: compiled and eager bf16 masters differ by %.2g after 40 steps\n", d.str().c_str(), difference);
        EXPECT_LT(difference, kTolerance) << d.str();
        for (const auto& s : mp.optimiser().params) EXPECT_EQ(s.t, 40) << d.str() << " " << s.path;
    }
}

// On the CPU, whose backend has mixed precision's multi-tensor kernels, a compiled step of a rule of
// fluxion's records them (one check, one update); an OptimiserChain of the same rule records the
// composed step. The two replay to the same bits, through an f16 overflow (skipped, traced again)
// and the scale's growth.
TEST(MixedPrecisionCompiled, TheFusedUpdateReplaysAsTheComposedOne) {
    const int overflow_at = 7;
    const auto data = batches(16, overflow_at);
    for (DType t : {DType::bf16, DType::f16}) {
        fx::seed(12);
        const auto init = small_model();
        const fx::LossScaleOptions scaling{.initial = 1024, .growth_interval = 5};
        auto fused = fx::MixedPrecision(fx::Adam{.eta = 0.01}, init, t, scaling);
        auto composed = fx::MixedPrecision(fx::OptimiserChain(fx::Adam{.eta = 0.01}), init, t, scaling);
        auto fused_step = fx::compile(lossfn, fused);
        auto composed_step = fx::compile(lossfn, composed);
        for (std::size_t i = 0; i < data.size(); ++i) {
            const float a = fused_step(data[i].x, data[i].target), b = composed_step(data[i].x, data[i].target);
            EXPECT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << fx::name(t) << " step " << i << ": " << a
                                                                     << " against " << b;
        }
        const auto fused_kernels = fused_step.stats(data[0].x, data[0].target).kernels;
        const auto composed_kernels = composed_step.stats(data[0].x, data[0].target).kernels;
        EXPECT_LT(fused_kernels + 20, composed_kernels)
            << fx::name(t) << ": the fused plan should hold a check and an update where the composed one has a "
            << "widening, a division and a check per gradient and a cast per parameter";
        EXPECT_EQ(fused.skipped_steps(), t == DType::f16 ? 1 : 0) << fx::name(t);
        EXPECT_EQ(composed.skipped_steps(), fused.skipped_steps()) << fx::name(t);
        EXPECT_EQ(max_difference(fused.model(), composed.model()), 0.0) << fx::name(t);
        EXPECT_EQ(max_difference(fused.compute_model(), composed.compute_model()), 0.0) << fx::name(t);
        for (const auto& s : fused.optimiser().params) EXPECT_EQ(s.t, t == DType::f16 ? 15 : 16) << s.path;
    }
}

// An overflowing f16 step is skipped and counted by the compiled step as by the eager one, the
// scale halves, and the steps after it (traced again at the new scale) train on.
TEST(MixedPrecisionCompiled, F16OverflowIsSkippedAndTracedAgainAtTheNewScale) {
    for (const auto& d : every_device(DType::f16)) {
        const int overflow_at = 7;
        const auto data = batches(30, overflow_at);
        fx::seed(12);
        const auto init = small_model();
        const fx::LossScaleOptions scaling{.initial = 1024, .growth_interval = 1000};
        auto eager = fx::MixedPrecision(fx::Adam{.eta = 0.01}, init | d, DType::f16, scaling);
        auto mp = fx::MixedPrecision(fx::Adam{.eta = 0.01}, init | d, DType::f16, scaling);
        auto step = fx::compile(lossfn, mp);
        for (std::size_t i = 0; i < data.size(); ++i) {
            const Tensor x = data[i].x | d, y = data[i].target | d;
            const auto before = max_difference(mp.model(), init | d);
            eager.step(lossfn, x, y);
            step(x, y);
            if (int(i) == overflow_at) {
                EXPECT_EQ(mp.skipped_steps(), 1) << d.str();
                EXPECT_EQ(mp.loss_scale(), 512) << d.str();
                EXPECT_EQ(max_difference(mp.model(), init | d), before) << d.str() << ": the skipped step changed the masters";
            }
        }
        EXPECT_EQ(mp.skipped_steps(), eager.skipped_steps()) << d.str();
        EXPECT_EQ(mp.loss_scale(), eager.loss_scale()) << d.str();
        for (const auto& s : mp.optimiser().params) EXPECT_EQ(s.t, 29) << d.str() << " " << s.path;
        EXPECT_LT(max_difference(mp.model(), eager.model()), kTolerance) << d.str();
    }
}

TEST(MixedPrecisionCompiled, ADifferentBatchShapeGetsItsOwnPlan) {
    auto data = batches(2);
    auto mp = fx::MixedPrecision(fx::Adam{}, small_model(), DType::bf16);
    auto step = fx::compile(lossfn, mp, {.cache = false});
    step(data[0].x, data[0].target);
    step(data[1].x, data[1].target);
    const Tensor small = data[0].x.slice(0, 0, 8), small_target = data[0].target.slice(0, 0, 8);
    EXPECT_THROW(step(small, small_target), fx::ValueError);
    EXPECT_EQ(mp.steps(), 2) << "the refused call changed nothing";
}

#if !defined(__SANITIZE_ADDRESS__)
TEST(MixedPrecisionCompiled, ReplaysAllocateNothing) {
    for (const auto& d : every_device(DType::bf16)) {
        const auto data = batches(1);
        fx::seed(13);
        auto mp = fx::MixedPrecision(fx::Adam{}, small_model() | d, DType::bf16);
        auto step = fx::compile(lossfn, mp);
        const Tensor x = data[0].x | d, y = data[0].target | d;
        auto a = allocation_counting::in(200, [&] { step(x, y); });
        std::printf("%s: %ld allocations by fluxion, %ld by libraries in 200 replayed bf16 steps (recorded: %s)\n",
                    d.str().c_str(), a.ours, a.libraries, step.stats(x, y).recorded ? "yes" : "no");
        EXPECT_EQ(a.ours, 0) << d.str() << ": from " << a.ours_from;
    }
}
#endif

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
