// test_cpu_bf16.cpp — the CPU's bf16 fast paths (oneDNN's native bf16 matmul and convolutions,
// src/cpu/matmul_onednn.cpp and conv_onednn.cpp, and the convolution gradients on AMX tiles,
// conv_amx.cpp): that they take the products and convolutions
// layers make (transposed, batched, broadcast, strided operands, odd sizes, strides, padding,
// dilation, groups), that the backend table's bf16 entries use them (counted: their results are the
// widened path's, most often bit for bit), and that the results match an f64 reference on the same
// bf16 inputs, through the fast paths and through the entries (the widened path where the fast
// paths are not there).
//
// The stated tolerance: the result is rounded once to bf16 (half a unit in the last place, 2^-9 of
// its magnitude; 2^-8 allowed) after an f32 sum of the products of bf16 values, which are exact in
// f32, so the sum is off by at most (terms) 2^-24 of the sum of the terms' magnitudes (2^-22 · terms
// allowed). A sum kept in bf16, a wrong transpose, stride or offset all fail it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "cpu/conv_amx.hpp"
#include "cpu/conv_direct.hpp"
#include "cpu/conv_onednn.hpp"
#include "cpu/half.hpp"
#include "cpu/instruction_rates.hpp"
#include "cpu/matmul_onednn.hpp"
#include "cpu/onednn.hpp"
#include "fluxion/error.hpp"
#include "fluxion/info.hpp"

namespace {

namespace be = fluxion::backend;
namespace cpu = fluxion::backend::cpu;
using fluxion::DType;
using std::int64_t;

const char* kNotNative = "oneDNN is not built in, or this CPU has no bf16 instructions: bf16 is widened to f32";

// bf16 values (as bits) of normal random numbers, and the same values exactly in f64.
struct Values {
    std::vector<std::uint16_t> bits;
    std::vector<double> exact;

    Values(int64_t n, unsigned seed) : bits(std::size_t(n)), exact(std::size_t(n)) {
        std::mt19937 rng(seed);
        std::normal_distribution<float> dist;
        for (std::size_t i = 0; i < bits.size(); ++i) {
            bits[i] = cpu::to_bfloat16(dist(rng)).bits;
            exact[i] = cpu::to_float(cpu::BFloat16{bits[i]});
        }
    }
    double at(std::size_t i) const { return exact[i]; }
};

double value(std::uint16_t bits) { return cpu::to_float(cpu::BFloat16{bits}); }

// An f64 reference of each output element and the sum of its terms' magnitudes.
struct Reference {
    std::vector<double> sum, magnitude;
    explicit Reference(std::size_t n) : sum(n, 0.0), magnitude(n, 0.0) {}
    void add(std::size_t i, double term) {
        sum[i] += term;
        magnitude[i] += std::abs(term);
    }
};

void expect_within(const std::vector<std::uint16_t>& got, const Reference& want, std::size_t i, int64_t terms,
                   const std::string& what) {
    const double bound = std::ldexp(std::abs(want.sum[i]), -8) + std::ldexp(double(terms), -22) * want.magnitude[i];
    ASSERT_LE(std::abs(value(got[i]) - want.sum[i]), bound)
        << what << ", element " << i << ": " << value(got[i]) << " against " << want.sum[i];
}

// ---- matrix products ----

struct Product {
    std::string name;
    bool trans_a, trans_b;
    int64_t m, n, k, lda, stride_a, ldb, stride_b, ldc, stride_c, batch;
    double alpha, beta;
};

int64_t reach(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch) {
    return (batch - 1) * stride + (rows - 1) * ld + cols;
}

struct ProductRun {
    Values a, b, c0;  // c0: C before the product (read where beta is not 0, kept between blocks)

    explicit ProductRun(const Product& p)
        : a(reach(p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.lda, p.stride_a, p.batch), 1),
          b(reach(p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, p.ldb, p.stride_b, p.batch), 2),
          c0(reach(p.m, p.n, p.ldc, p.stride_c, p.batch), 3) {}

    // C's element (i, j) of product `q`, and whether an index of C is an element of some block.
    static std::size_t at_c(const Product& p, int64_t q, int64_t i, int64_t j) {
        return std::size_t(q * p.stride_c + i * p.ldc + j);
    }

    Reference reference(const Product& p) const {
        Reference r(c0.bits.size());
        for (int64_t q = 0; q < p.batch; ++q)
            for (int64_t i = 0; i < p.m; ++i)
                for (int64_t j = 0; j < p.n; ++j) {
                    const std::size_t ci = at_c(p, q, i, j);
                    for (int64_t l = 0; l < p.k; ++l) {
                        const int64_t ai = q * p.stride_a + (p.trans_a ? l * p.lda + i : i * p.lda + l);
                        const int64_t bi = q * p.stride_b + (p.trans_b ? j * p.ldb + l : l * p.ldb + j);
                        r.add(ci, p.alpha * a.at(std::size_t(ai)) * b.at(std::size_t(bi)));
                    }
                    if (p.beta != 0) r.add(ci, p.beta * c0.at(ci));
                }
        return r;
    }

    // Every element of a C block against the reference; every other element of C unchanged.
    void check(const Product& p, const std::vector<std::uint16_t>& c, const std::string& what) const {
        const Reference want = reference(p);
        std::vector<bool> in_block(c.size(), false);
        for (int64_t q = 0; q < p.batch; ++q)
            for (int64_t i = 0; i < p.m; ++i)
                for (int64_t j = 0; j < p.n; ++j) {
                    const std::size_t ci = at_c(p, q, i, j);
                    in_block[ci] = true;
                    ASSERT_NO_FATAL_FAILURE(expect_within(c, want, ci, p.k + 1, what));
                }
        for (std::size_t i = 0; i < c.size(); ++i) {
            if (!in_block[i]) {
                ASSERT_EQ(c[i], c0.bits[i]) << what << ": element " << i << " of C outside the blocks";
            }
        }
    }
};

const std::vector<Product> kProducts = {
    // name, trans_a, trans_b, m, n, k, lda, stride_a, ldb, stride_b, ldc, stride_c, batch, alpha, beta
    {"plain_odd", false, false, 37, 23, 19, 19, 0, 23, 0, 23, 0, 1, 1, 0},
    {"a_transposed", true, false, 37, 23, 19, 37, 0, 23, 0, 23, 0, 1, 1, 0},
    {"b_transposed", false, true, 37, 23, 19, 19, 0, 19, 0, 23, 0, 1, 1, 0},
    {"both_transposed_strided", true, true, 17, 29, 31, 40, 0, 33, 0, 35, 0, 1, 1, 0},
    {"long_sums", false, true, 8, 9, 1000, 1000, 0, 1000, 0, 9, 0, 1, 1, 0},
    {"vector", false, false, 1, 1, 65, 65, 0, 1, 0, 1, 0, 1, 1, 0},
    // linear's bias: C holds the bias rows and the product is added (beta = 1).
    {"accumulate", false, true, 64, 120, 256, 256, 0, 256, 0, 120, 0, 1, 1, 1},
    {"alpha_beta", false, false, 13, 11, 7, 7, 0, 11, 0, 11, 0, 1, 0.5, -2},
    {"batched", false, false, 5, 6, 7, 7, 35, 6, 42, 6, 30, 4, 1, 0},
    {"batched_padded", true, false, 5, 6, 7, 9, 70, 8, 60, 10, 55, 3, 1, 0},
    {"batched_broadcast_a", false, true, 5, 6, 7, 7, 0, 7, 42, 6, 30, 3, 1, 0},
    {"batched_broadcast_b", false, false, 5, 6, 7, 7, 35, 6, 0, 6, 30, 3, 1, 0},
    // attention's shapes: 4 heads of 49 tokens × 16, scores then values
    {"attention_scores", false, true, 49, 49, 16, 16, 49 * 16, 16, 49 * 16, 49, 49 * 49, 4, 0.25, 0},
    {"attention_values", false, false, 49, 16, 49, 49, 49 * 49, 16, 49 * 16, 16, 49 * 16, 4, 1, 0},
};

// Test names and failure messages show the case's name, not its bytes.
void PrintTo(const Product& p, std::ostream* os) { *os << p.name; }

class Bf16Gemm : public ::testing::TestWithParam<Product> {};

void run_entry(const Product& p, const ProductRun& run, std::vector<std::uint16_t>& c) {
    be::cpu_backend().gemm(0, DType::bf16, p.trans_a, p.trans_b, p.m, p.n, p.k, p.alpha, run.a.bits.data(), p.lda,
                           p.stride_a, run.b.bits.data(), p.ldb, p.stride_b, p.beta, c.data(), p.ldc, p.stride_c,
                           p.batch);
}

// The choice between oneDNN's bf16 kernels and the widened path follows the measured rates: a CPU
// with AVX-512 BF16 gets a rate in the range real CPUs have (0.5 Intel without AMX, 2 Zen 4; a
// timer or loop that measured nothing would give far outside it), the same rate on every call, and
// the fast path exactly where the rate is above 1 or AMX is there.
TEST(Bf16Choice, FollowsTheMeasuredRateOfTheDotProduct) {
    __builtin_cpu_init();
    const double rate = cpu::bf16_dot_rate_over_f32_fma();
    if (!__builtin_cpu_supports("avx512bf16")) {
        EXPECT_EQ(rate, 0.0);
        EXPECT_FALSE(cpu::onednn_bf16_preferred());
        GTEST_SKIP() << "this CPU has no AVX-512 BF16: its rate is 0 and bf16 is widened";
    }
    EXPECT_GT(rate, 0.2);
    EXPECT_LT(rate, 5.0);
    EXPECT_EQ(cpu::bf16_dot_rate_over_f32_fma(), rate) << "measured once";
    if (cpu::onednn_bf16_native()) {
        EXPECT_EQ(cpu::onednn_bf16_preferred(), rate > 1.0 || cpu::onednn_amx()) << rate;
    }
    const std::string info = fluxion::info();
    EXPECT_NE(info.find("bf16 dot products measured at "), std::string::npos) << info;
}

TEST_P(Bf16Gemm, FastPathTakesItAndMatchesF64) {
    const Product& p = GetParam();
    if (!cpu::onednn_bf16_native()) GTEST_SKIP() << kNotNative;
    const ProductRun run(p);
    std::vector<std::uint16_t> c = run.c0.bits;
    ASSERT_TRUE(cpu::onednn_gemm_bf16(p.trans_a, p.trans_b, p.m, p.n, p.k, p.alpha, run.a.bits.data(), p.lda,
                                      p.stride_a, run.b.bits.data(), p.ldb, p.stride_b, p.beta, c.data(), p.ldc,
                                      p.stride_c, p.batch))
        << "oneDNN's bf16 matmul declined " << p.name;
    run.check(p, c, p.name + " through oneDNN");
    // The table's entry runs it where it is faster than the widened path, and only there.
    const std::uint64_t before = cpu::onednn_bf16_runs();
    std::vector<std::uint16_t> entry = run.c0.bits;
    run_entry(p, run, entry);
    const std::uint64_t runs = cpu::onednn_bf16_preferred() ? 1 : 0;
    EXPECT_EQ(cpu::onednn_bf16_runs(), before + runs)
        << p.name << ": the gemm entry " << (runs ? "did not run" : "ran") << " oneDNN's bf16 matmul";
}

TEST_P(Bf16Gemm, EntryMatchesF64) {
    const Product& p = GetParam();
    const ProductRun run(p);
    std::vector<std::uint16_t> c = run.c0.bits;
    run_entry(p, run, c);
    run.check(p, c, p.name + " through the gemm entry");
}

INSTANTIATE_TEST_SUITE_P(Products, Bf16Gemm, ::testing::ValuesIn(kProducts),
                         [](const auto& info) { return info.param.name; });

TEST(Bf16GemmDeclines, WhatGemmRaisesForAndEmptyProducts) {
    std::vector<std::uint16_t> a(64, 0x3f80), b(64, 0x3f80), c(64, 0);
    // A leading dimension shorter than a row: gemm raises its own error, so the fast path leaves it.
    EXPECT_FALSE(cpu::onednn_gemm_bf16(false, false, 4, 4, 4, 1, a.data(), 3, 0, b.data(), 4, 0, 0, c.data(), 4, 0, 1));
    EXPECT_THROW(be::cpu_backend().gemm(0, DType::bf16, false, false, 4, 4, 4, 1, a.data(), 3, 0, b.data(), 4, 0, 0,
                                        c.data(), 4, 0, 1),
                 fluxion::ValueError);
    // k = 0: C = beta C, which the widened path computes.
    EXPECT_FALSE(cpu::onednn_gemm_bf16(false, false, 4, 4, 0, 1, a.data(), 1, 0, b.data(), 4, 0, 0, c.data(), 4, 0, 1));
    // Blocks of C that overlap (stride_c 0 in a batch) would be written by several threads.
    EXPECT_FALSE(
        cpu::onednn_gemm_bf16(false, false, 4, 4, 4, 1, a.data(), 4, 16, b.data(), 4, 16, 0, c.data(), 4, 0, 2));
}

// ---- convolutions ----

struct Conv {
    std::string name;
    be::Conv2dShape s;
    // Whether oneDNN 2.6 has a direct bf16 kernel for the weight gradient on AVX-512 BF16. Where it
    // has only its GEMM fallback, which lost to widening, conv_onednn.cpp declines the pass.
    bool direct_weight_gradient;
};

be::Conv2dShape shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s, int64_t stride,
                      int64_t pad, int64_t dil, int64_t groups) {
    const int64_t oh = (h + 2 * pad - dil * (r - 1) - 1) / stride + 1,
                  ow = (w + 2 * pad - dil * (s - 1) - 1) / stride + 1;
    return {n, c, h, w, k, r, s, oh, ow, stride, stride, pad, pad, dil, dil, groups};
}

const std::vector<Conv> kConvs = {
    // name, {n, c, h, w, k, r, s, stride, pad, dilation, groups}, direct weight gradient
    {"lenet5_first", shape(3, 1, 28, 28, 6, 5, 5, 1, 0, 1, 1), false},
    {"lenet5_second", shape(3, 6, 12, 12, 16, 5, 5, 1, 0, 1, 1), true},
    {"same_padding", shape(2, 16, 9, 9, 32, 3, 3, 1, 1, 1, 1), true},
    {"strided_odd", shape(2, 8, 11, 13, 12, 3, 3, 2, 1, 1, 1), false},
    {"dilated", shape(2, 8, 10, 10, 8, 3, 3, 1, 2, 2, 1), false},
    {"grouped", shape(2, 16, 7, 7, 32, 3, 3, 1, 1, 1, 4), false},
};

struct ConvRun {
    Values x, w, gy;
    explicit ConvRun(const be::Conv2dShape& s)
        : x(s.n * s.c * s.h * s.w, 4), w(s.k * (s.c / s.groups) * s.r * s.s, 5), gy(s.n * s.k * s.oh * s.ow, 6) {}
};

// The three passes' references in one walk over every (image, filter, output pixel, tap).
struct ConvReference {
    Reference y, gx, gw;
    int64_t forward_terms, input_terms, weight_terms;

    ConvReference(const be::Conv2dShape& s, const ConvRun& v)
        : y(v.gy.bits.size()), gx(v.x.bits.size()), gw(v.w.bits.size()) {
        const int64_t cg = s.c / s.groups, kg = s.k / s.groups;
        forward_terms = cg * s.r * s.s;
        input_terms = kg * s.r * s.s;
        weight_terms = s.n * s.oh * s.ow;
        for (int64_t b = 0; b < s.n; ++b)
            for (int64_t f = 0; f < s.k; ++f)
                for (int64_t oy = 0; oy < s.oh; ++oy)
                    for (int64_t ox = 0; ox < s.ow; ++ox) {
                        const auto yi = std::size_t(((b * s.k + f) * s.oh + oy) * s.ow + ox);
                        for (int64_t ci = 0; ci < cg; ++ci)
                            for (int64_t kr = 0; kr < s.r; ++kr)
                                for (int64_t ks = 0; ks < s.s; ++ks) {
                                    const int64_t iy = oy * s.stride_h - s.pad_h + kr * s.dil_h;
                                    const int64_t ix = ox * s.stride_w - s.pad_w + ks * s.dil_w;
                                    if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                                    const int64_t c = f / kg * cg + ci;
                                    const auto xi = std::size_t(((b * s.c + c) * s.h + iy) * s.w + ix);
                                    const auto wi = std::size_t(((f * cg + ci) * s.r + kr) * s.s + ks);
                                    y.add(yi, v.x.at(xi) * v.w.at(wi));
                                    gx.add(xi, v.gy.at(yi) * v.w.at(wi));
                                    gw.add(wi, v.x.at(xi) * v.gy.at(yi));
                                }
                    }
    }
};

void check_all(const std::vector<std::uint16_t>& got, const Reference& want, int64_t terms, const std::string& what) {
    ASSERT_EQ(got.size(), want.sum.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NO_FATAL_FAILURE(expect_within(got, want, i, terms, what));
}

void PrintTo(const Conv& c, std::ostream* os) { *os << c.name; }

class Bf16Conv : public ::testing::TestWithParam<Conv> {};

TEST_P(Bf16Conv, FastPathTakesThePassesAndMatchesF64) {
    const Conv& c = GetParam();
    if (!cpu::onednn_bf16_native()) GTEST_SKIP() << kNotNative;
    const be::Conv2dShape& s = c.s;
    const ConvRun v(s);
    const ConvReference want(s, v);
    std::vector<std::uint16_t> y(v.gy.bits.size()), gx(v.x.bits.size()), gw(v.w.bits.size());
    ASSERT_TRUE(cpu::onednn_conv2d_bf16(cpu::ConvPass::forward, s, v.x.bits.data(), v.w.bits.data(), y.data()))
        << c.name << ": oneDNN declined the forward pass";
    check_all(y, want.y, want.forward_terms, c.name + " forward");
    ASSERT_TRUE(cpu::onednn_conv2d_bf16(cpu::ConvPass::backward_input, s, v.gy.bits.data(), v.w.bits.data(), gx.data()))
        << c.name << ": oneDNN declined the input gradient";
    check_all(gx, want.gx, want.input_terms, c.name + " input gradient");
    const bool weight_taken =
        cpu::onednn_conv2d_bf16(cpu::ConvPass::backward_weight, s, v.x.bits.data(), v.gy.bits.data(), gw.data());
    if (c.direct_weight_gradient) {
        ASSERT_TRUE(weight_taken) << c.name << ": oneDNN declined the weight gradient";
    }
    if (weight_taken) check_all(gw, want.gw, want.weight_terms, c.name + " weight gradient");

    // The table's entries run the same kernels, once each, where they are faster than the direct
    // kernels or the widened path, and never elsewhere: not for an input of at most 3 channels that
    // the direct kernels take (lenet5_first), nor, with AMX, for the gradients the direct kernels
    // take (lenet5_second; fluxion's own AMX kernels take those, Bf16AmxConv).
    const be::Backend& table = be::cpu_backend();
    const auto in_onednn = [&](cpu::ConvPass pass) -> std::uint64_t {
        return cpu::bf16_conv_in_onednn(pass, s) ? 1 : 0;
    };
    const std::uint64_t forward = in_onednn(cpu::ConvPass::forward);
    const std::uint64_t input = in_onednn(cpu::ConvPass::backward_input);
    const std::uint64_t weight = weight_taken ? in_onednn(cpu::ConvPass::backward_weight) : 0;
    if (c.name == "lenet5_first" && cpu::direct_conv2d_takes(cpu::ConvPass::forward, s)) {  // built with AVX2
        EXPECT_EQ(forward + input + weight, 0u) << "the direct kernels take all three passes of 1 => 6 channels";
    }
    if (c.name == "lenet5_second" && cpu::onednn_amx() &&
        cpu::direct_conv2d_takes(cpu::ConvPass::backward_weight, s)) {
        EXPECT_EQ(forward, 1u) << "oneDNN's AMX kernels take the forward pass of 6 => 16 channels";
        EXPECT_EQ(input + weight, 0u) << "with AMX the direct kernels take the gradients of 6 => 16 channels";
    }
    const auto said = [](std::uint64_t runs) { return runs ? "did not run" : "ran"; };
    std::uint64_t before = cpu::onednn_bf16_runs();
    table.conv2d(0, DType::bf16, &s, v.x.bits.data(), v.w.bits.data(), y.data());
    EXPECT_EQ(cpu::onednn_bf16_runs() - before, forward)
        << c.name << ": the conv2d entry " << said(forward) << " oneDNN";
    before = cpu::onednn_bf16_runs();
    table.conv2d_backward_input(0, DType::bf16, &s, v.gy.bits.data(), v.w.bits.data(), gx.data());
    EXPECT_EQ(cpu::onednn_bf16_runs() - before, input)
        << c.name << ": the conv2d_backward_input entry " << said(input) << " oneDNN";
    before = cpu::onednn_bf16_runs();
    table.conv2d_backward_weight(0, DType::bf16, &s, v.x.bits.data(), v.gy.bits.data(), gw.data());
    EXPECT_EQ(cpu::onednn_bf16_runs() - before, weight)
        << c.name << ": the conv2d_backward_weight entry " << said(weight) << " oneDNN";
}

TEST_P(Bf16Conv, EntriesMatchF64) {
    const Conv& c = GetParam();
    const be::Conv2dShape& s = c.s;
    const ConvRun v(s);
    const ConvReference want(s, v);
    const be::Backend& table = be::cpu_backend();
    std::vector<std::uint16_t> y(v.gy.bits.size()), gx(v.x.bits.size()), gw(v.w.bits.size());
    table.conv2d(0, DType::bf16, &s, v.x.bits.data(), v.w.bits.data(), y.data());
    check_all(y, want.y, want.forward_terms, c.name + " forward");
    table.conv2d_backward_input(0, DType::bf16, &s, v.gy.bits.data(), v.w.bits.data(), gx.data());
    check_all(gx, want.gx, want.input_terms, c.name + " input gradient");
    table.conv2d_backward_weight(0, DType::bf16, &s, v.x.bits.data(), v.gy.bits.data(), gw.data());
    check_all(gw, want.gw, want.weight_terms, c.name + " weight gradient");
}

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16Conv, ::testing::ValuesIn(kConvs),
                         [](const auto& info) { return info.param.name; });

// The forward pass on AMX with bias and relu (a compiled step's fused convolution) gives the bits of
// the eager calls: the AMX sum rounded, the bias added and rounded, relu as x < 0 ? 0 : x (which
// keeps NaN and -0); so does the table's fused entry. x holds a NaN, an infinity and, in image 1,
// only zeros and a few subnormals, so that sums are 0 (a subnormal reads as zero on AMX, and a sum
// of zero products starting from +0 is +0, so that the AMX sums give no -0 for relu to keep).
TEST(Bf16AmxConv, ForwardBiasAndReluGiveTheEagerBits) {
    if (!cpu::amx_usable()) GTEST_SKIP() << "no AMX-BF16 here";
    const be::Conv2dShape s = shape(3, 1, 28, 28, 6, 5, 5, 1, 0, 1, 1);
    ASSERT_TRUE(cpu::amx_conv2d_takes(cpu::ConvPass::forward, s));
    ConvRun v(s);
    const int64_t plane = s.h * s.w, ny = int64_t(v.gy.bits.size());
    for (int64_t i = plane; i < 2 * plane; ++i) v.x.bits[i] = i % 7 ? (i % 2 ? 0x8000 : 0) : 0x0001;
    v.x.bits[2 * plane + 40] = 0x7fc0;         // NaN
    v.x.bits[2 * plane + plane / 2] = 0xff80;  // -inf
    Values bias(s.k, 9);
    bias.bits[0] = 0x8000;  // -0 keeps the sums' -0
    const be::Backend& table = be::cpu_backend();
    std::vector<std::uint16_t> y(ny), want(ny), got(ny, 0x1234), fused(ny, 0x1234);
    table.conv2d(0, DType::bf16, &s, v.x.bits.data(), v.w.bits.data(), y.data());
    const be::Strided yv{4, {s.n, s.k, s.oh, s.ow}, {s.k * s.oh * s.ow, s.oh * s.ow, s.ow, 1}};
    const be::Strided bv{4, {s.n, s.k, s.oh, s.ow}, {0, 1, 0, 0}};
    table.binary(0, be::Binary::add, DType::bf16, &yv, y.data(), &bv, bias.bits.data(), want.data());
    table.unary(0, be::Unary::relu, DType::bf16, ny, want.data(), want.data(), 0, 0);
    ASSERT_TRUE(cpu::amx_conv2d(cpu::ConvPass::forward, s, v.x.bits.data(), v.w.bits.data(), got.data(),
                                bias.bits.data(), true));
    be::ConvEpilogue e;
    e.bias = e.activation = true;
    e.op = be::Unary::relu;
    const std::uint64_t before = cpu::amx_conv_runs();
    table.conv2d_epilogue(0, DType::bf16, &s, v.x.bits.data(), v.w.bits.data(), bias.bits.data(), &e, fused.data());
    EXPECT_EQ(cpu::amx_conv_runs() - before, 1u) << "the fused entry did not run the AMX kernel";
    int64_t nans = 0, zeros = 0;
    for (int64_t i = 0; i < ny; ++i) {
        ASSERT_EQ(got[i], want[i]) << "forward with bias and relu, y " << i;
        ASSERT_EQ(fused[i], want[i]) << "the fused entry, y " << i;
        nans += (got[i] & 0x7fff) > 0x7f80;
        zeros += (got[i] & 0x7fff) == 0;
    }
    EXPECT_GT(nans, 0) << "no NaN reached the output: relu's handling of NaN went untested";
    EXPECT_GT(zeros, 0) << "relu turned no sum into 0";
    // relu without the bias: the rounded sum decides.
    table.unary(0, be::Unary::relu, DType::bf16, ny, y.data(), want.data(), 0, 0);
    ASSERT_TRUE(cpu::amx_conv2d(cpu::ConvPass::forward, s, v.x.bits.data(), v.w.bits.data(), got.data(), nullptr,
                                true));
    for (int64_t i = 0; i < ny; ++i) ASSERT_EQ(got[i], want[i]) << "forward with relu, y " << i;
}

// The convolutions on AMX tiles (conv_amx.cpp) for the shapes the direct kernels take: each case
// stresses a part of the layout. LeNet-5's layers (the first: one group of accumulator tiles, 18
// blocks of 32 pixels an image for the weight gradient, 42 blocks of 16 for the forward pass, 13 pairs
// of taps; the second: two groups of five tiles); 24 pixels an image, less than one block, with 27
// taps and an odd number of filters (the input gradient's last pair half zero; the forward pass's
// 18 pairs in two tiles); 200 taps, three groups, 48 pixels (a block and a half); 20 filters, over
// one tile's 16 for the weight gradient and the forward pass, which are then declined; 32 filters,
// the input gradient's most; 3 channels of 5 × 5, the forward pass's three tiles of pairs, and of
// 7 × 7, more than it takes; 150 images, which the weight gradient takes in runs of 32 a thread.
// The forward pass takes at most 3 channels, as the direct kernels do.
// The table's entries must run the same kernel (counted) and give its bits.
TEST(Bf16AmxConv, PassesMatchF64AndTheEntriesRunThem) {
    if (!cpu::amx_usable())
        GTEST_SKIP() << "no AMX-BF16 here: the CPU lacks it, Linux refused its tiles, or libfluxion was built "
                        "without it (-march=native on another CPU)";
    struct Case {
        std::string name;
        be::Conv2dShape s;
        bool forward, input, weight;  // which passes the AMX kernels take
    };
    const std::vector<Case> cases = {
        {"lenet5_first", shape(3, 1, 28, 28, 6, 5, 5, 1, 0, 1, 1), true, true, true},
        {"lenet5_second", shape(3, 6, 12, 12, 16, 5, 5, 1, 0, 1, 1), false, true, true},
        {"part_of_a_block", shape(2, 3, 5, 10, 5, 3, 3, 1, 0, 1, 1), true, true, true},
        {"three_groups", shape(2, 8, 10, 12, 12, 5, 5, 1, 0, 1, 1), false, true, true},
        {"twenty_filters", shape(2, 2, 10, 10, 20, 3, 3, 1, 0, 1, 1), false, true, false},
        {"thirty_two_filters", shape(1, 4, 10, 10, 32, 3, 3, 1, 0, 1, 1), false, true, false},
        {"three_tiles_of_pairs", shape(2, 3, 12, 20, 8, 5, 5, 1, 0, 1, 1), true, true, true},
        {"seven_by_seven", shape(2, 3, 14, 14, 4, 7, 7, 1, 0, 1, 1), false, true, true},
        {"many_images", shape(150, 2, 10, 10, 4, 3, 3, 1, 0, 1, 1), true, true, true},
    };
    const be::Backend& table = be::cpu_backend();
    for (const Case& c : cases) {
        const be::Conv2dShape& s = c.s;
        ASSERT_TRUE(cpu::direct_conv2d_takes(cpu::ConvPass::backward_input, s)) << c.name;
        const ConvRun v(s);
        const ConvReference want(s, v);
        const auto run = [&](cpu::ConvPass pass, bool taken, const Values& a, const Values& b, const Reference& ref,
                             int64_t terms, std::size_t n, const char* what) {
            const std::string label = c.name + " " + what;
            ASSERT_EQ(cpu::amx_conv2d_takes(pass, s), taken) << label;
            std::vector<std::uint16_t> got(n, 0x7fc1), entry(n, 0x7fc1);  // NaN until written
            ASSERT_EQ(cpu::amx_conv2d(pass, s, a.bits.data(), b.bits.data(), got.data()), taken) << label;
            const std::uint64_t before = cpu::amx_conv_runs();
            if (pass == cpu::ConvPass::forward)
                table.conv2d(0, DType::bf16, &s, a.bits.data(), b.bits.data(), entry.data());
            else if (pass == cpu::ConvPass::backward_input)
                table.conv2d_backward_input(0, DType::bf16, &s, a.bits.data(), b.bits.data(), entry.data());
            else
                table.conv2d_backward_weight(0, DType::bf16, &s, a.bits.data(), b.bits.data(), entry.data());
            EXPECT_EQ(cpu::amx_conv_runs() - before, taken ? 1u : 0u) << label << ": the entry's kernel";
            if (!taken) return;
            check_all(got, ref, terms, label);
            for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(entry[i], got[i]) << label << " through the entry, " << i;
        };
        run(cpu::ConvPass::forward, c.forward, v.x, v.w, want.y, want.forward_terms, v.gy.bits.size(), "forward");
        run(cpu::ConvPass::backward_input, c.input, v.gy, v.w, want.gx, want.input_terms, v.x.bits.size(),
            "input gradient");
        run(cpu::ConvPass::backward_weight, c.weight, v.x, v.gy, want.gw, want.weight_terms, v.w.bits.size(),
            "weight gradient");
    }

    // The weight gradient multiplies input pixels past the output rows by zero, so a NaN or an
    // infinity in x sends the call to the direct kernels, whose bits the entry then gives; the
    // input gradient takes it, and a NaN in gy reaches only the input pixels it feeds.
    const be::Conv2dShape s = shape(2, 6, 12, 12, 16, 5, 5, 1, 0, 1, 1);
    ConvRun v(s);
    v.x.bits[s.c * s.h * s.w + 11] = 0x7f80;  // +inf in image 1, channel 0, row 0, the last column
    v.x.bits[5] = 0x7fc0;                      // NaN in image 0, read only by taps kx >= 1 of column 0
    std::vector<std::uint16_t> direct(v.w.bits.size()), entry(v.w.bits.size(), 0x1234);
    EXPECT_FALSE(cpu::amx_conv2d(cpu::ConvPass::backward_weight, s, v.x.bits.data(), v.gy.bits.data(), entry.data()));
    ASSERT_TRUE(cpu::direct_conv2d(DType::bf16, cpu::ConvPass::backward_weight, s, v.x.bits.data(), v.gy.bits.data(),
                                   direct.data()));
    table.conv2d_backward_weight(0, DType::bf16, &s, v.x.bits.data(), v.gy.bits.data(), entry.data());
    int64_t finite = 0;
    for (std::size_t i = 0; i < direct.size(); ++i) {
        ASSERT_EQ(entry[i], direct[i]) << "weight gradient with a NaN and an infinity in x, " << i;
        finite += (entry[i] & 0x7f80) != 0x7f80;
    }
    EXPECT_GT(finite, 0) << "every tap saw the NaN or the infinity: the test would not see one spread too far";
    v.gy.bits[7] = 0x7fc0;  // NaN at image 0, filter 0, output pixel (0, 7)
    v.gy.exact[7] = NAN;
    const ConvReference want(s, v);
    std::vector<std::uint16_t> gx(v.x.bits.size(), 0x1234);
    ASSERT_TRUE(cpu::amx_conv2d(cpu::ConvPass::backward_input, s, v.gy.bits.data(), v.w.bits.data(), gx.data()));
    for (std::size_t i = 0; i < gx.size(); ++i) {
        if (std::isnan(want.gx.sum[i])) {
            ASSERT_TRUE(std::isnan(value(gx[i]))) << "input gradient " << i << " should be NaN";
        } else {
            ASSERT_NO_FATAL_FAILURE(expect_within(gx, want.gx, i, want.input_terms, "input gradient beside a NaN"));
        }
    }
}

TEST(F16Gemm, ComputesThroughF32) {
    // oneDNN 2.6 has no f16 kernels for this CPU: the f16 entry still computes, through f32.
    std::vector<std::uint16_t> a(6, 0x3c00), b(6, 0x4000), c(4, 0);  // f16 ones and twos
    be::cpu_backend().gemm(0, DType::f16, false, false, 2, 2, 3, 1, a.data(), 3, 0, b.data(), 2, 0, 0, c.data(), 2, 0,
                           1);
    for (std::uint16_t bits : c) EXPECT_EQ(bits, 0x4600) << "1·2 summed 3 times is 6 (f16 0x4600)";
}

}  // namespace
