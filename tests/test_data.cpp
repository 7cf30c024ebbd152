// test_data.cpp — DataLoader: batching, shuffling, checks, and `loader | dev` prefetching, on the
// CPU and on the test plugin's second backend (TestHost).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <ranges>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor_impl.hpp"
#include "fluxion/data.hpp"
#include "fluxion/ops.hpp"

namespace fx = fluxion;

namespace {

// Loads the TestHost plugin: must happen before the first device call of the process.
class TestHostEnvironment : public ::testing::Environment {
public:
    void SetUp() override { setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1); }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new TestHostEnvironment);

fx::Device testhost(int index = 0) { return fx::get_device("TestHost", index); }

// n observations: X row i is {i, -i} (f32), Y entry i is i (i64), so rows can be matched up.
fx::Tensor features(std::int64_t n) {
    std::vector<float> v;
    for (std::int64_t i = 0; i < n; ++i) v.insert(v.end(), {float(i), -float(i)});
    return fx::tensor(v, {n, 2});
}
fx::Tensor labels(std::int64_t n) { return fx::arange(n); }

std::vector<std::int64_t> ids(const fx::Tensor& y) { return y.to_vector<std::int64_t>(); }

// The label ids of every batch of one epoch.
template <class Loader> std::vector<std::vector<std::int64_t>> epoch_ids(const Loader& loader) {
    std::vector<std::vector<std::int64_t>> out;
    for (auto [x, y] : loader) out.push_back(ids(y));
    return out;
}

template <class E> void expect_error(const std::function<void()>& f, std::initializer_list<std::string> parts) {
    try {
        f();
        ADD_FAILURE() << "no exception thrown";
    } catch (const E& e) {
        for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
}

std::int64_t storage_users(const fx::Tensor& t) { return fx::detail::impl_of(t)->storage.use_count(); }

}  // namespace

static_assert(std::input_iterator<fx::DataLoader<fx::Tensor>::iterator>);
static_assert(std::ranges::input_range<fx::DataLoader<std::tuple<fx::Tensor, fx::Tensor>>>);
static_assert(std::ranges::input_range<fx::DeviceLoader<std::tuple<fx::Tensor, fx::Tensor>>>);
static_assert(std::ranges::sized_range<fx::DataLoader<fx::Tensor>>);  // fx::train shows steps per epoch
static_assert(std::ranges::sized_range<fx::DeviceLoader<fx::Tensor>>);

TEST(DataLoader, SingleTensorGivesTensorBatchesInOrder) {
    fx::DataLoader loader(fx::arange(10), {.batchsize = 4});
    static_assert(std::is_same_v<decltype(loader), fx::DataLoader<fx::Tensor>>);
    EXPECT_EQ(loader.size(), 3);
    EXPECT_EQ(loader.nobs(), 10);
    std::vector<std::vector<std::int64_t>> batches;
    for (fx::Tensor x : loader) batches.push_back(ids(x));
    EXPECT_EQ(batches, (std::vector<std::vector<std::int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
}

TEST(DataLoader, PartialFalseDropsTheShortLastBatch) {
    fx::DataLoader loader(fx::arange(10), {.batchsize = 4, .partial = false});
    EXPECT_EQ(loader.size(), 2);
    std::vector<std::int64_t> seen;
    for (fx::Tensor x : loader) {
        EXPECT_EQ(x.shape(0), 4);
        for (auto v : ids(x)) seen.push_back(v);
    }
    EXPECT_EQ(seen, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(fx::DataLoader(fx::arange(8), {.batchsize = 4, .partial = false}).size(), 2);
    EXPECT_EQ(fx::DataLoader(fx::arange(8), {.batchsize = 4}).size(), 2);
    EXPECT_EQ(fx::DataLoader(fx::arange(3), {.batchsize = 4, .partial = false}).size(), 0);
}

TEST(DataLoader, BracedTensorsMakeATupleThatUnpacks) {
    fx::Tensor X = features(7), Y = labels(7);
    fx::DataLoader loader({X, Y}, {.batchsize = 3});
    static_assert(std::is_same_v<decltype(loader), fx::DataLoader<std::tuple<fx::Tensor, fx::Tensor>>>);
    std::int64_t next = 0;
    for (auto [x, y] : loader) {
        ASSERT_EQ(x.ndim(), 2);
        EXPECT_EQ(x.shape(1), 2);
        EXPECT_EQ(x.shape(0), y.shape(0));
        for (auto v : ids(y)) EXPECT_EQ(v, next++);
        EXPECT_EQ(x.select(1, 0).to_vector<std::int64_t>(), ids(y));
    }
    EXPECT_EQ(next, 7);
}

TEST(DataLoader, AnyArity) {
    fx::Tensor Z = fx::arange(6) * 10.0;
    fx::DataLoader loader({features(6), labels(6), Z}, {.batchsize = 4});
    static_assert(std::is_same_v<decltype(loader), fx::DataLoader<std::tuple<fx::Tensor, fx::Tensor, fx::Tensor>>>);
    std::vector<std::int64_t> zs;
    for (auto [x, y, z] : loader)
        for (auto v : z.to_vector<std::int64_t>()) zs.push_back(v);
    EXPECT_EQ(zs, (std::vector<std::int64_t>{0, 10, 20, 30, 40, 50}));
}

TEST(DataLoader, ShuffleKeepsRowsTogetherAndCoversEveryObservationOnce) {
    fx::DataLoader loader({features(50), labels(50)}, {.batchsize = 8, .shuffle = true, .seed = 3});
    std::multiset<std::int64_t> seen;
    std::vector<std::int64_t> order;
    for (auto [x, y] : loader) {
        EXPECT_EQ(x.select(1, 0).to_vector<std::int64_t>(), ids(y));  // row i of X still belongs to label i
        EXPECT_EQ((-x.select(1, 1)).to_vector<std::int64_t>(), ids(y));
        for (auto v : ids(y)) {
            seen.insert(v);
            order.push_back(v);
        }
    }
    std::multiset<std::int64_t> all;
    for (std::int64_t i = 0; i < 50; ++i) all.insert(i);
    EXPECT_EQ(seen, all);
    std::vector<std::int64_t> sorted(order);
    std::sort(sorted.begin(), sorted.end());
    EXPECT_NE(order, sorted);
}

TEST(DataLoader, ShuffleIsReproducibleFromTheSeedAndNewEachEpoch) {
    fx::DataLoaderOptions options{.batchsize = 16, .shuffle = true, .seed = 42};
    fx::DataLoader a({features(100), labels(100)}, options);
    fx::DataLoader b({features(100), labels(100)}, options);
    auto a1 = epoch_ids(a), a2 = epoch_ids(a);
    EXPECT_NE(a1, a2);
    EXPECT_EQ(epoch_ids(b), a1);
    EXPECT_EQ(epoch_ids(b), a2);
    options.seed = 43;
    EXPECT_NE(epoch_ids(fx::DataLoader({features(100), labels(100)}, options)), a1);
}

TEST(DataLoader, ShardsSplitEachGlobalBatchOfOneEpochOrderAmongTheRanks) {
    // 3 ranks × batch 4 = global batches of 12: 40 observations make 3 of them; the last 4 are
    // dropped on every rank, so each rank takes 3 equal batches.
    fx::DataLoaderOptions whole{.batchsize = 12, .shuffle = true, .partial = false, .seed = 5};
    std::vector<std::int64_t> global;
    for (const auto& batch : epoch_ids(fx::DataLoader({features(40), labels(40)}, whole)))
        global.insert(global.end(), batch.begin(), batch.end());
    ASSERT_EQ(global.size(), 36u);
    std::multiset<std::int64_t> seen;
    for (std::int64_t rank = 0; rank < 3; ++rank) {
        fx::DataLoaderOptions part{.batchsize = 4, .shuffle = true, .seed = 5, .shard = {rank, 3}};
        fx::DataLoader loader({features(40), labels(40)}, part);
        EXPECT_EQ(loader.size(), 3);
        EXPECT_EQ(loader.nobs(), 40);
        std::int64_t b = 0;
        for (auto [x, y] : loader) {
            ASSERT_EQ(y.shape(0), 4);
            EXPECT_EQ(x.select(1, 0).to_vector<std::int64_t>(), ids(y));
            const auto expected = std::vector<std::int64_t>(global.begin() + b * 12 + rank * 4,
                                                            global.begin() + b * 12 + rank * 4 + 4);
            EXPECT_EQ(ids(y), expected) << "rank " << rank << ", batch " << b;
            for (auto v : ids(y)) seen.insert(v);
            ++b;
        }
        // Prefetched batches are the same.
        std::vector<std::int64_t> prefetched;
        fx::DataLoader again({features(40), labels(40)}, part);
        for (auto [x, y] : again | fx::cpu)
            for (auto v : ids(y)) prefetched.push_back(v);
        std::vector<std::int64_t> direct;
        fx::DataLoader once({features(40), labels(40)}, part);
        for (auto [x, y] : once)
            for (auto v : ids(y)) direct.push_back(v);
        EXPECT_EQ(prefetched, direct);
    }
    EXPECT_EQ(seen.size(), 36u);  // no observation on two ranks
    EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(), 36u);
}

TEST(DataLoader, UnshuffledShardsAndBadShardsAreChecked) {
    fx::DataLoader r1(fx::arange(10), {.batchsize = 2, .shard = {1, 2}});
    std::vector<std::vector<std::int64_t>> batches;
    for (fx::Tensor x : r1) batches.push_back(ids(x));
    EXPECT_EQ(batches, (std::vector<std::vector<std::int64_t>>{{2, 3}, {6, 7}}));
    EXPECT_EQ(fx::DataLoader(fx::arange(3), {.batchsize = 2, .shard = {0, 2}}).size(), 0);
    for (fx::Shard bad : {fx::Shard{2, 2}, fx::Shard{-1, 2}, fx::Shard{0, 0}})
        expect_error<fx::ValueError>([&] { fx::DataLoader(fx::arange(10), {.batchsize = 2, .shard = bad}); },
                                     {"shard {rank = " + std::to_string(bad.rank), "rank must be in [0, count)"});
}

TEST(DataLoader, CopiesShareTheEpochCounter) {
    fx::DataLoaderOptions options{.batchsize = 10, .shuffle = true};
    fx::DataLoader reference({features(30), labels(30)}, options);
    auto r1 = epoch_ids(reference), r2 = epoch_ids(reference);
    fx::DataLoader loader({features(30), labels(30)}, options);
    auto copy = loader;
    EXPECT_EQ(epoch_ids(loader), r1);
    EXPECT_EQ(epoch_ids(copy), r2);
}

// A resumed run's loader is a new one: set_epoch gives it the order the saved run had next, also
// through `loader | dev` (the soak, tests/reliability/soak.cpp, restores it from a checkpoint).
TEST(DataLoader, SetEpochRestoresTheOrderOfThatEpoch) {
    fx::DataLoaderOptions options{.batchsize = 8, .shuffle = true, .seed = 5};
    fx::DataLoader reference({features(40), labels(40)}, options);
    EXPECT_EQ(reference.epoch(), 0u);
    std::vector<std::vector<std::vector<std::int64_t>>> orders;
    for (int e = 0; e < 4; ++e) orders.push_back(epoch_ids(reference));
    EXPECT_EQ(reference.epoch(), 4u);
    fx::DataLoader resumed({features(40), labels(40)}, options);
    resumed.set_epoch(2);
    EXPECT_EQ(resumed.epoch(), 2u);
    EXPECT_EQ(epoch_ids(resumed), orders[2]);
    EXPECT_EQ(resumed.epoch(), 3u);
    std::vector<std::vector<std::int64_t>> on_device;
    for (auto [x, y] : resumed | fx::Device{}) on_device.push_back(ids(y));
    EXPECT_EQ(on_device, orders[3]);
    resumed.set_epoch(0);
    EXPECT_EQ(epoch_ids(resumed), orders[0]);
}

TEST(DataLoader, UnshuffledBatchesAreViewsOfTheData) {
    fx::Tensor X = features(10);
    fx::DataLoader loader(X, {.batchsize = 5});
    auto it = loader.begin();
    fx::Tensor first = *it;
    EXPECT_EQ(fx::detail::impl_of(first)->storage, fx::detail::impl_of(X)->storage);
    EXPECT_EQ(first.shape(), (fx::Shape{5, 2}));
}

TEST(DataLoader, EmptyDataHasNoBatches) {
    fx::DataLoader loader(fx::zeros({0, 3}), {.batchsize = 4});
    EXPECT_EQ(loader.size(), 0);
    EXPECT_TRUE(loader.begin() == loader.end());
}

TEST(DataLoader, DisagreeingObservationCountsNameTheSizes) {
    expect_error<fx::ShapeError>([] { fx::DataLoader({features(10), labels(9)}); }, {"10", "9", "{10, 2}", "{9}"});
}

TEST(DataLoader, RejectsBadInput) {
    expect_error<fx::ValueError>([] { fx::DataLoader(fx::arange(5), {.batchsize = 0}); }, {"batchsize", "0"});
    expect_error<fx::ShapeError>([] { fx::DataLoader(fx::scalar(1.0)); }, {"0-dimensional"});
    expect_error<fx::ValueError>([] { fx::DataLoader({features(3), fx::Tensor()}); }, {"tensor 1"});
}

TEST(DataLoader, DataMovedOnceStaysOnItsDevice) {
    const fx::Device dev = testhost(1);
    fx::DataLoader resident(std::tuple{features(9), labels(9)} | dev, {.batchsize = 4, .shuffle = true});
    static_assert(std::is_same_v<decltype(resident), fx::DataLoader<std::tuple<fx::Tensor, fx::Tensor>>>);
    std::int64_t count = 0;
    for (auto [x, y] : resident) {
        EXPECT_EQ(x.device(), dev);
        EXPECT_EQ(y.device(), dev);
        EXPECT_EQ(x.select(1, 0).to_vector<std::int64_t>(), ids(y));
        count += y.shape(0);
    }
    EXPECT_EQ(count, 9);
}

// ---- loader | dev ----

TEST(DeviceLoader, BatchesArriveOnTheDeviceInThePlainLoadersOrder) {
    for (bool parallel : {false, true}) {
        fx::DataLoaderOptions options{.batchsize = 7, .shuffle = true, .seed = 9, .parallel = parallel};
        fx::DataLoader plain({features(100), labels(100)}, options);
        fx::DataLoader moved({features(100), labels(100)}, options);
        const fx::Device dev = testhost(1);
        for (int epoch = 0; epoch < 2; ++epoch) {
            auto expected = epoch_ids(plain);
            std::vector<std::vector<std::int64_t>> got;
            for (auto [x, y] : moved | dev) {
                EXPECT_EQ(x.device(), dev);
                EXPECT_EQ(y.device(), dev);
                EXPECT_EQ(x.select(1, 0).to_vector<std::int64_t>(), ids(y));
                got.push_back(ids(y));
            }
            EXPECT_EQ(got, expected) << "parallel = " << parallel << ", epoch " << epoch;
        }
    }
}

TEST(DeviceLoader, GpuAndCpuMovers) {
    // fx::gpu's device: a real GPU where there is one, else the TestHost plugin standing in for one.
    ASSERT_FALSE(fx::get_device().is_cpu());
    fx::DataLoader loader(fx::arange(10), {.batchsize = 3});
    auto on_gpu = loader | fx::gpu;
    static_assert(std::is_same_v<decltype(on_gpu), fx::DeviceLoader<fx::Tensor>>);
    EXPECT_EQ(on_gpu.device(), fx::get_device());
    EXPECT_EQ(on_gpu.size(), 4);
    std::vector<std::int64_t> seen;
    for (fx::Tensor x : on_gpu) {
        EXPECT_EQ(x.device(), fx::get_device());
        for (auto v : ids(x)) seen.push_back(v);
    }
    EXPECT_EQ(seen, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));  // in order, none lost or repeated
    seen.clear();
    for (fx::Tensor x : fx::DataLoader(fx::arange(10) | testhost(), {.batchsize = 3}) | fx::cpu) {
        EXPECT_TRUE(x.device().is_cpu());
        for (auto v : ids(x)) seen.push_back(v);
    }
    EXPECT_EQ(seen, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(DeviceLoader, EachPassIsANewEpoch) {
    fx::DataLoader loader({features(40), labels(40)}, {.batchsize = 10, .shuffle = true});
    auto moved = loader | testhost();
    EXPECT_NE(epoch_ids(moved), epoch_ids(moved));
    EXPECT_NE(epoch_ids(loader | testhost()), epoch_ids(loader | testhost()));
}

TEST(DeviceLoader, AnErrorWhilePreparingReachesTheConsumer) {
    for (bool parallel : {false, true}) {
        fx::DataLoader loader({features(20), labels(20)}, {.batchsize = 5, .parallel = parallel});
        auto broken = loader | fx::Device{"NoSuchBackend", 0};
        auto it = broken.begin();
        EXPECT_THROW(*it, fx::DeviceError);
        EXPECT_THROW(++it, fx::DeviceError);  // stays failed, never waits for batches that will not come
        expect_error<fx::DeviceError>([&] { for (auto [x, y] : broken) (void)x; }, {"NoSuchBackend"});
    }
}

TEST(DeviceLoader, StaysAtMostTwoBatchesAheadAndStopsWhenTheLoopEndsEarly) {
    fx::Tensor X = features(1000);
    fx::DataLoader loader(X, {.batchsize = 1});
    ASSERT_EQ(storage_users(X), 1);
    {
        // `| fx::cpu` keeps unshuffled batches as views of X, so X's storage counts the prepared ones.
        auto moved = loader | fx::cpu;
        auto it = moved.begin();
        fx::Tensor first = *it;  // the current batch, plus up to two prepared ahead
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (storage_users(X) < 4 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // time to overrun the bound, if it could
        EXPECT_EQ(storage_users(X), 4);
        ++it;
        EXPECT_EQ(ids(*it), ids(X.slice(0, 1, 2)));
    }
    EXPECT_EQ(storage_users(X), 1);  // the thread is joined and every prepared batch released

    int taken = 0;
    for ([[maybe_unused]] fx::Tensor x : loader | fx::cpu) {
        if (++taken == 3) break;
    }
    EXPECT_EQ(taken, 3);
    EXPECT_EQ(storage_users(X), 1);
}

TEST(DeviceLoader, ReadingPastTheEndThrowsInsteadOfWaiting) {
    auto moved = fx::DataLoader(fx::arange(4), {.batchsize = 2}) | testhost();
    auto it = moved.begin();
    ++it;
    ++it;
    ASSERT_TRUE(it == moved.end());
    EXPECT_THROW(*it, fx::ValueError);
}
