// test_compile_devices.cpp — fx::compile on every other device (Vulkan's on lavapipe under
// validation, CUDA's where a GPU exists): compiled steps replay the device's own
// kernels and train a model to the parameters eager steps reach there; compiled inference matches
// the model; fx::train compiles there too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "allocation_counting.hpp"
#include "compile_cases.hpp"
#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"

namespace fx = fluxion;
using fx::Tensor;
using namespace compile_cases;

namespace {

// The same kernels in the same order on the same device: only a kernel whose summation order
// depends on the buffers' placement could differ. Measured here: 0 (bit-identical) on Vulkan
// (lavapipe) for all three models.
constexpr double kTolerance = 1e-5;

// Shapes are small: lavapipe runs a GEMM at about 1 GFLOP/s, and under validation every call is checked.
TEST(CompileDevices, MlpTrainsLikeEagerSteps) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(20);
        auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
        EXPECT_LE(eager_vs_compiled(model, mse_loss, regression_batches(30, 8, 10), d), kTolerance) << d.str();
    }
}

// The rules whose constants change with the step count, replayed on each device.
TEST(CompileDevices, EveryRuleTrainsLikeEagerSteps) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        const auto check = [&](const auto& rule, const char* name) {
            fx::seed(21);
            auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
            EXPECT_LE(eager_vs_compiled(model, mse_loss, regression_batches(10, 8, 10), d, rule), kTolerance)
                << name << " on " << d.str();
        };
        compile_cases::for_each_rule(check);
    }
}

TEST(CompileDevices, LeNet5TrainsLikeEagerSteps) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(21);
        EXPECT_LE(eager_vs_compiled(lenet5(), class_loss, class_batches(5, {2, 1, 28, 28}, 10), d), kTolerance)
            << d.str();
    }
}

// The device's own table fuses (core/backend.hpp, "fused kernels"): LeNet-5's compiled step replays
// the same 18 fewer calls as on the CPU (test_compile.cpp) — each Conv with its bias and relu, each
// Dense relu with its product, each max pool's gradient with relu's, one multi-tensor Adam step, the
// loss's negation with its product — and trains as the unfused plan does.
TEST(CompileDevices, LeNet5ReplaysFusedCallsLikeTheUnfusedPlan) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(27);
        auto fused = lenet5() | d;
        auto plain = deep_copy(fused);
        auto opt_f = fx::setup(fx::Adam{.eta = 1e-3}, fused), opt_p = fx::setup(fx::Adam{.eta = 1e-3}, plain);
        auto step_f = fx::compile(class_loss, fused, opt_f);
        auto step_p = fx::compile(class_loss, plain, opt_p, {.fuse = false});
        for (const auto& [x, y] : class_batches(5, {4, 1, 28, 28}, 10)) {
            Tensor xd = x | d, yd = y | d;
            const float a = step_f(xd, yd), b = step_p(xd, yd);
            EXPECT_NEAR(a, b, kTolerance * (1 + std::abs(b))) << d.str();
        }
        EXPECT_LE(max_difference(fused, plain), kTolerance) << d.str();
        Tensor x = fx::randn({4, 1, 28, 28}) | d, y = fx::ones({4}, {.dtype = fx::DType::i64}) | d;
        const fx::CompileStats f = step_f.stats(x, y), p = step_p.stats(x, y);
        std::printf("%s: LeNet-5 step, %zu calls fused from %zu\n", d.str().c_str(), f.kernels, f.traced_kernels);
        EXPECT_EQ(p.kernels, p.traced_kernels) << d.str();
        EXPECT_EQ(f.kernels, p.kernels - 18) << d.str();
        EXPECT_LT(f.arena_bytes, p.arena_bytes) << d.str();
    }
}

// A GPU runs attention's products and softmax for the whole batch in one call each (a product per
// head where the batch is longer than the heads): the calls do not grow with the batch. (Runs sized
// for a CPU's cache had a compiled encoder step replay 373 kernels on an H100, 113 now: batch 64 of
// 49 tokens and 4 heads ran attention in 11 runs of 6.)
TEST(CompileDevices, AttentionCallsDoNotGrowWithTheBatch) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(28);
        auto layer = fx::TransformerEncoderLayer(64, 4, {.feedforward = 128, .dropout = 0.0}) | d;
        auto forward = fx::compile(layer);
        const Tensor small = fx::randn({8, 49, 64}) | d, large = fx::randn({64, 49, 64}) | d;
        forward(small), forward(large);  // a plan for each batch
        const std::size_t calls_small = forward.stats(small).kernels, calls_large = forward.stats(large).kernels;
        std::printf("%s: encoder layer forward, %zu calls at batch 8, %zu at batch 64\n", d.str().c_str(), calls_small,
                    calls_large);
        EXPECT_EQ(calls_large, calls_small) << d.str();
    }
}

// NNlib's activations are the device's op-registry kernels; RReLU's slopes are drawn as Dropout's masks.
TEST(CompileDevices, NNlibActivationsTrainLikeEagerSteps) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(24);
        auto model = fx::Chain(fx::Dense(10, 16, fx::mish), fx::Dense(16, 16, fx::hardtanh), fx::RReLU(),
                               fx::Dense(16, 16, fx::logσ), fx::Dense(16, 1));
        EXPECT_LE(eager_vs_compiled(model, mse_loss, regression_batches(20, 8, 10), d), kTolerance) << d.str();
    }
}

// Dropout's masks are drawn on the host at every replay and copied to the device: the host arena.
TEST(CompileDevices, BatchNormAndDropoutTrainLikeEagerSteps) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(22);
        EXPECT_LE(eager_vs_compiled(norm_dropout_mlp(), class_loss, class_batches(20, {8, 20}, 10), d), kTolerance)
            << d.str();
    }
}

TEST(CompileDevices, ForwardMatchesTheModel) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(23);
        auto model = fx::Chain(fx::Dense(10, 16, fx::tanh), fx::Dense(16, 3)) | d;
        auto fwd = fx::compile(model);
        for (int i = 0; i < 3; ++i) {
            Tensor x = fx::randn({5, 10}) | d;
            Tensor y = fwd(x);
            EXPECT_EQ(y.device(), d);
            EXPECT_EQ(y.to_vector<float>(), model(x).to_vector<float>()) << d.str();
        }
        EXPECT_GT(fwd.stats(fx::randn({5, 10}) | d).kernels, 0u) << d.str() << ": no plan was made";
    }
}

// The GPU backends record each phase (loss and gradients; the update) once and resubmit the
// recording (Vulkan: a command buffer; CUDA: a CUDA graph); a device without recorded submissions
// replays call by call.
TEST(CompileDevices, GpuBackendsReplayEachPhaseAsOneRecordedSubmission) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(25);
        auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dropout(0.2), fx::Dense(16, 1)) | d;
        auto opt = fx::setup(fx::Adam{}, model);
        auto step = fx::compile(mse_loss, model, opt);
        Tensor x = fx::randn({8, 10}) | d, y = fx::randn({8, 1}) | d;
        for (int i = 0; i < 3; ++i) step(x, y);
        EXPECT_EQ(step.stats(x, y).recorded, d.type == "Vulkan" || d.type == "CUDA") << d.str();
        EXPECT_GT(step.stats(x, y).kernels, 0u) << d.str();
    }
}

// A step that reads a device result into host memory mid-step (the loss computed on the host)
// cannot be one submission: it replays call by call, and still trains as eager steps do.
TEST(CompileDevices, AStepThatReadsResultsOnTheHostReplaysCallByCall) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(26);
        auto host_loss = [](const auto& m, const Tensor& x, const Tensor& y) {
            return fx::mse(m(x) | fx::cpu, y | fx::cpu);
        };
        auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1));
        EXPECT_LE(eager_vs_compiled(model, host_loss, regression_batches(10, 8, 10), d), kTolerance) << d.str();
        auto there = model | d;
        auto opt = fx::setup(fx::Adam{}, there);
        auto step = fx::compile(host_loss, there, opt);
        Tensor x = fx::randn({8, 10}) | d, y = fx::randn({8, 1}) | d;
        step(x, y);
        EXPECT_FALSE(step.stats(x, y).recorded) << d.str();
    }
}

#if !defined(__SANITIZE_ADDRESS__)
// Replays allocate nothing on the host either: not fluxion, not the plugin (the driver and the
// validation layer may; that is theirs, and reported).
TEST(CompileDevices, ReplaysAllocateNothing) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(27);
        auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dropout(0.2), fx::Dense(16, 1)) | d;
        auto opt = fx::setup(fx::Adam{}, model);
        auto step = fx::compile(mse_loss, model, opt);
        Tensor x = fx::randn({8, 10}) | d, y = fx::randn({8, 1}) | d;
        auto a = allocation_counting::in(200, [&] { step(x, y); });
        std::printf(
            "%s: %ld allocations by fluxion and its plugin, %ld by the driver and libraries in 200 replayed "
            "steps (recorded submissions: %s)\n",
            d.str().c_str(), a.ours, a.libraries, step.stats(x, y).recorded ? "yes" : "no");
        EXPECT_EQ(a.ours, 0) << d.str() << ": from " << a.ours_from;
    }
}
#endif

TEST(CompileDevices, InputsOnTheCpuAreAnErrorNamingBothDevices) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        auto model = fx::Chain(fx::Dense(10, 1)) | d;
        auto opt = fx::setup(fx::Descent{}, model);
        auto step = fx::compile(mse_loss, model, opt);
        try {
            step(fx::randn({4, 10}), fx::randn({4, 1}));
            ADD_FAILURE() << "expected fx::DeviceError on " << d.str();
        } catch (const fx::DeviceError& e) {
            std::string m = e.what();
            EXPECT_NE(m.find(d.str()), std::string::npos) << m;
            EXPECT_NE(m.find("CPU"), std::string::npos) << m;
        }
    }
}

TEST(CompileDevices, TrainCompilesThereLikeEagerTraining) {
    for (const auto& d : fx::testing::other_devices(fx::DType::f32)) {
        fx::seed(24);
        auto model = fx::Chain(fx::Dense(10, 16, fx::relu), fx::Dense(16, 1)) | d;
        Batches data;
        for (const auto& [x, y] : regression_batches(6, 8, 10)) data.emplace_back(x | d, y | d);
        data.emplace_back(fx::randn({3, 10}) | d, fx::randn({3, 1}) | d);  // the last, smaller batch
        auto eager = deep_copy(model);
        auto opt = fx::setup(fx::Adam{}, model), opt_e = fx::setup(fx::Adam{}, eager);
        auto compiled_history = fx::train(mse_loss, model, data, opt, {.epochs = 2, .progress = false});
        auto eager_history =
            fx::train(mse_loss, eager, data, opt_e, {.epochs = 2, .progress = false, .compile = false});
        ASSERT_EQ(compiled_history.size(), eager_history.size());
        for (std::size_t i = 0; i < eager_history.size(); ++i)
            EXPECT_FLOAT_EQ(compiled_history[i], eager_history[i]) << d.str();
        EXPECT_LE(max_difference(model, eager), kTolerance) << d.str();
    }
}

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
