// test_collectives.cpp — run by mpirun on 2 and 4 processes (tests/distributed/run.sh): allreduce
// and broadcast on every dtype and awkward sizes, on model structures, and data-parallel Adam
// against one process taking the whole batch. Every rank runs every test in the same order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "distributed/overlap.hpp"
#include "fluxion/distributed.hpp"
#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
namespace dist = fluxion::distributed;

namespace {

const std::vector<fx::DType> kAllTypes = {fx::DType::f32, fx::DType::f64,     fx::DType::i32, fx::DType::i64,
                                          fx::DType::u8,  fx::DType::boolean, fx::DType::f16, fx::DType::bf16};
const std::vector<std::int64_t> kSizes = {0, 1, 7, 100003};
// Small buckets, so that the large tensors travel in many, the last one partly filled.
constexpr std::size_t kBucketBytes = 4096;
fx::Tensor allreduce_small(const fx::Tensor& t, dist::ReduceOp op) {
    return dist::detail::allreduce({t}, op, kBucketBytes, "allreduce")[0];
}
fx::Tensor broadcast_small(const fx::Tensor& t, int root) {
    return dist::detail::broadcast({t}, root, kBucketBytes, "broadcast")[0];
}

// Element i on rank r: small integers, exact in every type (bool: r + i odd).
fx::Tensor pattern(std::int64_t n, int r, fx::DType dtype) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        v[i] = dtype == fx::DType::boolean ? double((r + i) % 2) : double((i % 11) + r + 1);
    return fx::tensor(v, {n}, {.dtype = fx::DType::f64}).to(dtype);
}

std::vector<double> values(const fx::Tensor& t) { return t.to(fx::DType::f64).to_vector<double>(); }

fx::Tensor parameters_flat(const auto& model) {
    std::vector<fx::Tensor> flat;
    fx::visit_tensors(model, [&](const std::string&, const fx::Tensor& t) { flat.push_back(t.reshape({-1})); });
    return fx::concat(flat);
}

double max_abs_difference(const fx::Tensor& a, const fx::Tensor& b) { return fx::max(fx::abs(a - b)).item(); }

}  // namespace

TEST(Distributed, AllreduceEveryDtypeAndAwkwardSize) {
    const int world = dist::world_size(), me = dist::rank();
    for (fx::DType dtype : kAllTypes)
        for (std::int64_t n : kSizes) {
            SCOPED_TRACE(std::string(fx::name(dtype)) + " of " + std::to_string(n));
            const fx::Tensor mine = pattern(n, me, dtype);
            std::vector<std::vector<double>> every_rank;
            for (int r = 0; r < world; ++r) every_rank.push_back(values(pattern(n, r, dtype)));
            for (dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::max, dist::ReduceOp::min}) {
                fx::Tensor got = allreduce_small(mine, op);
                EXPECT_EQ(got.dtype(), dtype);
                EXPECT_EQ(got.shape(), mine.shape());
                std::vector<double> expected(static_cast<std::size_t>(n));
                for (int r = 0; r < world; ++r) {
                    const auto& v = every_rank[r];
                    for (std::int64_t i = 0; i < n; ++i) {
                        double& e = expected[i];
                        if (r == 0) e = v[i];
                        else if (op == dist::ReduceOp::max) e = std::max(e, v[i]);
                        else if (op == dist::ReduceOp::min) e = std::min(e, v[i]);
                        else e = dtype == fx::DType::boolean ? double(e || v[i]) : e + v[i];
                    }
                }
                EXPECT_EQ(values(got), expected) << "op " << int(op);
            }
            if (fx::is_floating(dtype)) {
                const auto mean = values(allreduce_small(mine, dist::ReduceOp::mean));
                for (std::int64_t i = 0; i < n; ++i)
                    ASSERT_EQ(mean[i], double(i % 11) + 1 + (world - 1) / 2.0) << "element " << i;
            }
        }
}

TEST(Distributed, TensorsOnAnotherDeviceAreStagedThroughTheHostAndComeBackThere) {
    const fx::Device other = fx::get_device("TestHost", 0);
    const fx::Tensor mine = pattern(1000, dist::rank(), fx::DType::f32).to(other);
    const fx::Tensor host = pattern(10, dist::rank(), fx::DType::i64);
    const auto [sum, copied] = dist::allreduce(std::tuple{mine, host});
    EXPECT_EQ(sum.device(), other);
    EXPECT_EQ(copied.device(), fx::Device{});
    EXPECT_EQ(values(sum), values(dist::allreduce(mine.to(fx::Device{}))));
    EXPECT_EQ(values(dist::broadcast(mine, 0)), values(pattern(1000, 0, fx::DType::f32)));
    EXPECT_EQ(dist::broadcast(mine, 0).device(), other);
}

TEST(Distributed, ATensorLargerThanADefaultBucketIsReducedWhole) {
    const std::int64_t n = dist::default_bucket_bytes / 4 + 12345;  // f32: one full bucket and a part
    const fx::Tensor got = dist::allreduce(fx::full({n}, dist::rank() + 1.0));
    const int w = dist::world_size();
    EXPECT_EQ(fx::min(got).item(), w * (w + 1) / 2.0);
    EXPECT_EQ(fx::max(got).item(), w * (w + 1) / 2.0);
}

TEST(Distributed, MeanOfIntegersIsRefusedOnEveryRank) {
    try {
        dist::allreduce(fx::arange(4), dist::ReduceOp::mean);
        FAIL() << "the mean of an i64 tensor was accepted";
    } catch (const fx::DTypeError& e) {
        EXPECT_NE(std::string(e.what()).find("use ReduceOp::sum and divide"), std::string::npos) << e.what();
    }
}

TEST(Distributed, BroadcastEveryDtypeAndAwkwardSizeFromEveryRoot) {
    for (int root = 0; root < dist::world_size(); ++root)
        for (fx::DType dtype : kAllTypes)
            for (std::int64_t n : kSizes) {
                SCOPED_TRACE(std::string(fx::name(dtype)) + " of " + std::to_string(n) + " from " +
                             std::to_string(root));
                fx::Tensor got = broadcast_small(pattern(n, dist::rank(), dtype).reshape({n, 1}), root);
                EXPECT_EQ(got.shape(), (fx::Shape{n, 1}));
                EXPECT_EQ(got.dtype(), dtype);
                EXPECT_EQ(values(got), values(pattern(n, root, dtype)));
            }
}

TEST(Distributed, ModelStructuresTravelInBuckets) {
    fx::seed(1000 + dist::rank());  // a different model on every rank
    auto model = fx::Chain(fx::Dense(5, 300, fx::relu), fx::Dense(300, 2));
    auto from_root = dist::broadcast(model);
    const fx::Tensor flat = parameters_flat(from_root);
    EXPECT_EQ(max_abs_difference(dist::allreduce(flat, dist::ReduceOp::max), flat), 0.0);
    EXPECT_EQ(max_abs_difference(dist::allreduce(flat, dist::ReduceOp::min), flat), 0.0);
    if (dist::rank() == 0) {
        EXPECT_EQ(max_abs_difference(flat, parameters_flat(model)), 0.0);
    }

    // The sum over a structure is the sum of each leaf; tiny buckets split leaves across messages.
    const auto summed = dist::allreduce(model, dist::ReduceOp::sum);
    std::vector<fx::Tensor> leaves;
    fx::visit_tensors(model, [&](const std::string&, const fx::Tensor& t) { leaves.push_back(t); });
    const auto tiny = dist::detail::allreduce(leaves, dist::ReduceOp::sum, 64, "allreduce");
    std::size_t i = 0;
    fx::visit_tensors(summed, [&](const std::string& path, const fx::Tensor& t) {
        EXPECT_LT(max_abs_difference(t, dist::allreduce(leaves[i], dist::ReduceOp::sum)), 1e-6) << path;
        EXPECT_LT(max_abs_difference(t, tiny[i]), 1e-6) << path;
        ++i;
    });
}

TEST(Distributed, DifferentTensorsOnDifferentRanksAreAnErrorNotGarbage) {
    try {
        dist::allreduce(fx::zeros({dist::rank() + 2}));
        FAIL() << "tensors of different shapes were reduced";
    } catch (const dist::CommunicationError& e) {
        EXPECT_NE(std::string(e.what()).find("the processes pass different tensors"), std::string::npos) << e.what();
    }
}

TEST(Distributed, OnlyRankZeroWritesAndItsFailureReachesEveryRank) {
    int writes = 0;
    dist::detail::on_rank0("test", [&] { ++writes; });
    EXPECT_EQ(writes, dist::rank() == 0 ? 1 : 0);
    const auto all = dist::allreduce(fx::tensor(std::vector<std::int64_t>{writes})).item<std::int64_t>();
    EXPECT_EQ(all, 1);
    try {
        dist::save("/nonexistent-folder/model.safetensors", fx::Dense(2, 2));
        FAIL() << "saving into a missing folder succeeded";
    } catch (const fx::IOError& e) {
        if (dist::rank() != 0) {
            EXPECT_NE(std::string(e.what()).find("rank 0 failed to write the file"), std::string::npos) << e.what();
        }
        EXPECT_NE(std::string(e.what()).find("nonexistent-folder"), std::string::npos) << e.what();
    }
}

// Each of N ranks takes batch 64 / N of the same shuffled order; averaged gradients make every
// step the one a single process takes with batch 64. 50 Adam steps at η = 1e-2; the two runs
// differ only in the order of floating-point sums (measured: below 1e-6), the replicas not at all.
TEST(Distributed, DataParallelAdamFollowsOneProcessWithTheWholeBatch) {
    const int world = dist::world_size();
    ASSERT_EQ(64 % world, 0);
    fx::seed(7);
    const fx::Tensor X = fx::randn({640, 8}), Y = fx::randn({640, 3});
    fx::seed(100 + dist::rank());
    auto model = dist::broadcast(fx::Chain(fx::Dense(8, 32, fx::tanh), fx::Dense(32, 3)));
    auto single = fx::fmap([](const fx::Tensor& t) { return t.clone(); }, model);

    auto lossfn = [](const auto& m, const fx::Tensor& x, const fx::Tensor& y) { return fx::mse(m(x), y); };
    auto opt =
        fx::setup(fx::OptimiserChain(dist::AverageGradients{.bucket_bytes = 1024}, fx::Adam{.eta = 1e-2}), model);
    auto opt_single = fx::setup(fx::Adam{.eta = 1e-2}, single);
    fx::DataLoader shard({X, Y}, {.batchsize = 64 / world, .shuffle = true, .seed = 3, .shard = dist::shard()});
    fx::DataLoader whole({X, Y}, {.batchsize = 64, .shuffle = true, .seed = 3});
    ASSERT_EQ(shard.size(), 10);
    const auto losses = fx::train(lossfn, model, shard, opt, {.epochs = 5, .progress = false});
    fx::train(lossfn, single, whole, opt_single, {.epochs = 5, .progress = false});
    ASSERT_EQ(losses.size(), 50u);

    const fx::Tensor p = parameters_flat(model), q = parameters_flat(single);
    const double from_single = max_abs_difference(p, q);
    EXPECT_LT(from_single, 1e-5) << "data-parallel Adam left the single-process trajectory";
    const double between_ranks =
        max_abs_difference(dist::allreduce(p, dist::ReduceOp::max), dist::allreduce(p, dist::ReduceOp::min));
    EXPECT_EQ(between_ranks, 0.0) << "the replicas diverged";
    if (dist::rank() == 0)
        std::printf("[ distributed ] %d ranks: %.3g from one process after 50 steps\n", world, from_single);
}

// A compiled data-parallel step replays the allreduce (a recorded host call), so it follows the
// eager data-parallel steps; without fall_back, compile throws if the step could not be replayed.
TEST(Distributed, CompiledDataParallelStepsReplayTheAllreduce) {
    const int world = dist::world_size();
    fx::seed(7);
    const fx::Tensor X = fx::randn({64, 8}), Y = fx::randn({64, 3});
    const fx::Tensor x = X.slice(0, dist::rank() * (64 / world), (dist::rank() + 1) * (64 / world));
    const fx::Tensor y = Y.slice(0, dist::rank() * (64 / world), (dist::rank() + 1) * (64 / world));
    fx::seed(100 + dist::rank());
    auto model = dist::broadcast(fx::Chain(fx::Dense(8, 32, fx::tanh), fx::Dense(32, 3)));
    auto eager = fx::fmap([](const fx::Tensor& t) { return t.clone(); }, model);
    auto lossfn = [](const auto& m, const fx::Tensor& a, const fx::Tensor& b) { return fx::mse(m(a), b); };
    const auto rule = fx::OptimiserChain(dist::AverageGradients{.bucket_bytes = 256}, fx::Adam{.eta = 1e-2});
    auto opt = fx::setup(rule, model);
    auto opt_eager = fx::setup(rule, eager);
    auto step = fx::compile(lossfn, model, opt);
    for (int i = 0; i < 20; ++i) {
        step(x, y);
        auto [loss, grads] = fx::withgradient([&](const auto& m) { return lossfn(m, x, y); }, eager);
        fx::update(opt_eager, eager, grads);
    }
    EXPECT_GT(step.stats(x, y).kernels, 0u) << "the step was not compiled";
    const fx::Tensor p = parameters_flat(model), q = parameters_flat(eager);
    EXPECT_LT(max_abs_difference(p, q), 1e-6) << "compiled data-parallel steps left the eager ones";
    EXPECT_EQ(max_abs_difference(dist::allreduce(p, dist::ReduceOp::max), dist::allreduce(p, dist::ReduceOp::min)), 0.0)
        << "the replicas diverged";
}

// The allreduce overlapped with the backward pass gives the averages the optimiser step computes
// itself (an Adam trajectory of 20 steps, within the rounding of a different summation order on 4
// ranks), and it does start during the backward passes: from the first step, since setup lays out
// the buckets, eagerly and in compiled replays. Small buckets make several.
TEST(Distributed, AveragingOverlappedWithTheBackwardPassEqualsTheStepsOwn) {
    fx::seed(7);
    const fx::Tensor x = fx::randn({16, 8}), y = fx::randn({16, 3});
    fx::seed(100 + dist::rank());
    auto lossfn = [](const auto& m, const fx::Tensor& a, const fx::Tensor& b) { return fx::mse(m(a), b); };
    auto overlapped = dist::broadcast(fx::Chain(fx::Dense(8, 32, fx::tanh), fx::Dense(32, 3)));
    auto plain = fx::fmap([](const fx::Tensor& t) { return t.clone(); }, overlapped);
    auto compiled = fx::fmap([](const fx::Tensor& t) { return t.clone(); }, overlapped);
    auto opt =
        fx::setup(fx::OptimiserChain(dist::AverageGradients{.bucket_bytes = 256}, fx::Adam{.eta = 1e-2}), overlapped);
    auto opt_plain = fx::setup(
        fx::OptimiserChain(dist::AverageGradients{.bucket_bytes = 256, .overlap = false}, fx::Adam{.eta = 1e-2}),
        plain);
    auto opt_compiled =
        fx::setup(fx::OptimiserChain(dist::AverageGradients{.bucket_bytes = 256}, fx::Adam{.eta = 1e-2}), compiled);
    auto step = fx::compile(lossfn, compiled, opt_compiled);
    const std::int64_t before = dist::detail::overlapped_buckets();
    for (int i = 0; i < 20; ++i) {
        auto [loss, grads] = fx::withgradient([&](const auto& m) { return lossfn(m, x, y); }, overlapped);
        fx::update(opt, overlapped, grads);
    }
    const std::int64_t eager_started = dist::detail::overlapped_buckets() - before;
    for (int i = 0; i < 20; ++i) {
        auto [loss, grads] = fx::withgradient([&](const auto& m) { return lossfn(m, x, y); }, plain);
        fx::update(opt_plain, plain, grads);
    }
    EXPECT_EQ(dist::detail::overlapped_buckets() - before, eager_started) << "overlap = false started buckets";
    for (int i = 0; i < 20; ++i) step(x, y);
    const std::int64_t compiled_started = dist::detail::overlapped_buckets() - before - eager_started;
    // Four tensors of 12, 384, 128 and 1024 bytes in buckets of 256 bytes: four buckets a step. The
    // compiled run's first step traces, is undone and replays (its plan fuses the Adam steps;
    // compile.hpp): one step's buckets more.
    EXPECT_EQ(eager_started, 20 * 4) << "the eager steps did not overlap";
    EXPECT_EQ(compiled_started, 21 * 4) << "the compiled replays did not overlap";
    const fx::Tensor p = parameters_flat(plain);
    EXPECT_LT(max_abs_difference(parameters_flat(overlapped), p), 1e-6) << "overlapped averaging left the plain one";
    EXPECT_LT(max_abs_difference(parameters_flat(compiled), p), 1e-6) << "compiled overlapped averaging left it";
}

// A modifier before AverageGradients changes the gradients after the backward pass sent them: the
// step notices and averages what it was given, so the result is that of the chain without overlap.
TEST(Distributed, GradientsChangedBeforeAveragingAreAveragedAsChanged) {
    fx::seed(7);
    const fx::Tensor x = fx::randn({16, 8}), y = fx::randn({16, 3}) * 10.0;
    fx::seed(100 + dist::rank());
    auto lossfn = [](const auto& m, const fx::Tensor& a, const fx::Tensor& b) { return fx::mse(m(a), b); };
    auto a = dist::broadcast(fx::Chain(fx::Dense(8, 32, fx::tanh), fx::Dense(32, 3)));
    auto b = fx::fmap([](const fx::Tensor& t) { return t.clone(); }, a);
    // Each rank clips its own gradient (a global norm far above 0.1), then the clipped ones are averaged.
    auto opt_a = fx::setup(fx::OptimiserChain(fx::ClipNorm{0.1}, dist::AverageGradients{}, fx::Descent{0.5}), a);
    auto opt_b =
        fx::setup(fx::OptimiserChain(fx::ClipNorm{0.1}, dist::AverageGradients{.overlap = false}, fx::Descent{0.5}), b);
    for (int i = 0; i < 5; ++i) {
        auto ga = fx::gradient([&](const auto& m) { return lossfn(m, x, y); }, a);
        fx::update(opt_a, a, std::get<0>(ga));
        auto gb = fx::gradient([&](const auto& m) { return lossfn(m, x, y); }, b);
        fx::update(opt_b, b, std::get<0>(gb));
    }
    EXPECT_EQ(max_abs_difference(parameters_flat(a), parameters_flat(b)), 0.0);
}

int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 1);  // before the first device call
    dist::init();
    if (dist::rank() != 0) GTEST_FLAG_SET(brief, true);  // failures only, from the other ranks
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
