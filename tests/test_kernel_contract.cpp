// test_kernel_contract.cpp — the contract every backend's kernels keep, at the sizes where GPU
// kernels split work across many blocks and workgroups (ggml's test-backend-ops idea): reductions
// over 2^20 + 1 elements and along a non-last axis, softmax over rows of 4,097, BatchNorm over
// channels of more than 2^20 values, GEMMs of 513×1,025×257 in every transpose combination, 65
// batched products, a 64-channel convolution at 56×56 with its gradients, and the edges — NaN and
// ±inf, integer wraparound, out-of-range indices, ties, strided views at odd offsets, zero-size
// tensors.
//
// Each case runs on the CPU and on every other functional device from the same inputs. Results
// compare bit for bit where the op is exact: integers, copies, max/min and the arg reductions,
// indexing, IEEE addition and multiplication, and sums or products of small integers stored as
// floats (every partial sum stays below 2^24, so any order of summation is exact). Other float
// results must agree within a bound derived from the problem: 2u·√n·Σ|terms| for n terms with unit
// roundoff u (2^-24 for f32, 2^-53 for f64), the spread of summing in another order. Where an answer
// is known (Σ of arange, a matmul by a double loop, softmax rows summing to 1, a planted argmax), the
// CPU is checked against it too, so the program is useful with the CPU alone.
//
// Here the other device is Vulkan on Mesa's lavapipe under the validation layer
// (tests/vulkan_environment.cpp; the TestHost plugin runs the CPU's own kernels and is no other
// backend); a GPU machine runs it against CUDA and NVIDIA's Vulkan through scripts/gpu-check.sh,
// where the splits are real. A device without a kernel for a case's element type (fx::supports) is
// left out of that case with its reason on stdout.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "other_devices.hpp"

namespace fx = fluxion;
using fx::DType;
using fx::Tensor;

namespace {

constexpr std::int64_t kLong = (std::int64_t{1} << 20) + 1;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double unit_roundoff(DType t) { return t == DType::f64 ? 0x1p-53 : 0x1p-24; }

// The devices besides the CPU that run every kernel in `ops` on `t`. As other_devices(DType): one
// that takes `t` for no kernel at all is left out, named on stdout with its reason; one that lacks
// some of `ops` but runs other kernels on `t` fails the test.
std::vector<fx::Device> devices_for(DType t, std::initializer_list<fx::Op> ops) {
    std::vector<fx::Device> out;
    for (const auto& d : fx::testing::other_devices()) {
        std::string why;
        bool runs = true;
        for (auto op : ops) runs = runs && fx::supports(d, op, t, &why);
        bool takes_t = runs;
        for (int op = 0; !takes_t && op <= static_cast<int>(fx::Op::optimiser_step); ++op)
            takes_t = fx::supports(d, static_cast<fx::Op>(op), t);
        if (runs) out.push_back(d);
        else if (takes_t)
            ADD_FAILURE() << d.str() << " runs kernels on " << fx::name(t) << " but not this one: " << why;
        else std::cout << "[ LEFT OUT ] " << d.str() << " takes no " << fx::name(t) << ": " << why << "\n";
    }
    return out;
}

std::vector<double> host(const Tensor& t) { return (t | fx::cpu).to_vector<double>(); }

// Small integers in [-m, m] from a fixed seed, in any element type.
Tensor small_integers(const fx::Shape& shape, int m, DType t, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> pick(-m, m);
    std::vector<double> v(static_cast<std::size_t>(fx::numel(shape)));
    for (auto& x : v) x = pick(gen);
    return fx::tensor(v, shape).to(t);
}

Tensor normal(const fx::Shape& shape, DType t, std::uint64_t seed) {
    fx::seed(seed);
    return fx::randn(shape, {.dtype = t});
}

// `got` equals `want` element for element: the same integers, the same float bits (any NaN matches
// any NaN). The first mismatch is reported with the number of them.
void expect_identical(const Tensor& want, const Tensor& got, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    ASSERT_EQ(got.dtype(), want.dtype()) << what;
    const bool integral = fx::is_integral(want.dtype());
    const auto wi = integral ? want.to_vector<std::int64_t>() : std::vector<std::int64_t>();
    const auto gi = integral ? (got | fx::cpu).to_vector<std::int64_t>() : std::vector<std::int64_t>();
    const auto wf = integral ? std::vector<double>() : host(want), gf = integral ? std::vector<double>() : host(got);
    std::int64_t bad = 0, first = -1;
    for (std::int64_t i = 0; i < want.numel(); ++i) {
        const bool same = integral ? wi[i] == gi[i]
                                   : std::bit_cast<std::uint64_t>(wf[i]) == std::bit_cast<std::uint64_t>(gf[i]) ||
                                         (std::isnan(wf[i]) && std::isnan(gf[i]));
        if (!same && bad++ == 0) first = i;
    }
    if (bad > 0 && integral)
        ADD_FAILURE() << what << ": " << bad << " of " << want.numel() << " elements differ; the first, element "
                      << first << ", is " << gi[first] << " where the CPU has " << wi[first];
    if (bad > 0 && !integral)
        ADD_FAILURE() << what << ": " << bad << " of " << want.numel() << " elements differ; the first, element "
                      << first << ", is " << gf[first] << " where the CPU has " << wf[first];
}

// |got - want| <= bound[i] for every element; NaN and infinities only where `want` has the same.
void expect_within(const Tensor& want, const Tensor& got, const std::vector<double>& bound, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    ASSERT_EQ(got.dtype(), want.dtype()) << what;
    const auto w = host(want), g = host(got);
    ASSERT_EQ(bound.size(), w.size()) << what;
    std::int64_t bad = 0, first = -1;
    for (std::size_t i = 0; i < w.size(); ++i) {
        const bool ok = std::isfinite(w[i]) ? std::abs(g[i] - w[i]) <= bound[i]
                                            : (std::isnan(w[i]) ? std::isnan(g[i]) : g[i] == w[i]);
        if (!ok && bad++ == 0) first = static_cast<std::int64_t>(i);
    }
    if (bad > 0)
        ADD_FAILURE() << what << ": " << bad << " of " << w.size() << " elements are out of bounds; the first, element "
                      << first << ", is " << g[first] << " where the CPU has " << w[first] << " (bound " << bound[first]
                      << ")";
}

// The bound for sums of `terms` terms whose absolute values add up to `abs_sums` (one per output),
// in element type t: 2u·√n·Σ|x| for the order of summation, and u·|result| for the final rounding.
std::vector<double> sum_bound(const Tensor& abs_sums, std::int64_t terms, const Tensor& result, DType t) {
    const auto a = host(abs_sums), r = host(result);
    const double u = unit_roundoff(t), order = 2 * u * std::sqrt(double(std::max<std::int64_t>(terms, 1)));
    std::vector<double> b(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) b[i] = order * a[i] + u * std::abs(r[i]);
    return b;
}

// The CPU first, then `others`: the cases whose known answer every device is checked against.
std::vector<fx::Device> with_cpu(std::vector<fx::Device> others) {
    others.insert(others.begin(), fx::Device{});
    return others;
}

std::string on(const fx::Device& d, DType t, const std::string& what) {
    return what + " on " + d.str() + " (" + fx::name(t) + ")";
}

}  // namespace

// Small integers (|x| <= 3, the last element 1000) sum exactly in any order: the same bits on
// every device, and the known total.
TEST(KernelContract, SumOfTwoToTheTwentyPlusOneSmallIntegersIsExactOnEveryDevice) {
    for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64}) {
        Tensor x = small_integers({kLong}, 3, DType::f64, 1);
        x = fx::concat({x.slice(0, 0, kLong - 1), fx::full({1}, 1000.0, {.dtype = DType::f64})}).to(t);
        double total = 0;
        for (double v : x.to_vector<double>()) total += v;
        Tensor cpu = fx::sum(x);
        EXPECT_EQ(cpu.item(), total) << fx::name(t);
        for (const auto& d : devices_for(t, {fx::Op::reduce})) {
            Tensor got = fx::sum(x | d);
            EXPECT_EQ(got.device(), d);
            expect_identical(cpu, got, on(d, t, "sum"));
        }
    }
}

// Σ arange(0, 2^20 + 1) = 2^19·(2^20 + 1): exact in f64 in any order (every partial sum is an
// integer below 2^53); in f32 within the summation bound.
TEST(KernelContract, SumOfArangeOverTwoToTheTwentyPlusOneElementsMatchesTheFormula) {
    const double want = 0x1p19 * double(kLong);
    for (DType t : {DType::f64, DType::f32}) {
        Tensor x = fx::arange(0, double(kLong), 1, {.dtype = t});
        ASSERT_EQ(x.numel(), kLong);
        Tensor known = fx::full({}, want, {.dtype = t});
        const auto bound = sum_bound(known, kLong, known, t);
        for (const auto& d : with_cpu(devices_for(t, {fx::Op::reduce}))) {
            Tensor got = fx::sum(x | d);
            if (t == DType::f64) EXPECT_EQ(host(got)[0], want) << on(d, t, "sum");
            else expect_within(known, got, bound, on(d, t, "sum"));
            expect_within(fx::full({}, want / double(kLong), {.dtype = t}), fx::mean(x | d), {bound[0] / double(kLong)},
                          on(d, t, "mean"));
        }
    }
}

// Normal values with the largest planted at the last element and the smallest just past the middle,
// where a kernel that drops its tail or one block's partial result would miss them.
TEST(KernelContract, ReductionsOfTwoToTheTwentyPlusOneNormalValuesMatchTheCpu) {
    for (DType t : {DType::f32, DType::f64}) {
        std::vector<double> v = host(normal({kLong}, DType::f64, 3));
        v[kLong - 1] = 10, v[kLong / 2 + 1] = -10;
        Tensor x = fx::tensor(v, {kLong}).to(t);
        EXPECT_EQ(fx::argmax(x).item(), double(kLong - 1));
        EXPECT_EQ(fx::argmin(x, 0).item(), double(kLong / 2 + 1));
        EXPECT_EQ(fx::max(x).item(), 10.0);
        EXPECT_EQ(fx::min(x).item(), -10.0);
        Tensor abs_sum = fx::sum(fx::abs(x.to(DType::f64))), s = fx::sum(x), m = fx::mean(x);
        const auto s_bound = sum_bound(abs_sum, kLong, s, t), m_bound = sum_bound(abs_sum / double(kLong), kLong, m, t);
        for (const auto& d : devices_for(t, {fx::Op::reduce})) {
            Tensor xd = x | d;
            expect_within(s, fx::sum(xd), s_bound, on(d, t, "sum"));
            expect_within(m, fx::mean(xd), m_bound, on(d, t, "mean"));
            expect_identical(fx::max(x), fx::max(xd), on(d, t, "max"));
            expect_identical(fx::min(x), fx::min(xd), on(d, t, "min"));
            expect_identical(fx::argmax(x), fx::argmax(xd), on(d, t, "argmax"));
            expect_identical(fx::argmin(x, 0), fx::argmin(xd, 0), on(d, t, "argmin"));
        }
    }
}

TEST(KernelContract, ANaNAtTheLastOfTwoToTheTwentyPlusOneElementsWinsMaxMinAndTheArgReductions) {
    for (DType t : {DType::f32, DType::f64}) {
        std::vector<double> v = host(normal({kLong}, DType::f64, 4));
        v[kLong - 1] = kNaN;
        Tensor x = fx::tensor(v, {kLong}).to(t);
        for (const auto& d : with_cpu(devices_for(t, {fx::Op::reduce}))) {
            Tensor xd = x | d;
            EXPECT_TRUE(std::isnan(host(fx::max(xd))[0])) << on(d, t, "max");
            EXPECT_TRUE(std::isnan(host(fx::min(xd))[0])) << on(d, t, "min");
            EXPECT_TRUE(std::isnan(host(fx::sum(xd))[0])) << on(d, t, "sum");
            EXPECT_EQ(host(fx::argmax(xd))[0], double(kLong - 1)) << on(d, t, "argmax");
            EXPECT_EQ(host(fx::argmin(xd, 0))[0], double(kLong - 1)) << on(d, t, "argmin");
        }
    }
}

// Along axis 0 of {1025, 1027} a kernel reads with stride 1,027 (the {outer, n, inner} view's
// inner axis); along axis 1, rows of an odd length.
TEST(KernelContract, ReductionsAlongEachAxisOfA1025By1027TensorMatchTheCpu) {
    const std::int64_t R = 1025, C = 1027;
    for (DType t : {DType::f32, DType::f64}) {
        Tensor ints = small_integers({R, C}, 3, t, 5);
        std::vector<double> v = host(normal({R, C}, DType::f64, 6));
        for (std::int64_t j = 0; j < C; ++j) v[(j * 37 % R) * C + j] = 10;  // column j's maximum at row 37j mod R
        Tensor x = fx::tensor(v, {R, C}).to(t);
        const auto argmax0 = fx::argmax(x, 0).to_vector<std::int64_t>();
        for (std::int64_t j = 0; j < C; ++j) ASSERT_EQ(argmax0[j], j * 37 % R) << "column " << j;
        const auto iv = ints.to_vector<double>();
        std::vector<double> column_sums(C, 0.0), row_sums(R, 0.0);
        for (std::int64_t i = 0; i < R; ++i)
            for (std::int64_t j = 0; j < C; ++j) column_sums[j] += iv[i * C + j], row_sums[i] += iv[i * C + j];
        expect_identical(fx::tensor(column_sums, {C}).to(t), fx::sum(ints, 0), "sum of integers along axis 0 (CPU)");
        expect_identical(fx::tensor(row_sums, {R}).to(t), fx::sum(ints, 1), "sum of integers along axis 1 (CPU)");
        for (int axis : {0, 1}) {
            const std::int64_t n = x.shape(axis);
            Tensor s = fx::sum(x, axis), m = fx::mean(x, axis), abs_sum = fx::sum(fx::abs(x.to(DType::f64)), axis);
            const auto s_bound = sum_bound(abs_sum, n, s, t), m_bound = sum_bound(abs_sum / double(n), n, m, t);
            for (const auto& d : devices_for(t, {fx::Op::reduce})) {
                const std::string along = " along axis " + std::to_string(axis);
                Tensor xd = x | d;
                expect_identical(fx::sum(ints, axis), fx::sum(ints | d, axis), on(d, t, "sum of integers" + along));
                expect_within(s, fx::sum(xd, axis), s_bound, on(d, t, "sum" + along));
                expect_within(m, fx::mean(xd, axis), m_bound, on(d, t, "mean" + along));
                expect_identical(fx::max(x, axis), fx::max(xd, axis), on(d, t, "max" + along));
                expect_identical(fx::min(x, axis), fx::min(xd, axis), on(d, t, "min" + along));
                expect_identical(fx::argmax(x, axis), fx::argmax(xd, axis), on(d, t, "argmax" + along));
                expect_identical(fx::argmin(x, axis), fx::argmin(xd, axis), on(d, t, "argmin" + along));
            }
        }
    }
}

TEST(KernelContract, ArgmaxAndArgminOfTiedValuesGiveTheFirstIndexOnEveryDevice) {
    for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64}) {
        std::vector<double> v = small_integers({kLong}, 3, DType::f64, 7).to_vector<double>();
        for (auto i : {std::int64_t{3}, kLong / 2, kLong - 1}) v[i] = 5;
        for (auto i : {std::int64_t{7}, kLong - 2}) v[i] = -5;
        Tensor tied = fx::tensor(v, {kLong}).to(t), flat = fx::zeros({kLong}, {.dtype = t});
        std::vector<double> g = small_integers({1025, 1027}, 3, DType::f64, 8).to_vector<double>();
        for (std::int64_t j = 0; j < 1027; ++j) g[(j % 7 + 1) * 1027 + j] = g[1024 * 1027 + j] = 5;
        Tensor grid = fx::tensor(g, {1025, 1027}).to(t);
        std::vector<double> first_rows(1027);
        for (std::int64_t j = 0; j < 1027; ++j) first_rows[j] = double(j % 7 + 1);
        for (const auto& d : with_cpu(devices_for(t, {fx::Op::reduce}))) {
            EXPECT_EQ(host(fx::argmax(flat | d))[0], 0.0) << on(d, t, "argmax of zeros");
            EXPECT_EQ(host(fx::argmin(flat | d, 0))[0], 0.0) << on(d, t, "argmin of zeros");
            EXPECT_EQ(host(fx::argmax(tied | d))[0], 3.0) << on(d, t, "argmax of ties");
            EXPECT_EQ(host(fx::argmin(tied | d, 0))[0], 7.0) << on(d, t, "argmin of ties");
            EXPECT_EQ(host(fx::argmax(grid | d, 0)), first_rows) << on(d, t, "argmax of ties along axis 0");
            EXPECT_EQ(host(fx::argmax(fx::zeros({1025, 1027}, {.dtype = t}) | d, 0)), std::vector<double>(1027, 0.0))
                << on(d, t, "argmax of zeros along axis 0");
        }
    }
}

// Rows of 4,097: normal logits; some -inf entries (at both ends and the middle); a NaN (the whole
// row NaN, as on the CPU and in PyTorch); -inf but for one 0 (one-hot); logits near ±1e4; all -inf.
// The bound per element allows the row's sum, 2u·√n relative, and exp's argument, u·|x - max|.
TEST(KernelContract, SoftmaxAndLogSoftmaxOverRowsOf4097MatchTheCpuWithInfinitiesAndNaN) {
    const std::int64_t n = 4097, rows = 6;
    std::vector<double> v = host(normal({rows, n}, DType::f64, 9) * 3.0);
    auto at = [&](std::int64_t r, std::int64_t c) -> double& { return v[r * n + c]; };
    for (std::int64_t c : {0, 1, 2048, 4096}) at(1, c) = -kInf;
    at(2, 4095) = kNaN;
    for (std::int64_t c = 0; c < n; ++c) at(3, c) = c == n - 1 ? 0 : -kInf, at(5, c) = -kInf;
    for (std::int64_t c = 0; c < n; ++c) at(4, c) += (c % 3 == 0 ? -1e4 : 1e4);
    for (DType t : {DType::f32, DType::f64}) {
        Tensor x = fx::tensor(v, {rows, n}).to(t);
        Tensor y = fx::softmax(x), z = fx::logsoftmax(x);
        const auto xs = x.to_vector<double>(), ys = y.to_vector<double>(), zs = z.to_vector<double>();
        const double u = unit_roundoff(t);
        std::vector<double> y_bound(xs.size()), z_bound(xs.size());
        for (std::int64_t r = 0; r < rows; ++r) {
            double top = -kInf, total = 0;
            for (std::int64_t c = 0; c < n; ++c) top = std::max(top, xs[r * n + c]);
            for (std::int64_t c = 0; c < n; ++c) {
                const std::size_t i = r * n + c;
                total += ys[i];
                const double spread = 4 * u * (std::sqrt(double(n)) + std::abs(xs[i] - top) + 4);
                if (std::isfinite(xs[i])) y_bound[i] = spread * ys[i], z_bound[i] = spread + 4 * u * std::abs(zs[i]);
                EXPECT_TRUE(r != 2 || (std::isnan(ys[i]) && std::isnan(zs[i]))) << "NaN row, column " << c;
                EXPECT_TRUE(xs[i] != -kInf || r == 5 || (ys[i] == 0 && zs[i] == -kInf))
                    << "row " << r << ", column " << c;
            }
            EXPECT_TRUE(r == 2 || r == 5 || std::abs(total - 1) <= 4 * u * std::sqrt(double(n)))
                << fx::name(t) << " row " << r << " sums to " << total;
        }
        EXPECT_EQ(ys[3 * n + n - 1], 1.0);
        EXPECT_EQ(zs[3 * n + n - 1], 0.0);
        // The same rows as columns: softmax along axis 0 of the transposed copy.
        Tensor xt = x.transpose().contiguous();
        auto transposed = [&](const std::vector<double>& b) {
            return host(fx::tensor(b, {rows, n}).transpose().contiguous());
        };
        expect_within(y.transpose().contiguous(), fx::softmax(xt, 0), transposed(y_bound),
                      "softmax along axis 0 (CPU)");
        for (const auto& d : devices_for(t, {fx::Op::softmax})) {
            expect_within(y, fx::softmax(x | d), y_bound, on(d, t, "softmax"));
            expect_within(z, fx::logsoftmax(x | d), z_bound, on(d, t, "logsoftmax"));
            expect_within(fx::softmax(xt, 0), fx::softmax(xt | d, 0), transposed(y_bound),
                          on(d, t, "softmax along axis 0"));
            expect_within(fx::logsoftmax(xt, 0), fx::logsoftmax(xt | d, 0), transposed(z_bound),
                          on(d, t, "logsoftmax along axis 0"));
        }
    }
}

// One row of 2^20 + 1 normal logits: a kernel that gives each row one invocation must still finish
// it. On the CPU the row sums to 1.
TEST(KernelContract, SoftmaxOverOneRowOfTwoToTheTwentyPlusOneMatchesTheCpu) {
    for (DType t : {DType::f32, DType::f64}) {
        Tensor x = normal({kLong}, t, 10), y = fx::softmax(x);
        const double u = unit_roundoff(t), spread = 4 * u * (std::sqrt(double(kLong)) + 10);
        EXPECT_NEAR(fx::sum(y.to(DType::f64)).item(), 1.0, spread) << fx::name(t);
        const std::vector<double> bound = host(y * spread);
        for (const auto& d : devices_for(t, {fx::Op::softmax}))
            expect_within(y, fx::softmax(x | d), bound, on(d, t, "softmax"));
    }
}

// BatchNorm's training pass (one kernel each way where a device has BatchNorm's kernels) over 3
// channels of 1025 images of 25 × 41 (more than 2^20 values each) at mean 50, with relu: the
// output, the running mean and the three gradients. The statistics are sums over m values, so each
// bound is the order-of-summation spread 2u·√m of the sums it reads (the mean |x|, the mean |g|
// and |g x̂|), carried through the formula, plus a few roundings of the result.
TEST(KernelContract, BatchNormOverChannelsOfMoreThanTwoToTheTwentyMatchesTheCpu) {
    const std::int64_t n = 1025, c = 3, side = 1025, m = n * side;
    for (DType t : {DType::f32, DType::f64}) {
        const Tensor x = normal({n, c, 25, 41}, t, 11) * 2.0 + 50.0;  // images of 25 × 41 = side
        const Tensor weights = normal({n, c, 25, 41}, t, 12);  // the loss Σ y·weights, the same on every device
        fx::BatchNorm bn(c, fx::relu);
        bn.weight = normal({c}, t, 13), bn.bias = normal({c}, t, 14);
        fx::trainmode(bn);
        const auto f = [](const fx::BatchNorm& l, const Tensor& v, const Tensor& w) { return fx::sum(l(v) * w); };
        const auto copy = [](const fx::BatchNorm& l) { return fx::fmap([](const Tensor& p) { return p.clone(); }, l); };
        fx::BatchNorm on_cpu = copy(bn);
        const auto want = fx::withgradient(f, on_cpu, x, weights);
        const Tensor y = copy(bn)(x);  // a copy: each call in training mode updates the running statistics
        const auto& [gl, gx, unused] = want.grad;
        const double u = unit_roundoff(t), spread = 2 * u * std::sqrt(double(m));
        // Per channel: the statistics and the means of |x|, |g| and |g x̂| the bounds scale.
        const auto xs = host(x), ys = host(y), gxs = host(gx), ws = host(weights);
        const auto gamma = host(bn.weight), beta = host(bn.bias);
        std::vector<double> mu(c, 0), var(c, 0), abs_x(c, 0), abs_g(c, 0), abs_gxhat(c, 0);
        auto channel = [&](std::size_t i) { return std::int64_t(i) / side % c; };
        for (std::size_t i = 0; i < xs.size(); ++i) mu[channel(i)] += xs[i] / double(m);
        for (std::size_t i = 0; i < xs.size(); ++i) {
            const auto j = channel(i);
            var[j] += (xs[i] - mu[j]) * (xs[i] - mu[j]) / double(m);
            abs_x[j] += std::abs(xs[i]) / double(m);
        }
        std::vector<double> y_bound(xs.size()), gx_bound(xs.size());
        for (std::size_t i = 0; i < xs.size(); ++i) {
            const auto j = channel(i);
            const double rstd = 1 / std::sqrt(var[j] + bn.epsilon), xhat = (xs[i] - mu[j]) * rstd;
            const double g = ys[i] > 0 ? ws[i] : 0;
            abs_g[j] += std::abs(g) / double(m), abs_gxhat[j] += std::abs(g * xhat) / double(m);
            // δμ = spread·mean|x|, δrstd/rstd = spread (from the variance's own sum and the mean's)
            y_bound[i] = 4 * (spread * (abs_x[j] * rstd + std::abs(xhat)) * std::abs(gamma[j]) +
                              u * (std::abs(ys[i]) + std::abs(beta[j])));
        }
        for (std::size_t i = 0; i < xs.size(); ++i) {
            const auto j = channel(i);
            const double rstd = 1 / std::sqrt(var[j] + bn.epsilon), xhat = (xs[i] - mu[j]) * rstd;
            const double k = rstd * std::abs(gamma[j]);
            // the two means Σ g / m and Σ g x̂ / m, x̂ itself (as y's), and k = rstd·γ
            gx_bound[i] = 4 * (spread * k *
                                   (abs_g[j] + (1 + std::abs(xhat)) * (abs_gxhat[j] + abs_x[j] * rstd * abs_g[j]) +
                                    abs_x[j] * rstd * abs_gxhat[j]) +
                               (spread + u) * std::abs(gxs[i]));
        }
        std::vector<double> gw_bound(c), gb_bound(c);
        for (std::int64_t j = 0; j < c; ++j) {
            gb_bound[j] = 4 * spread * abs_g[j] * double(m);
            gw_bound[j] =
                4 * spread * (abs_gxhat[j] + abs_x[j] * (1 / std::sqrt(var[j] + bn.epsilon)) * abs_g[j]) * double(m);
        }
        std::vector<double> mean_bound(c);  // momentum 0.1 times the batch mean's δμ
        for (std::int64_t j = 0; j < c; ++j) mean_bound[j] = 4 * (0.1 * spread * abs_x[j] + u * std::abs(mu[j]));
        for (const auto& d : devices_for(t, {fx::Op::reduce, fx::Op::binary})) {
            fx::BatchNorm on_dev = fx::fmap([](const Tensor& p) { return p.clone(); }, bn) | d;
            const auto got = fx::withgradient(f, on_dev, x | d, weights | d);
            const auto& [dgl, dgx, dunused] = got.grad;
            expect_within(y, copy(bn | d)(x | d), y_bound, on(d, t, "BatchNorm's output"));
            expect_within(gx, dgx, gx_bound, on(d, t, "BatchNorm's ∂x"));
            expect_within(gl.weight, dgl.weight, gw_bound, on(d, t, "BatchNorm's ∂weight"));
            expect_within(gl.bias, dgl.bias, gb_bound, on(d, t, "BatchNorm's ∂bias"));
            expect_within(on_cpu.running_mean, on_dev.running_mean, mean_bound, on(d, t, "BatchNorm's running mean"));
        }
    }
}

namespace {

// a {..., m, k} times b {..., k, n} (b's batch broadcast when it has none) by a double loop.
Tensor matmul_by_loops(const Tensor& a, const Tensor& b) {
    const std::int64_t batch = a.ndim() == 3 ? a.shape(0) : 1, m = a.shape(-2), k = a.shape(-1), n = b.shape(-1);
    const bool b_batched = b.ndim() == 3;
    const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
    std::vector<double> c(static_cast<std::size_t>(batch * m * n), 0.0);
    for (std::int64_t p = 0; p < batch; ++p)
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t l = 0; l < k; ++l) {
                const double x = av[(p * m + i) * k + l];
                const double* row = &bv[((b_batched ? p : 0) * k + l) * n];
                for (std::int64_t j = 0; j < n; ++j) c[(p * m + i) * n + j] += x * row[j];
            }
    fx::Shape shape = a.shape();
    shape.back() = n;
    return fx::tensor(c, shape).to(a.dtype());
}

// `x` on `d`, as itself or as the transpose view of its transposed copy (the layout a GEMM reads
// with its transpose flag, or with a leading dimension).
Tensor laid_out(const Tensor& x, const fx::Device& d, bool transposed) {
    return transposed ? (x.transpose().contiguous() | d).transpose() : x | d;
}

}  // namespace

TEST(KernelContract, MatmulOf513By1025By257MatchesTheCpuForEveryTransposeCombination) {
    const std::int64_t M = 513, K = 1025, N = 257;
    // Small integers: every dot product is exact, so every layout on every device gives the loop's bits.
    for (DType t : {DType::f32, DType::f64}) {
        Tensor a = small_integers({M, K}, 2, t, 11), b = small_integers({K, N}, 2, t, 12), want = matmul_by_loops(a, b);
        for (const auto& d : with_cpu(devices_for(t, {fx::Op::gemm, fx::Op::copy_strided})))
            for (bool ta : {false, true})
                for (bool tb : {false, true}) {
                    const std::string layout = std::string(ta ? "aᵀ" : "a") + (tb ? " bᵀ" : " b");
                    Tensor got = fx::matmul(laid_out(a, d, ta), laid_out(b, d, tb));
                    EXPECT_EQ(got.device(), d);
                    expect_identical(want, got, on(d, t, "matmul of integers, " + layout));
                }
    }
    // Normal values: within 2u·√k·(|a||b|) of the CPU.
    Tensor a = normal({M, K}, DType::f32, 13), b = normal({K, N}, DType::f32, 14), want = fx::matmul(a, b);
    const auto bound = sum_bound(fx::matmul(fx::abs(a.to(DType::f64)), fx::abs(b.to(DType::f64))), K, want, DType::f32);
    for (const auto& d : with_cpu(devices_for(DType::f32, {fx::Op::gemm, fx::Op::copy_strided})))
        for (bool ta : {false, true})
            for (bool tb : {false, true})
                expect_within(want, fx::matmul(laid_out(a, d, ta), laid_out(b, d, tb)), bound,
                              on(d, DType::f32, std::string("matmul, ") + (ta ? "aᵀ" : "a") + (tb ? " bᵀ" : " b")));
}

// fx::allow_tf32: off, every device computes f32 products in f32 — 1025 terms of 1 + 2^-12 sum
// exactly to 1025 + 1025·2^-12. On, CUDA may round the inputs to TF32's 10 mantissa bits (1 + 2^-12
// becomes 1, the sum 1025) where the GPU has TF32 (compute capability 8.0 and newer); every other
// device ignores the switch. Off again, the exact sum is back.
TEST(KernelContract, Tf32OnlyWhenAskedAndOnlyOnCuda) {
    const std::int64_t M = 65, K = 1025, N = 33;
    const Tensor a = fx::full({M, K}, 1.0 + 0x1p-12), b = fx::ones({K, N});
    const double exact = 1025.0 + 1025.0 * 0x1p-12, rounded = 1025.0;
    const auto all_exact = host(fx::full({M, N}, exact));
    const auto devices = with_cpu(devices_for(DType::f32, {fx::Op::gemm}));
    ASSERT_FALSE(fx::tf32_allowed()) << "TF32 is off by default";
    for (const auto& d : devices) EXPECT_EQ(host(fx::matmul(a | d, b | d)), all_exact) << d.str();
    fx::allow_tf32(true);
    struct Tf32OffAtTheEnd { ~Tf32OffAtTheEnd() { fx::allow_tf32(false); } } off_even_after_a_failure;
    EXPECT_TRUE(fx::tf32_allowed());
    for (const auto& d : devices) {
        const auto v = host(fx::matmul(a | d, b | d));
        const auto in_tf32 = std::count(v.begin(), v.end(), rounded);
        EXPECT_EQ(in_tf32 + std::count(v.begin(), v.end(), exact), std::ssize(v))
            << d.str() << ": a sum that is neither the f32 nor the TF32 one";
        if (d.type == "CUDA") {
            std::cout << d.str() << " with TF32 allowed: " << in_tf32 << " of " << v.size() << " sums in TF32\n";
            EXPECT_TRUE(in_tf32 == 0 || in_tf32 == std::ssize(v)) << d.str() << ": one product, one precision";
        } else {
            EXPECT_EQ(in_tf32, 0) << d.str() << " ignores TF32";
        }
    }
    fx::allow_tf32(false);
    EXPECT_FALSE(fx::tf32_allowed());
    for (const auto& d : devices) EXPECT_EQ(host(fx::matmul(a | d, b | d)), all_exact) << d.str();
}

// 65 products {33, 17} × {17, 29}: batched, with transposed batches, with b broadcast over the batch,
// and with a's batch starting at an odd element offset.
TEST(KernelContract, BatchedMatmulOf65MatricesMatchesTheLoopsOnEveryDevice) {
    for (DType t : {DType::f32, DType::f64}) {
        Tensor a = small_integers({65, 33, 17}, 3, t, 15), b = small_integers({65, 17, 29}, 3, t, 16);
        Tensor b2 = small_integers({17, 29}, 3, t, 17);
        Tensor want = matmul_by_loops(a, b), want2 = matmul_by_loops(a, b2);
        Tensor padded = fx::concat({fx::zeros({1, 33, 17}, {.dtype = t}), a});
        for (const auto& d : with_cpu(devices_for(t, {fx::Op::gemm, fx::Op::copy_strided}))) {
            expect_identical(want, fx::matmul(a | d, b | d), on(d, t, "batched matmul"));
            expect_identical(want, fx::matmul(laid_out(a, d, true), laid_out(b, d, true)),
                             on(d, t, "batched matmul of transposed batches"));
            expect_identical(want2, fx::matmul(a | d, b2 | d), on(d, t, "batched matmul, b broadcast"));
            Tensor shifted = (padded | d).slice(0, 1, 66);
            ASSERT_EQ(shifted.offset() % 2, 1);
            expect_identical(want, fx::matmul(shifted, b | d), on(d, t, "batched matmul at an odd offset"));
        }
    }
}

// A 3×3 convolution, 64 channels in and out at 56×56, padding 1, batch 2, and the gradients of
// Σ conv2d(x, w)·r: the CPU against a double loop at a few places (corners and the interior), every
// other device against the CPU within 2u·√n·Σ|terms| (n: 576 terms forward and for ∂x, N·56·56
// for ∂w; Σ|terms| is the same convolution of the absolute values).
TEST(KernelContract, Conv2dWith64ChannelsAt56By56AndItsGradientsMatchTheCpu) {
    const std::int64_t N = 2, C = 64, H = 56, W = 56;
    const DType t = DType::f32;
    const fx::Conv2dOptions pad1{.padding = {1, 1}};
    Tensor x = normal({N, C, H, W}, t, 18), w = normal({C, C, 3, 3}, t, 19) / 24.0, r = normal({N, C, H, W}, t, 20);
    auto loss = [&](const Tensor& r_) {
        return [&, r_](const Tensor& x_, const Tensor& w_) { return fx::sum(fx::conv2d(x_, w_, pad1) * r_); };
    };
    Tensor y = fx::conv2d(x, w, pad1);
    auto [gx, gw] = fx::gradient(loss(r), x, w);
    auto abs64 = [](const Tensor& a) { return fx::abs(a.to(DType::f64)); };
    auto [gx_abs, gw_abs] = fx::gradient(loss(abs64(r)), abs64(x), abs64(w));
    const auto y_bound = sum_bound(fx::conv2d(abs64(x), abs64(w), pad1), C * 9, y, t);
    const auto gx_bound = sum_bound(gx_abs, C * 9, gx, t), gw_bound = sum_bound(gw_abs, N * H * W, gw, t);

    const auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), rv = r.to_vector<double>();
    auto X = [&](std::int64_t n, std::int64_t c, std::int64_t i, std::int64_t j) {
        return i < 0 || j < 0 || i >= H || j >= W ? 0.0 : xv[((n * C + c) * H + i) * W + j];
    };
    auto R = [&](std::int64_t n, std::int64_t c, std::int64_t i, std::int64_t j) {
        return i < 0 || j < 0 || i >= H || j >= W ? 0.0 : rv[((n * C + c) * H + i) * W + j];
    };
    auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t kh, std::int64_t kw) {
        return wv[((o * C + c) * 3 + kh) * 3 + kw];
    };
    const auto yv = y.to_vector<double>(), gxv = gx.to_vector<double>(), gwv = gw.to_vector<double>();
    for (auto [n, o, i, j] :
         std::vector<std::array<std::int64_t, 4>>{{0, 0, 0, 0}, {1, 63, 55, 55}, {1, 17, 28, 3}, {0, 40, 0, 55}}) {
        double fwd = 0, dx = 0;
        for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t kh = 0; kh < 3; ++kh)
                for (std::int64_t kw = 0; kw < 3; ++kw) {
                    fwd += X(n, c, i + kh - 1, j + kw - 1) * Wt(o, c, kh, kw);
                    dx += R(n, c, i - kh + 1, j - kw + 1) * Wt(c, o, kh, kw);  // o plays the input channel
                }
        const std::size_t at = ((n * C + o) * H + i) * W + j;
        EXPECT_NEAR(yv[at], fwd, y_bound[at]) << "conv2d at " << n << ", " << o << ", " << i << ", " << j;
        EXPECT_NEAR(gxv[at], dx, gx_bound[at]) << "∂x at " << n << ", " << o << ", " << i << ", " << j;
    }
    for (auto [o, c, kh, kw] : std::vector<std::array<std::int64_t, 4>>{{0, 0, 0, 0}, {63, 63, 2, 2}, {5, 31, 1, 0}}) {
        double dw = 0;
        for (std::int64_t n = 0; n < N; ++n)
            for (std::int64_t i = 0; i < H; ++i)
                for (std::int64_t j = 0; j < W; ++j) dw += R(n, o, i, j) * X(n, c, i + kh - 1, j + kw - 1);
        const std::size_t at = ((o * C + c) * 3 + kh) * 3 + kw;
        EXPECT_NEAR(gwv[at], dw, gw_bound[at]) << "∂w at " << o << ", " << c << ", " << kh << ", " << kw;
    }
    for (const auto& d :
         devices_for(t, {fx::Op::conv2d, fx::Op::conv2d_backward_input, fx::Op::conv2d_backward_weight})) {
        expect_within(y, fx::conv2d(x | d, w | d, pad1), y_bound, on(d, t, "conv2d"));
        auto [dgx, dgw] = fx::gradient(loss(r | d), x | d, w | d);
        expect_within(gx, dgx, gx_bound, on(d, t, "conv2d's ∂x"));
        expect_within(gw, dgw, gw_bound, on(d, t, "conv2d's ∂w"));
    }
}

// NaN, ±inf, ±0 and values whose exp overflows or underflows, through relu, exp, maximum, minimum,
// the comparisons and IEEE addition and multiplication: the CPU's bits on every device (exp within
// 4 units in the last place, its special values exact).
TEST(KernelContract, NaNAndInfinitiesPassThroughElementwiseOpsAsOnTheCpu) {
    const std::vector<double> xs = {kNaN, kInf, -kInf,  0.0,  -0.0,  1.0,  -1.0, 0.5,
                                    88.0, 89.0, -120.0, 1e30, -1e30, kNaN, 2.0};
    const std::vector<double> ys = {1.0,   kNaN, kInf, -0.0,  0.0,  kNaN, -kInf, 0.5,
                                    -kInf, kInf, kNaN, -1e30, 1e30, kNaN, -kInf};
    for (DType t : {DType::f32, DType::f64}) {
        Tensor x = fx::tensor(xs).to(t), y = fx::tensor(ys).to(t);
        auto ops = [](const Tensor& a, const Tensor& b) {
            return std::vector<std::pair<std::string, Tensor>>{{"relu", fx::relu(a)},
                                                               {"maximum", fx::maximum(a, b)},
                                                               {"minimum", fx::minimum(a, b)},
                                                               {"a + b", a + b},
                                                               {"a * b", a * b},
                                                               {"a - a", a - a},
                                                               {"eq", fx::eq(a, b)},
                                                               {"ne", fx::ne(a, b)},
                                                               {"lt", fx::lt(a, b)},
                                                               {"ge", fx::ge(a, b)},
                                                               {"eq self", fx::eq(a, a)}};
        };
        const auto cpu = ops(x, y);
        std::map<std::string, std::vector<double>> known;
        for (const auto& [name, r] : cpu) known[name] = r.to_vector<double>();
        EXPECT_TRUE(std::isnan(known["relu"][0]));
        EXPECT_EQ(known["relu"][2], 0.0);
        EXPECT_TRUE(std::isnan(known["maximum"][0]) && std::isnan(known["maximum"][1]) &&
                    std::isnan(known["minimum"][5]));
        EXPECT_EQ(known["eq self"][0], 0.0);
        EXPECT_EQ(known["ne"][13], 1.0);
        EXPECT_EQ(known["lt"][2], 1.0);
        EXPECT_TRUE(std::isnan(known["a - a"][1]));
        Tensor e = fx::exp(x);
        const auto ev = e.to_vector<double>();
        EXPECT_EQ(ev[1], kInf);
        EXPECT_EQ(ev[2], 0.0);
        EXPECT_EQ(ev[t == DType::f32 ? 9 : 10], t == DType::f32 ? kInf : std::exp(-120.0));
        std::vector<double> e_bound(ev.size());
        for (std::size_t i = 0; i < ev.size(); ++i) e_bound[i] = 4 * 2 * unit_roundoff(t) * std::abs(ev[i]);
        for (const auto& d : devices_for(t, {fx::Op::unary, fx::Op::binary})) {
            const auto got = ops(x | d, y | d);
            for (std::size_t k = 0; k < cpu.size(); ++k)
                expect_identical(cpu[k].second, got[k].second, on(d, t, cpu[k].first));
            expect_within(e, fx::exp(x | d), e_bound, on(d, t, "exp"));
        }
    }
}

namespace {

// a + b, a - b, a · b and -a in two's complement, as the CPU computes them (C++'s unsigned arithmetic).
template <class T> void expect_wraparound(DType t) {
    using U = std::make_unsigned_t<T>;
    constexpr T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min(), half = T(1) << (sizeof(T) * 4);
    const std::vector<T> as = {hi, lo, hi / 2 + 1, -1, half, 7}, bs = {1, -1, hi / 2 + 1, lo, half, -3};
    std::vector<T> sum, diff, prod, neg;
    for (std::size_t i = 0; i < as.size(); ++i) {
        sum.push_back(T(U(as[i]) + U(bs[i])));
        diff.push_back(T(U(as[i]) - U(bs[i])));
        prod.push_back(T(U(as[i]) * U(bs[i])));
        neg.push_back(T(U(0) - U(as[i])));
    }
    EXPECT_EQ(sum[0], lo);  // the test's own arithmetic: max + 1 wraps to min
    Tensor a = fx::tensor(as), b = fx::tensor(bs);
    // 2^20 + 1 copies of 2^(bits - 20) sum to 2^bits + 2^(bits - 20), which wraps to 2^(bits - 20).
    const T piece = T(1) << (sizeof(T) * 8 - 20);
    Tensor pieces = fx::full({kLong}, double(piece), {.dtype = t});
    for (const auto& d : with_cpu(devices_for(t, {fx::Op::binary, fx::Op::unary, fx::Op::reduce}))) {
        expect_identical(fx::tensor(sum), (a | d) + (b | d), on(d, t, "a + b"));
        expect_identical(fx::tensor(diff), (a | d) - (b | d), on(d, t, "a - b"));
        expect_identical(fx::tensor(prod), (a | d) * (b | d), on(d, t, "a * b"));
        expect_identical(fx::tensor(neg), -(a | d), on(d, t, "-a"));
        Tensor total = fx::sum(pieces | d);
        EXPECT_EQ(total.dtype(), t) << on(d, t, "sum");
        EXPECT_EQ((total | fx::cpu).to_vector<std::int64_t>()[0], std::int64_t(piece))
            << on(d, t, "sum of 2^20 + 1 pieces");
    }
}

}  // namespace

TEST(KernelContract, IntegerArithmeticAndSumsWrapAroundOnEveryDevice) {
    expect_wraparound<std::int32_t>(DType::i32);
    expect_wraparound<std::int64_t>(DType::i64);
}

// u8 arithmetic wraps modulo 256 (C++'s unsigned arithmetic, narrowed), and u8 and bool tensors reduce
// by max, min, argmax and argmin (u8 also by a wrapping sum), on every device as on the CPU. ONNX
// models compute on bytes (an image's pixels; a mask's any and all).
TEST(KernelContract, ByteArithmeticWrapsAndBytesAndBoolsReduceOnEveryDevice) {
    const std::vector<std::uint8_t> as = {255, 0, 128, 7, 200, 3, 255}, bs = {1, 1, 128, 9, 100, 0, 255};
    std::vector<std::uint8_t> sum, diff, prod, hi, lo;
    for (std::size_t i = 0; i < as.size(); ++i) {
        sum.push_back(std::uint8_t(as[i] + bs[i]));
        diff.push_back(std::uint8_t(as[i] - bs[i]));
        prod.push_back(std::uint8_t(as[i] * bs[i]));
        hi.push_back(std::max(as[i], bs[i]));
        lo.push_back(std::min(as[i], bs[i]));
    }
    EXPECT_EQ(sum[0], 0);  // the test's own arithmetic: 255 + 1 wraps to 0
    const Tensor a = fx::tensor(as), b = fx::tensor(bs);
    // A {3, 2049} byte matrix and a bool one whose extremes sit at the far end of some rows.
    std::vector<std::uint8_t> bytes(3 * 2049), flags(3 * 2049, 0);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::uint8_t((i * 37) % 251);
    bytes[2048] = 255, bytes[2049] = 0, flags[2048] = 1, flags[2 * 2049 + 5] = 1;
    const Tensor m = fx::tensor(bytes, {3, 2049});
    const Tensor f = fx::cast(fx::tensor(flags, {3, 2049}), DType::boolean);
    for (const auto& d : with_cpu(devices_for(DType::u8, {fx::Op::binary, fx::Op::reduce}))) {
        expect_identical(fx::tensor(sum), (a | d) + (b | d), on(d, DType::u8, "a + b"));
        expect_identical(fx::tensor(diff), (a | d) - (b | d), on(d, DType::u8, "a - b"));
        expect_identical(fx::tensor(prod), (a | d) * (b | d), on(d, DType::u8, "a * b"));
        expect_identical(fx::tensor(hi), fx::maximum(a | d, b | d), on(d, DType::u8, "maximum"));
        expect_identical(fx::tensor(lo), fx::minimum(a | d, b | d), on(d, DType::u8, "minimum"));
        expect_identical(fx::sum(m, 1), fx::sum(m | d, 1), on(d, DType::u8, "sum (wrapping)"));
        for (int axis : {0, 1}) {
            expect_identical(fx::max(m, axis), fx::max(m | d, axis), on(d, DType::u8, "max"));
            expect_identical(fx::min(m, axis), fx::min(m | d, axis), on(d, DType::u8, "min"));
            expect_identical(fx::argmax(m, axis), fx::argmax(m | d, axis), on(d, DType::u8, "argmax"));
            expect_identical(fx::max(f, axis), fx::max(f | d, axis), on(d, DType::boolean, "max (any)"));
            expect_identical(fx::min(f, axis), fx::min(f | d, axis), on(d, DType::boolean, "min (all)"));
        }
        EXPECT_EQ(host(fx::max(f | d, 1)), (std::vector<double>{1, 0, 1})) << d.str();
    }
}

// index_select (and gather, an embedding's lookup) with an index one past the end, negative, or out
// of range only in the last of 2^20 + 1 indices throws fx::ValueError on every device, as on the
// CPU (never a read outside the tensor or a silent 0), and the device stays usable.
TEST(KernelContract, OutOfRangeIndicesThrowOnEveryDevice) {
    for (DType t : {DType::f32, DType::f64, DType::i32}) {
        Tensor table = small_integers({5, 3}, 9, t, 23);
        Tensor good = fx::tensor(std::vector<std::int64_t>{4, 0, 4, 1, 3});
        std::vector<std::int64_t> many(kLong);
        for (std::int64_t i = 0; i < kLong; ++i) many[i] = i % 5;
        Tensor many_good = fx::tensor(many);
        many.back() = 5;
        Tensor many_bad = fx::tensor(many);
        const std::vector<std::pair<std::string, Tensor>> bad = {
            {"one past the end", fx::tensor(std::vector<std::int64_t>{0, 5})},
            {"negative", fx::tensor(std::vector<std::int64_t>{-1})},
            {"the last of 2^20 + 1", many_bad}};
        for (const auto& d : with_cpu(devices_for(t, {fx::Op::index_select, fx::Op::copy_strided}))) {
            Tensor td = table | d;
            for (const auto& [what, index] : bad) {
                EXPECT_THROW(fx::gather(td, index | d), fx::ValueError) << on(d, t, "gather, index " + what);
                EXPECT_THROW(fx::index_select(td, 1, index | d), fx::ValueError)
                    << on(d, t, "index_select along axis 1, " + what);
            }
            expect_identical(fx::gather(table, good), fx::gather(td, good | d), on(d, t, "gather"));
            Tensor columns = fx::tensor(std::vector<std::int64_t>{2, 0, 2, 1});
            expect_identical(fx::index_select(table, 1, columns), fx::index_select(td, 1, columns | d),
                             on(d, t, "index_select along axis 1"));
            expect_identical(fx::gather(table, many_good), fx::gather(td, many_good | d),
                             on(d, t, "gather of 2^20 + 1 rows"));
        }
    }
}

// Views no kernel gets as a plain buffer: rows from an odd offset with a step, columns with a step
// of 3, a transpose, a flat range from element 1, and a broadcast row. Small integers, so that sums
// and products are exact; exp and softmax within their bounds. Each view on a device gives the
// CPU's result for the same view, and its own contiguous copy's result on that device.
TEST(KernelContract, StridedAndOddOffsetViewsMatchTheCpu) {
    const std::int64_t R = 1025, C = 1027;
    for (DType t : {DType::f32, DType::f64}) {
        Tensor base = small_integers({R, C}, 3, t, 24);
        auto views = [&](const Tensor& b) {
            return std::vector<std::pair<std::string, Tensor>>{
                {"odd rows", b.slice(0, 1, R, 2)},
                {"every third column from 1", b.slice(1, 1, C, 3)},
                {"transpose", b.transpose()},
                {"flat from element 1", b.reshape({-1}).slice(0, 1, R * C)},
                {"broadcast row 7", b.select(0, 7).unsqueeze(0).expand({5, C})}};
        };
        auto results = [](const Tensor& v) {
            return std::vector<std::pair<std::string, Tensor>>{
                {"contiguous", v.contiguous()},
                {"v + v", v + v},
                {"v * v", v * v},
                {"sum along axis 0", fx::sum(v, 0)},
                {"sum", fx::sum(v)},
                {"max along the last axis", fx::max(v, -1)},
                {"argmax along the last axis", fx::argmax(v, -1)},
                {"matmul", v.ndim() == 2
                               ? fx::matmul(v.slice(0, 0, 40), v.slice(0, 0, 40).transpose())
                               : fx::matmul(v.slice(0, 0, 4097), v.slice(0, 1, 4098))}};  // 1-d: a dot product
        };
        const auto cpu_views = views(base);
        for (const auto& [name, v] : cpu_views) ASSERT_TRUE(!v.is_contiguous() || v.offset() % 2 == 1) << name;
        for (const auto& d : with_cpu(devices_for(t, {fx::Op::copy_strided, fx::Op::binary, fx::Op::reduce,
                                                      fx::Op::gemm, fx::Op::unary, fx::Op::softmax}))) {
            const auto dev_views = views(base | d);
            for (std::size_t k = 0; k < cpu_views.size(); ++k) {
                const Tensor& cv = cpu_views[k].second;
                const Tensor& dv = dev_views[k].second;
                const auto want = results(cv), got = results(dv), copy = results(dv.contiguous());
                for (std::size_t j = 0; j < want.size(); ++j) {
                    const std::string what = cpu_views[k].first + ": " + want[j].first;
                    expect_identical(want[j].second, got[j].second, on(d, t, what));
                    expect_identical(copy[j].second, got[j].second, on(d, t, what + " against the contiguous copy"));
                }
                const double u = unit_roundoff(t);
                Tensor e = fx::exp(cv), s = fx::softmax(cv, -1);
                std::vector<double> e_bound = host(e * (8 * u)),
                                    s_bound = host(s * (4 * u * (std::sqrt(double(cv.shape(-1))) + 10)));
                expect_within(e, fx::exp(dv), e_bound, on(d, t, cpu_views[k].first + ": exp"));
                expect_within(s, fx::softmax(dv, -1), s_bound, on(d, t, cpu_views[k].first + ": softmax"));
            }
        }
    }
}

// Zero-size tensors through sums, extremes, softmax, matmul, elementwise ops and indexing: on every
// device the CPU's shape and values, or an fx::Error where the CPU throws one.
TEST(KernelContract, ZeroSizeTensorsGiveTheCpusResultsOrErrorsOnEveryDevice) {
    using Make = std::function<Tensor(const fx::Device&)>;
    const DType t = DType::f32;
    auto empty = [&](fx::Shape s) { return [s, t](const fx::Device& d) { return fx::zeros(s, {.dtype = t}) | d; }; };
    const Make rows0 = empty({0, 5}), cols0 = empty({3, 0});
    const Make full34 = [](const fx::Device& d) { return fx::ones({3, 4}) | d; };
    const std::vector<std::pair<std::string, Make>> cases = {
        {"sum of {0, 5}", [&](auto& d) { return fx::sum(rows0(d)); }},
        {"sum of {0, 5} along axis 0", [&](auto& d) { return fx::sum(rows0(d), 0); }},
        {"sum of {0, 5} along axis 1", [&](auto& d) { return fx::sum(rows0(d), 1); }},
        {"mean of {0, 5} along axis 0", [&](auto& d) { return fx::mean(rows0(d), 0); }},
        {"mean of {0, 5}", [&](auto& d) { return fx::mean(rows0(d)); }},
        {"max of {0, 5} along axis 1", [&](auto& d) { return fx::max(rows0(d), 1); }},
        {"max of {0, 5} along axis 0", [&](auto& d) { return fx::max(rows0(d), 0); }},
        {"max of {0, 5}", [&](auto& d) { return fx::max(rows0(d)); }},
        {"argmax of {0, 5}", [&](auto& d) { return fx::argmax(rows0(d)); }},
        {"argmax of {3, 0} along axis 1", [&](auto& d) { return fx::argmax(cols0(d), 1); }},
        {"softmax of {0, 5}", [&](auto& d) { return fx::softmax(rows0(d)); }},
        {"softmax of {3, 0}", [&](auto& d) { return fx::softmax(cols0(d)); }},
        {"logsoftmax of {3, 0} along axis 0", [&](auto& d) { return fx::logsoftmax(cols0(d), 0); }},
        {"matmul {3, 0} × {0, 4}",
         [&](auto& d) {
             return fx::matmul(cols0(d), empty({0, 4})(d));
         }},
        {"matmul {0, 3} × {3, 4}",
         [&](auto& d) {
             return fx::matmul(empty({0, 3})(d), full34(d));
         }},
        {"matmul {3, 4} × {4, 0}",
         [&](auto& d) {
             return fx::matmul(full34(d), empty({4, 0})(d));
         }},
        {"batched matmul {0, 3, 4} × {4, 2}",
         [&](auto& d) {
             return fx::matmul(empty({0, 3, 4})(d), empty({4, 2})(d) + 1.0);
         }},
        {"exp and + of {0, 5}", [&](auto& d) { return fx::exp(rows0(d)) + rows0(d); }},
        {"gather with no indices",
         [&](auto& d) { return fx::gather(full34(d), fx::zeros({0}, {.dtype = DType::i64}) | d); }},
        {"a transposed {0, 5}", [&](auto& d) { return rows0(d).transpose().contiguous(); }},
    };
    // The CPU's answers: the empty sum is 0, the empty mean NaN, an empty axis has no extreme.
    EXPECT_EQ(fx::sum(rows0({})).item(), 0.0);
    EXPECT_EQ(host(fx::matmul(cols0({}), empty({0, 4})({}))), std::vector<double>(12, 0.0));
    EXPECT_TRUE(std::isnan(host(fx::mean(rows0({}), 0))[4]));
    EXPECT_THROW(fx::max(rows0({}), 0), fx::Error);
    for (const auto& [what, f] : cases) {
        Tensor want;
        std::string cpu_error;
        try {
            want = f(fx::Device{});
        } catch (const fx::Error& e) {
            cpu_error = e.what();
        }
        for (const auto& d : devices_for(t, {fx::Op::reduce, fx::Op::softmax, fx::Op::gemm, fx::Op::index_select})) {
            if (!cpu_error.empty()) {
                EXPECT_THROW(f(d), fx::Error) << on(d, t, what) << ": the CPU throws \"" << cpu_error << "\"";
                continue;
            }
            try {
                expect_identical(want, f(d), on(d, t, what));
            } catch (const fx::Error& e) {
                ADD_FAILURE() << on(d, t, what) << " throws \"" << e.what() << "\" where the CPU gives "
                              << fx::summary(want);
            }
        }
    }
}

// The test plugins' folder, as in every program that loads them; Vulkan (lavapipe here) is found
// beside libfluxion.
int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
