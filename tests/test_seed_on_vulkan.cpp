// test_seed_on_vulkan.cpp — the seed pages' examples, unchanged, with FLUXION_GPU_BACKEND=Vulkan:
// `| fx::gpu` lands on Vulkan (lavapipe here, under the validation layer) and every result matches
// the same code on the CPU. Then LeNet-5 trains on Vulkan with the CPU's loss curve.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "vulkan_environment.hpp"

namespace fx = fluxion;
using fx::Tensor;

struct ActorCritic {
    Tensor actor, critic;
};
FLUXION_FUNCTOR(ActorCritic, actor, critic);

namespace {

class SeedOnVulkan : public ::testing::Test {
protected:
    void SetUp() override {
        std::string why;
        if (!fx_test::vulkan_runs(&why)) GTEST_SKIP() << "Vulkan is not functional here: " << why;
        ASSERT_EQ(fx::get_device().type, "Vulkan") << "FLUXION_GPU_BACKEND=Vulkan must make fx::gpu pick Vulkan";
    }
};

void expect_near(const Tensor& gpu, const Tensor& cpu, double tol = 1e-6) {
    ASSERT_EQ(gpu.shape(), cpu.shape());
    auto a = gpu.to_vector<double>(), b = cpu.to_vector<double>();
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol * (1 + std::abs(b[i]))) << "element " << i;
}

// The basic example: any tensor code differentiates, on the device, and a step lowers the loss.
TEST_F(SeedOnVulkan, BasicsTakesAGradientStepThatLowersTheLoss) {
    fx::seed(1);
    Tensor W = fx::rand({2, 5}), b = fx::rand({2}), x = fx::rand({5}), y = fx::rand({2});
    auto loss = [](const Tensor& W_, const Tensor& b_, const Tensor& x_, const Tensor& y_) {
        return fx::sum(fx::square(fx::matmul(W_, x_) + b_ - y_));
    };
    Tensor Wg = W | fx::gpu, bg = b | fx::gpu, xg = x | fx::gpu, yg = y | fx::gpu;
    EXPECT_EQ(Wg.device().type, "Vulkan");
    auto [dW, db] = fx::gradient([&](const Tensor& w, const Tensor& c) { return loss(w, c, xg, yg); }, Wg, bg);
    auto [dW_cpu, db_cpu] = fx::gradient([&](const Tensor& w, const Tensor& c) { return loss(w, c, x, y); }, W, b);
    EXPECT_EQ(dW.device().type, "Vulkan");
    expect_near(dW | fx::cpu, dW_cpu);
    expect_near(db | fx::cpu, db_cpu);
    const double before = loss(Wg, bg, xg, yg).item();
    const double after = loss(Wg - 0.1 * dW, bg - 0.1 * db, xg, yg).item();
    EXPECT_LT(after, before);
}

// m = Dense(10, 5) |> gpu; x = rand(10) |> gpu; m(x) — and back with cpu.
TEST_F(SeedOnVulkan, DenseMovesAndRunsThere) {
    fx::seed(2);
    fx::Dense d(10, 5, fx::sigmoid);
    auto m = d | fx::gpu;
    EXPECT_EQ(m.weight.device().type, "Vulkan");
    Tensor x = fx::rand({10});
    Tensor y = m(x | fx::gpu);
    EXPECT_EQ(y.device().type, "Vulkan");
    expect_near(y | fx::cpu, d(x));
    EXPECT_EQ((y | fx::cpu).device(), fx::Device{});
}

// Chain(Dense(10 => 5, σ), Dense(5 => 2), softmax) on the device.
TEST_F(SeedOnVulkan, ChainWithSoftmaxMatchesTheCpu) {
    fx::seed(3);
    auto m = fx::Chain(fx::Dense(10, 5, fx::sigmoid), fx::Dense(5, 2), fx::softmax);
    auto g = m | fx::gpu;
    Tensor x = fx::rand({10});
    Tensor y = g(x | fx::gpu);
    EXPECT_EQ(y.device().type, "Vulkan");
    expect_near(y | fx::cpu, m(x));
    EXPECT_NEAR(fx::sum(y).item(), 1.0, 1e-6);
}

// The ActorCritic struct, declared once: fmap, gpu and gradients reach both fields.
TEST_F(SeedOnVulkan, ActorCriticStructMovesAndDifferentiates) {
    ActorCritic ac{fx::ones({2, 2}), fx::ones({2})};
    auto g = ac | fx::gpu;
    EXPECT_EQ(g.actor.device().type, "Vulkan");
    EXPECT_EQ(g.critic.device().type, "Vulkan");
    auto grads = fx::gradient([](const ActorCritic& m) { return fx::sum(fx::matmul(m.actor, m.critic)); }, g);
    auto [grad] = grads;
    EXPECT_EQ(grad.actor.device().type, "Vulkan");
    EXPECT_EQ(grad.actor.to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
    EXPECT_EQ(grad.critic.to_vector<float>(), (std::vector<float>{2, 2}));
}

// Train on the device, then save after | fx::cpu; the file loads on the CPU and on the device.
TEST_F(SeedOnVulkan, SavingAfterCpuLoadsAnywhere) {
    fx::seed(4);
    auto model = fx::Chain(fx::Dense(4, 8, fx::relu), fx::Dense(8, 2)) | fx::gpu;
    auto opt = fx::setup(fx::Adam{}, model);
    Tensor x = fx::randn({6, 4}) | fx::gpu, y = fx::randn({6, 2}) | fx::gpu;
    for (int i = 0; i < 3; ++i) {
        auto [l, grads] = fx::withgradient([&](const auto& m) { return fx::mse(m(x), y); }, model);
        fx::update(opt, model, grads);
    }
    const auto path =
        std::filesystem::temp_directory_path() / ("fluxion-seed-vulkan-" + std::to_string(getpid()) + ".safetensors");
    fx::save(path, model | fx::cpu);
    auto on_cpu = fx::Chain(fx::Dense(4, 8, fx::relu), fx::Dense(8, 2));
    fx::load(path, on_cpu);
    auto on_gpu = fx::Chain(fx::Dense(4, 8, fx::relu), fx::Dense(8, 2)) | fx::gpu;
    fx::load(path, on_gpu);
    std::filesystem::remove(path);
    EXPECT_EQ(std::get<0>(on_gpu.layers).weight.device().type, "Vulkan");
    EXPECT_EQ(std::get<0>(on_cpu.layers).weight.to_vector<float>(),
              std::get<0>(model.layers).weight.to_vector<float>());
    expect_near(on_gpu(x) | fx::cpu, on_cpu(x | fx::cpu));
}

// Both of the seed's ways to bring training data to the device: moved at once, or batch by batch
// with the loader's prefetch; each batch lands on Vulkan with the CPU loader's values.
TEST_F(SeedOnVulkan, DataLoadersDeliverBatchesOnTheDevice) {
    fx::seed(5);
    Tensor X = fx::randn({10, 3}), Y = fx::arange(10, {.dtype = fx::DType::i64});
    fx::DataLoader cpu_loader({X, Y}, {.batchsize = 4});
    fx::DataLoader moved_at_once(std::tuple{X, Y} | fx::gpu, {.batchsize = 4});
    std::vector<Tensor> expected;
    for (auto [x, y] : cpu_loader) expected.push_back(x);
    std::size_t i = 0;
    for (auto [x, y] : moved_at_once) {
        EXPECT_EQ(x.device().type, "Vulkan");
        ASSERT_LT(i, expected.size());
        EXPECT_EQ(x.to_vector<float>(), expected[i++].to_vector<float>());
    }
    EXPECT_EQ(i, expected.size());
    i = 0;
    for (auto [x, y] : cpu_loader | fx::gpu) {  // prefetched to the device in the background
        EXPECT_EQ(x.device().type, "Vulkan");
        EXPECT_EQ(y.device().type, "Vulkan");
        ASSERT_LT(i, expected.size());
        EXPECT_EQ(x.to_vector<float>(), expected[i++].to_vector<float>());
    }
    EXPECT_EQ(i, expected.size());
}

// An index out of range raises on Vulkan as on the CPU (never a read outside the tensor, nor a
// silent zero), through every op that takes indices; the device stays usable afterwards.
TEST_F(SeedOnVulkan, IndicesOutOfRangeRaiseAsOnTheCpu) {
    fx::seed(6);
    Tensor x = fx::randn({4, 3});
    Tensor bad = fx::tensor(std::vector<std::int64_t>{1, 4});
    Tensor negative = fx::tensor(std::vector<std::int64_t>{-1});
    for (const fx::Device& d : {fx::Device{}, fx::get_device()}) {
        SCOPED_TRACE(d.type);
        Tensor xd = x | d, badd = bad | d;
        EXPECT_THROW(fx::index_select(xd, 0, badd), fx::ValueError);
        EXPECT_THROW(fx::index_select(xd, 0, negative | d), fx::ValueError);
        EXPECT_THROW(fx::gather(xd, badd), fx::ValueError);
        EXPECT_THROW(fx::onehot(badd, 4), fx::ValueError);
        fx::Embedding e(4, 3);
        fx::Embedding ed = e | d;
        EXPECT_THROW(ed(badd), fx::ValueError);
        Tensor good = fx::tensor(std::vector<std::int64_t>{3, 0}) | d;
        expect_near(ed(good) | fx::cpu, e(good | fx::cpu));
        EXPECT_EQ(fx::onehot(good, 4).to_vector<float>(), (std::vector<float>{0, 0, 0, 1, 1, 0, 0, 0}));
    }
}

// LeNet-5 follows the CPU's loss curve on Vulkan: the same initial weights, batches and steps.
// f32 sums in another order drift apart slowly; measured here: at most 1e-6 relative over 40 steps,
// 1.3e-7 over the 20 steps run now (2.32 -> 0.96). Each step takes about a second on lavapipe.
TEST_F(SeedOnVulkan, LeNet5TrainsWithTheCpusLossCurve) {
    fx::seed(6);
    auto cpu_model = fx::Chain(fx::Conv({5, 5}, 1, 6, fx::relu), fx::MaxPool({2, 2}), fx::Conv({5, 5}, 6, 16, fx::relu),
                               fx::MaxPool({2, 2}), fx::Flatten(), fx::Dense(256, 120, fx::relu),
                               fx::Dense(120, 84, fx::relu), fx::Dense(84, 10));
    auto gpu_model = cpu_model | fx::gpu;
    auto opt_cpu = fx::setup(fx::Adam{.eta = 1e-3}, cpu_model);
    auto opt_gpu = fx::setup(fx::Adam{.eta = 1e-3}, gpu_model);
    auto loss = [](const auto& m, const Tensor& x, const Tensor& y) {
        return fx::logitcrossentropy(m(x), fx::onehot(y, 10));
    };
    // A learnable task: each class's images are a fixed pattern plus noise.
    Tensor patterns = fx::randn({10, 1, 28, 28});
    double worst = 0, first = 0, last = 0;
    const int steps = 20;
    for (int step = 0; step < steps; ++step) {
        std::vector<std::int64_t> labels(16);
        for (std::size_t j = 0; j < labels.size(); ++j) labels[j] = std::int64_t((j + std::size_t(step)) % 10);
        Tensor y = fx::tensor(labels);
        Tensor x = fx::index_select(patterns, 0, y) + 0.5 * fx::randn({16, 1, 28, 28});
        auto [l_cpu, g_cpu] = fx::withgradient([&](const auto& m) { return loss(m, x, y); }, cpu_model);
        fx::update(opt_cpu, cpu_model, g_cpu);
        auto [l_gpu, g_gpu] =
            fx::withgradient([&](const auto& m) { return loss(m, x | fx::gpu, y | fx::gpu); }, gpu_model);
        fx::update(opt_gpu, gpu_model, g_gpu);
        const double a = l_cpu.item(), b = l_gpu.item();
        worst = std::max(worst, std::abs(a - b) / std::abs(a));
        if (step == 0) first = a;
        last = a;
    }
    std::printf("LeNet-5 on Vulkan: loss %.4f -> %.4f in %d steps, largest relative difference from the CPU %.2g\n",
                first, last, steps, worst);
    EXPECT_LT(last, 0.5 * first);  // it learns
    EXPECT_LT(worst, 1e-3);
}

}  // namespace

int main(int argc, char** argv) {
    setenv("FLUXION_GPU_BACKEND", "Vulkan", 1);  // as a user would, before the first device query
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
