// test_threads_stress.cpp — several threads at once creating and destroying data loaders with
// prefetching (`loader | dev`), breaking out of their loops early, dropping a loader while its
// iterator is still running, and moving tensors between the CPU and every other device (the
// TestHost plugin's two devices, Vulkan's where present), and, on Vulkan alone, all of these at
// once: some threads prefetching to it while others move tensors to and from it and compute there,
// so that its queue, staging buffers and allocator serve several threads together. Every batch and
// every moved value is checked, so lost or mixed-up data fails here; run under the `tsan` preset
// (`make tsan`, which builds the Vulkan plugin and runs it on lavapipe), data races and lock-order
// inversions fail too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"
#include "vulkan_environment.hpp"

namespace fx = fluxion;

namespace {

// Loads the TestHost plugin: must happen before the first device call of the process.
const bool kPluginPathSet = [] { return ::setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1) == 0; }();

constexpr int kThreads = 4;

// The CPU, TestHost's two devices (device moves and queues, not kernels: they run the CPU's) and
// every other backend's.
std::vector<fx::Device> all_devices() {
    std::vector<fx::Device> out{fx::Device{}};
    for (const auto& d : fx::devices("TestHost")) out.push_back(d.device);
    for (const auto& d : fx::testing::other_devices()) out.push_back(d);
    std::cout << "[   INFO   ] devices:";
    for (const auto& d : out) std::cout << " " << d.str();
    std::cout << "\n";
    return out;
}

// n observations: X row i is {i, -i} (f32), Y entry i is i (i64), so rows can be matched up.
fx::Tensor features(std::int64_t n) {
    std::vector<float> v;
    for (std::int64_t i = 0; i < n; ++i) v.insert(v.end(), {float(i), -float(i)});
    return fx::tensor(v, {n, 2});
}

// Runs body(thread index) on kThreads threads at once and joins them.
template <class F> void on_threads(F body) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(body, t);
    for (auto& t : threads) t.join();
}

TEST(ThreadsStress, LoadersArePrefetchedBrokenOffAndDroppedFromSeveralThreads) {
    ASSERT_TRUE(kPluginPathSet);
    const auto devices = all_devices();
    ASSERT_GE(devices.size(), 3u) << "the CPU and TestHost's two devices at least";
    on_threads([&](int thread) {
        std::mt19937 random(thread);
        for (int round = 0; round < 6; ++round) {
            const std::int64_t n = 29 + 3 * thread + round;
            fx::DataLoader loader(
                {features(n), fx::arange(n)},
                {.batchsize = 4, .shuffle = true, .seed = std::uint64_t(round), .parallel = round % 2 == 0});
            for (const auto& device : devices) {
                // Every batch up to `stop`, then break: a whole epoch when stop is the loader's size.
                const std::int64_t stop = std::uniform_int_distribution<std::int64_t>(0, loader.size())(random);
                std::vector<std::int64_t> seen;
                std::int64_t b = 0;
                for (auto [x, y] : loader | device) {
                    if (b++ == stop) break;
                    ASSERT_EQ(x.device(), device);
                    ASSERT_EQ(y.device(), device);
                    const auto ids = y.to(fx::Device{}).to_vector<std::int64_t>();
                    EXPECT_EQ(x.to(fx::Device{}).select(1, 0).to_vector<std::int64_t>(), ids) << "rows stay matched";
                    seen.insert(seen.end(), ids.begin(), ids.end());
                }
                if (stop == loader.size()) {
                    std::sort(seen.begin(), seen.end());
                    std::vector<std::int64_t> all(static_cast<std::size_t>(n));
                    std::iota(all.begin(), all.end(), 0);
                    EXPECT_EQ(seen, all) << "a whole epoch on " << device.str() << " sees every observation once";
                }
            }
            // The loader and its DeviceLoader gone while the iterator still runs: it keeps what it needs.
            auto it = [&] {
                fx::DataLoader dropped({features(n), fx::arange(n)}, {.batchsize = 3, .parallel = true});
                return (dropped | devices[1 + round % (devices.size() - 1)]).begin();
            }();
            for (std::int64_t b = 0; b < 4 && !(it == std::default_sentinel); ++b, ++it)
                EXPECT_EQ(std::get<1>(*it).to(fx::Device{}).to_vector<std::int64_t>(),
                          (std::vector<std::int64_t>{3 * b, 3 * b + 1, 3 * b + 2}));
        }
    });
}

TEST(ThreadsStress, TensorsMoveBetweenDevicesFromSeveralThreads) {
    ASSERT_TRUE(kPluginPathSet);
    const auto devices = all_devices();
    ASSERT_GE(devices.size(), 3u) << "the CPU and TestHost's two devices at least";
    on_threads([&](int thread) {
        for (int round = 0; round < 20; ++round) {
            std::vector<float> values(64 + 16 * thread);
            std::iota(values.begin(), values.end(), float(round));
            std::vector<float> expected = values;
            fx::Tensor t = fx::tensor(values);
            // Along every pair of devices, computing on each one on the way.
            for (const auto& a : devices)
                for (const auto& b : devices) {
                    t = (t.to(a) * 2.0 + 1.0).to(b) * 0.5;
                    for (auto& v : expected) v += 0.5f;  // exact: small multiples of 1/2
                    ASSERT_EQ(t.device(), b);
                }
            fx::synchronize(t.device());
            EXPECT_EQ(t.to(fx::Device{}).to_vector<float>(), expected) << "thread " << thread << ", round " << round;
        }
    });
}

// Vulkan's device shared at once by threads of both kinds: even threads prefetch shuffled loaders
// to it (breaking off at random, dropping a loader under its running iterator), odd ones move
// tensors CPU -> Vulkan -> CPU with arithmetic on the device and drop device tensors unread (the
// allocator frees while the queue still runs other threads' work).
TEST(ThreadsStress, VulkanServesLoadersAndMovesFromSeveralThreadsAtOnce) {
    std::string why;
    if (!fx_test::vulkan_runs(&why)) GTEST_SKIP() << "Vulkan is not functional: " << why;
    const fx::Device vulkan = fx::devices("Vulkan").at(0).device;
    on_threads([&](int thread) {
        std::mt19937 random(100 + thread);
        for (int round = 0; round < 6; ++round) {
            if (thread % 2 == 0) {
                const std::int64_t n = 23 + 5 * thread + round;
                fx::DataLoader loader({features(n), fx::arange(n)}, {.batchsize = 3,
                                                                     .shuffle = true,
                                                                     .seed = std::uint64_t(thread * 10 + round),
                                                                     .parallel = round % 2 == 1});
                const std::int64_t stop = std::uniform_int_distribution<std::int64_t>(0, loader.size())(random);
                std::int64_t b = 0, seen = 0;
                for (auto [x, y] : loader | vulkan) {
                    if (b++ == stop) break;
                    ASSERT_EQ(x.device(), vulkan);
                    const auto ids = y.to(fx::Device{}).to_vector<std::int64_t>();
                    EXPECT_EQ((x * -1.0).to(fx::Device{}).select(1, 1).to_vector<std::int64_t>(), ids)
                        << "rows stay matched, thread " << thread << ", round " << round;
                    seen += std::int64_t(ids.size());
                }
                if (stop == loader.size()) {
                    EXPECT_EQ(seen, n) << "a whole epoch sees every observation";
                }
                auto it = [&] {
                    fx::DataLoader dropped({features(n), fx::arange(n)}, {.batchsize = 2, .parallel = true});
                    return (dropped | vulkan).begin();
                }();
                for (std::int64_t k = 0; k < 3 && !(it == std::default_sentinel); ++k, ++it)
                    EXPECT_EQ(std::get<1>(*it).to(fx::Device{}).to_vector<std::int64_t>(),
                              (std::vector<std::int64_t>{2 * k, 2 * k + 1}));
            } else {
                for (int k = 0; k < 5; ++k) {
                    std::vector<float> values(std::size_t(40 + 24 * k + thread));
                    std::iota(values.begin(), values.end(), float(round - k));
                    fx::Tensor unread = fx::tensor(values).to(vulkan) * 3.0;  // freed without a read
                    fx::Tensor t = ((fx::tensor(values).to(vulkan) + 1.0) * 2.0).to(fx::Device{});
                    std::vector<float> expected = values;
                    for (auto& v : expected) v = (v + 1) * 2;  // exact: small integers
                    EXPECT_EQ(t.to_vector<float>(), expected) << "thread " << thread << ", round " << round;
                }
            }
        }
    });
    fx::synchronize(vulkan);
}

}  // namespace
