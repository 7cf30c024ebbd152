// test_ops_attention.cpp — fx::scaled_dot_product_attention, the memory-efficient attention op:
// taken in blocks of queries it equals the plain composition softmax(q kᵀ · scale) v (forward and
// every gradient, masks included) in f64, its gradients match finite differences, other backends
// match the CPU, bad arguments are clear errors, and its largest allocation is a block's scores,
// not the whole {..., L, S} matrix. PyTorch's values come through the op table (op_cases.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "allocation_counting.hpp"
#include "fluxion/fluxion.hpp"
#include "gradcheck.hpp"
#include "other_devices.hpp"

namespace fx = fluxion;
using fx::Tensor;

namespace {

// The attention everyone writes: the whole score matrix at once.
Tensor plain(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale) {
    Tensor scores = fx::matmul(q, fx::transpose(k)) * scale;
    if (mask.defined())
        scores = fx::where(mask, fx::full({}, -std::numeric_limits<double>::infinity(), {.dtype = q.dtype()}), scores);
    return fx::matmul(fx::softmax(scores, -1), v);
}

// A weight per output element, so that no gradient cancels by symmetry.
Tensor weights_like(const Tensor& y) {
    Tensor w = fx::sin(fx::arange(0, double(y.numel()), 1, {.dtype = y.dtype(), .device = y.device()}) * 0.7 + 0.2);
    return w.reshape(y.shape());
}

double max_difference(const Tensor& a, const Tensor& b) {
    return fx::max(fx::abs(a.to(fx::Device{}) - b.to(fx::Device{}))).item();
}

// q {2, 3, 7, 4}, k {2, 3, 5, 4}, v {2, 3, 5, 6}; the mask hides, per sample, some keys of some
// queries (broadcast over the heads), never all of a query's.
struct Inputs {
    Tensor q, k, v, mask;
};
Inputs inputs(fx::DType dtype) {
    fx::seed(11);
    Inputs in{fx::randn({2, 3, 7, 4}, {.dtype = dtype}), fx::randn({2, 3, 5, 4}, {.dtype = dtype}),
              fx::randn({2, 3, 5, 6}, {.dtype = dtype}), Tensor()};
    std::vector<double> hidden;  // key s of query l in sample n is hidden when s > (l + n) mod 5
    for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 7; ++l)
            for (int s = 0; s < 5; ++s) hidden.push_back(s > (l + n) % 5 ? 1.0 : 0.0);
    in.mask = fx::gt(fx::tensor(hidden, {2, 1, 7, 5}), fx::scalar(0.5));
    return in;
}

}  // namespace

TEST(Attention, BlocksOfQueriesEqualTheWholeScoreMatrixWithGradients) {
    const Inputs in = inputs(fx::DType::f64);
    const double scale = 0.37;
    for (const bool masked : {false, true})
        for (const std::int64_t block : {1, 2, 3, 7, 100}) {
            SCOPED_TRACE("block " + std::to_string(block) + (masked ? ", masked" : ""));
            const Tensor mask = masked ? in.mask : Tensor();
            auto loss = [&](auto attend) {
                return [&, attend](const Tensor& q, const Tensor& k, const Tensor& v) {
                    const Tensor y = attend(q, k, v);
                    return fx::sum(y * weights_like(y));
                };
            };
            auto blocked = loss([&](const Tensor& q, const Tensor& k, const Tensor& v) {
                return fx::scaled_dot_product_attention(q, k, v, {.mask = mask, .scale = scale, .block = block});
            });
            auto whole =
                loss([&](const Tensor& q, const Tensor& k, const Tensor& v) { return plain(q, k, v, mask, scale); });
            EXPECT_LT(max_difference(blocked(in.q, in.k, in.v), whole(in.q, in.k, in.v)), 1e-12);
            auto [dq, dk, dv] = fx::gradient(blocked, in.q, in.k, in.v);
            auto [pq, pk, pv] = fx::gradient(whole, in.q, in.k, in.v);
            EXPECT_LT(max_difference(dq, pq), 1e-12);
            EXPECT_LT(max_difference(dk, pk), 1e-12);
            EXPECT_LT(max_difference(dv, pv), 1e-12);
            EXPECT_GT(fx::max(fx::abs(dq)).item(), 1e-3);  // the gradients are not trivially zero
        }
}

namespace {

// The threads fluxion's CPU kernels use (FLUXION_NUM_THREADS, else every core): a run of batch
// entries takes 256 KiB of scores per thread.
std::int64_t cpu_threads() {
    const char* set = std::getenv("FLUXION_NUM_THREADS");
    const long n = set && *set ? std::strtol(set, nullptr, 10) : long(std::thread::hardware_concurrency());
    return std::max<std::int64_t>(1, n);
}

}  // namespace

// Samples × 2 heads × 20 queries × 900 keys: 288 KiB of f64 scores per sample, so that a run holds
// fewer samples than there are (one on up to 3 threads) and the samples go through the products and
// the softmax in runs; with the weights kept (one block of queries) and recomputed (blocks of 7).
TEST(Attention, RunsOfSamplesEqualTheWholeScoreMatrixWithGradients) {
    fx::seed(12);
    const std::int64_t per_run = std::max<std::int64_t>(1, cpu_threads() * 256 / 288), samples = per_run + 2;
    const Tensor q = fx::randn({samples, 2, 20, 4}, {.dtype = fx::DType::f64});
    const Tensor k = fx::randn({samples, 2, 900, 4}, {.dtype = fx::DType::f64});
    const Tensor v = fx::randn({samples, 2, 900, 5}, {.dtype = fx::DType::f64});
    std::vector<double> hidden;  // per sample and query, never the first key
    for (std::int64_t n = 0; n < samples; ++n)
        for (int l = 0; l < 20; ++l)
            for (int s = 0; s < 900; ++s) hidden.push_back(s > 0 && (7 * s + 3 * l + n) % 5 == 0 ? 1.0 : 0.0);
    const Tensor mask = fx::gt(fx::tensor(hidden, {samples, 1, 20, 900}), fx::scalar(0.5));
    for (const std::int64_t block : {0, 7}) {
        SCOPED_TRACE("block " + std::to_string(block));
        auto loss = [&](auto attend) {
            return [&, attend](const Tensor& a, const Tensor& b, const Tensor& c) {
                const Tensor y = attend(a, b, c);
                return fx::sum(y * weights_like(y));
            };
        };
        auto runs = loss([&](const Tensor& a, const Tensor& b, const Tensor& c) {
            return fx::scaled_dot_product_attention(a, b, c, {.mask = mask, .scale = 0.4, .block = block});
        });
        auto whole = loss([&](const Tensor& a, const Tensor& b, const Tensor& c) { return plain(a, b, c, mask, 0.4); });
        EXPECT_LT(max_difference(runs(q, k, v), whole(q, k, v)), 1e-12);
        auto [dq, dk, dv] = fx::gradient(runs, q, k, v);
        auto [pq, pk, pv] = fx::gradient(whole, q, k, v);
        EXPECT_LT(max_difference(dq, pq), 1e-12);
        EXPECT_LT(max_difference(dk, pk), 1e-12);
        EXPECT_LT(max_difference(dv, pv), 1e-12);
        EXPECT_GT(fx::max(fx::abs(dk)).item(), 1e-3);  // the gradients are not trivially zero
    }
}

TEST(Attention, GradientsMatchFiniteDifferences) {
    const Inputs in = inputs(fx::DType::f64);
    EXPECT_TRUE(fx::testing::gradcheck(
        [&](const Tensor& q, const Tensor& k, const Tensor& v) {
            const Tensor y = fx::scaled_dot_product_attention(q, k, v, {.mask = in.mask, .block = 3});
            return fx::sum(y * weights_like(y));
        },
        in.q, in.k, in.v));
}

TEST(Attention, DefaultScaleIsOneOverTheSquareRootOfTheKeyWidth) {
    const Inputs in = inputs(fx::DType::f64);
    EXPECT_LT(max_difference(fx::scaled_dot_product_attention(in.q, in.k, in.v), plain(in.q, in.k, in.v, {}, 0.5)),
              1e-12);
}

TEST(Attention, AQueryWithEveryKeyMaskedIsNaNAsInPyTorch) {
    const Inputs in = inputs(fx::DType::f64);
    Tensor mask = fx::zeros({7, 5}, {.dtype = fx::DType::boolean});
    mask.slice(0, 2, 3).fill_(1);
    const Tensor y = fx::scaled_dot_product_attention(in.q, in.k, in.v, {.mask = mask, .block = 2});
    EXPECT_TRUE(std::isnan(fx::sum(y.select(2, 2)).item()));
    EXPECT_FALSE(std::isnan(fx::sum(y.select(2, 3)).item()));
}

TEST(Attention, OtherBackendsMatchTheCpu) {
    const Inputs in = inputs(fx::DType::f32);
    auto run = [&](const fx::Device& d) {
        auto f = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
            const Tensor y = fx::scaled_dot_product_attention(q, k, v, {.mask = in.mask.to(d), .block = 3});
            return fx::sum(y * weights_like(y));
        };
        auto [dq, dk, dv] = fx::gradient(f, in.q.to(d), in.k.to(d), in.v.to(d));
        return std::vector<Tensor>{f(in.q.to(d), in.k.to(d), in.v.to(d)), dq, dk, dv};
    };
    const auto cpu = run(fx::Device{});
    const auto devices = fx::testing::other_devices(fx::DType::f32);
    if (devices.empty()) GTEST_SKIP() << "no backend besides the CPU is functional";
    for (const auto& d : devices) {
        SCOPED_TRACE(d.str());
        const auto there = run(d);
        for (std::size_t i = 0; i < cpu.size(); ++i) EXPECT_LT(max_difference(there[i], cpu[i]), 1e-4) << i;
    }
}

TEST(Attention, BadArgumentsAreClearErrors) {
    const Inputs in = inputs(fx::DType::f32);
    auto message = [](auto&& f) {
        try {
            f();
        } catch (const fx::Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message([&] { fx::scaled_dot_product_attention(in.q, in.k.slice(3, 0, 3), in.v); }).find("do not fit"),
              std::string::npos);
    EXPECT_NE(message([&] { fx::scaled_dot_product_attention(in.q, in.k, in.v.slice(2, 0, 4)); }).find("do not fit"),
              std::string::npos);
    EXPECT_NE(message([&] { fx::scaled_dot_product_attention(in.q, in.k, in.v.to(fx::DType::f64)); }).find("one dtype"),
              std::string::npos);
    EXPECT_NE(message([&] {
                  fx::scaled_dot_product_attention(in.q, in.k, in.v, {.mask = fx::zeros({7, 5})});
              }).find("bool"),
              std::string::npos);
    EXPECT_NE(message([&] {
                  fx::scaled_dot_product_attention(in.q, in.k, in.v,
                                                   {.mask = fx::zeros({5, 7}, {.dtype = fx::DType::boolean})});
              }).find("does not broadcast"),
              std::string::npos);
    EXPECT_NE(message([&] { fx::scaled_dot_product_attention(in.q, in.k, in.v, {.block = -1}); }).find("block"),
              std::string::npos);
}

#if !defined(__SANITIZE_ADDRESS__)
// 2 samples × 2 heads × 512 queries × 512 keys: the whole score matrix is 4 MiB in f32. In blocks
// of 32 queries, forward and backward allocate nothing larger than a block's 256 KiB of scores
// (and q, k, v's 128 KiB); the plain composition, measured the same way, allocates the 4 MiB.
TEST(Attention, TheLargestAllocationIsABlocksScoresNotTheWholeMatrix) {
    fx::seed(5);
    const Tensor q = fx::randn({2, 2, 512, 16}), k = fx::randn({2, 2, 512, 16}), v = fx::randn({2, 2, 512, 16});
    auto step = [&](auto attend) {
        allocation_counting::start();
        auto [dq, dk, dv] = fx::gradient(
            [&](const Tensor& a, const Tensor& b, const Tensor& c) { return fx::sum(fx::square(attend(a, b, c))); }, q,
            k, v);
        return allocation_counting::stop().largest;
    };
    const std::size_t blocked = step([](const Tensor& a, const Tensor& b, const Tensor& c) {
        return fx::scaled_dot_product_attention(a, b, c, {.block = 32});
    });
    const std::size_t whole =
        step([](const Tensor& a, const Tensor& b, const Tensor& c) { return plain(a, b, c, Tensor(), 0.25); });
    const std::size_t matrix = 2 * 2 * 512 * 512 * sizeof(float);
    EXPECT_LT(blocked, matrix / 8) << "blocked attention allocated " << blocked << " bytes at once";
    EXPECT_GE(whole, matrix) << "the measurement missed the plain attention's score matrix";
}
#endif
