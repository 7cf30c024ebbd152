// test_fused_kernels.cpp — the fused entries of the backend table (core/backend.hpp, "fused
// kernels", and mixed precision's multi-tensor kernels), called directly on every backend present
// that has them, against the sequence of unfused calls each stands for, on the same device: bit for bit on the CPU; on a GPU within a few units in the last
// place (its compiler may contract the same formula differently in two shaders), and on lavapipe
// bit for bit as measured. Inputs hold NaN, infinities and signed zeros, which must come out where
// the unfused calls put them. f32, f64, f16 and bf16 wherever the device takes them.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/registry.hpp"
#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
namespace be = fluxion::backend;
using fx::DType;
using fx::Tensor;

namespace {

// The CPU and every device of a GPU backend that works here (the TestHost plugin is the CPU's
// table again: no evidence of anything).
std::vector<fx::Device> devices(DType t) {
    std::vector<fx::Device> out{fx::Device{}};
    for (const char* name : {"Vulkan", "CUDA"}) {
        if (!fx::functional(name)) continue;
        for (const auto& d : fx::devices(name)) {
            std::string why;
            if (fx::supports(d.device, fx::Op::unary, t, &why) && fx::supports(d.device, fx::Op::conv2d, t, &why))
                out.push_back(d.device);
            else
                std::cout << "[ LEFT OUT ] " << d.device.str() << " for " << fx::name(t) << ": " << why << "\n";
        }
    }
    return out;
}

const be::Backend& table(const fx::Device& d) { return fx::detail::backend_for(d); }

// n values of type t on d: a wave of both signs with NaN, ±inf and -0 among them (at every
// 97th element, from `special`), so that both paths meet them.
Tensor values(std::int64_t n, DType t, const fx::Device& d, double scale, int seed, bool special = true) {
    auto v = std::vector<double>(static_cast<std::size_t>(n));
    const double specials[] = {std::nan(""), std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity(), -0.0};
    for (std::int64_t i = 0; i < n; ++i) {
        v[std::size_t(i)] = scale * std::sin(0.37 * double(i) + seed) * (1.0 + 0.5 * std::cos(1.3 * double(i * seed)));
        if (special && i % 97 == 13) v[std::size_t(i)] = specials[(i / 97) % 4];
    }
    return (fx::tensor(v, {n}).to(t)) | d;
}

Tensor empty_like(const Tensor& x) { return fx::zeros(x.shape(), {.dtype = x.dtype(), .device = x.device()}); }

// Bit for bit on the CPU and on lavapipe; elsewhere NaN where NaN, and within 4 units of t's last
// place (relative to the value, or absolute below 1).
void expect_same(const Tensor& fused, const Tensor& unfused, const std::string& what) {
    const bool exact = fused.device().is_cpu() || fx::detail::properties(fused.device()).kind == fx::DeviceKind::cpu;
    const auto a = fused.to(DType::f64).to_vector<double>(), b = unfused.to(DType::f64).to_vector<double>();
    ASSERT_EQ(a.size(), b.size()) << what;
    const double ulp = fused.dtype() == DType::f64   ? 0x1p-52
                       : fused.dtype() == DType::f32 ? 0x1p-23
                       : fused.dtype() == DType::f16 ? 0x1p-10
                                                     : 0x1p-7;
    int shown = 0;
    for (std::size_t i = 0; i < a.size() && shown < 5; ++i) {
        const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);  // NaN's payload may differ
        const bool same_bits = both_nan || std::memcmp(&a[i], &b[i], sizeof(double)) == 0;
        const bool close = both_nan || (!std::isnan(a[i]) && !std::isnan(b[i]) &&
                                        (a[i] == b[i] || std::abs(a[i] - b[i]) <= 4 * ulp * std::max(1.0, std::abs(b[i]))));
        if (exact ? same_bits : close) continue;
        ADD_FAILURE() << what << " on " << fused.device().str() << ", element " << i << ": fused " << a[i]
                      << ", unfused " << b[i];
        ++shown;
    }
}

constexpr DType kTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// ---- elementwise_chain ----

// Ten steps (more than a Vulkan dispatch takes) with four other operands (more than its slots): the
// operand on either side, one broadcast value, ops with parameters, transcendental ops.
std::vector<be::ElementwiseStep> chain_steps() {
    using U = be::Unary;
    using B = be::Binary;
    auto unary = [](U op, double a = 0, double b = 0) {
        return be::ElementwiseStep{.binary = false, .unary_op = op, .a = a, .b = b};
    };
    auto binary = [](B op, bool value_first, bool scalar) {
        return be::ElementwiseStep{.binary = true, .binary_op = op, .value_first = value_first, .other_scalar = scalar};
    };
    return {unary(U::tanh),          binary(B::mul, true, false), unary(U::leakyrelu, 0.1), binary(B::sub, false, true),
            unary(U::sigmoid),       binary(B::add, true, false), unary(U::clamp, -0.5, 0.75), unary(U::exp),
            binary(B::div, false, false), unary(U::elu, 0.7)};
}

void check_chain(const fx::Device& d, DType t, std::int64_t n) {
    const auto steps = chain_steps();
    const be::Backend& b = table(d);
    Tensor x = values(n, t, d, 3, 1);
    std::vector<Tensor> others;
    for (std::size_t s = 0, k = 0; s < steps.size(); ++s)
        if (steps[s].binary) others.push_back(values(steps[s].other_scalar ? 1 : n, t, d, 2, int(2 + k++), false));
    // Unfused: one call per step, each into a buffer of its own.
    Tensor value = x;
    std::size_t next = 0;
    for (const auto& s : steps) {
        Tensor out = empty_like(x);
        if (!s.binary) {
            b.unary(d.index, s.unary_op, t, n, value.data_ptr(), out.data_ptr(), s.a, s.b);
        } else {
            const Tensor& o = others[next++];
            be::Strided v{1, {n}, {1}}, ov{1, {n}, {s.other_scalar ? 0 : 1}};
            if (s.value_first) b.binary(d.index, s.binary_op, t, &v, value.data_ptr(), &ov, o.data_ptr(), out.data_ptr());
            else b.binary(d.index, s.binary_op, t, &ov, o.data_ptr(), &v, value.data_ptr(), out.data_ptr());
        }
        value = out;
    }
    Tensor fused = empty_like(x);
    std::vector<void*> ptrs{x.data_ptr()};
    for (const auto& o : others) ptrs.push_back(o.data_ptr());
    ptrs.push_back(fused.data_ptr());
    b.elementwise_chain(d.index, t, n, steps.data(), steps.size(), ptrs.data());
    expect_same(fused, value, "elementwise_chain of " + std::to_string(n) + " " + fx::name(t));
}

TEST(FusedKernels, ElementwiseChainIsTheCallsItReplaces) {
    for (DType t : kTypes)
        for (const auto& d : devices(t)) {
            ASSERT_NE(table(d).elementwise_chain, nullptr) << d.str();
            check_chain(d, t, 1000);
            check_chain(d, t, 70001);  // several blocks on the CPU, not a whole number of them
        }
}

// A chain of one step's worth after another step's worth: shorter than a dispatch's limits.
TEST(FusedKernels, ShortChainsAndEmptyOnesToo) {
    for (const auto& d : devices(DType::f32)) {
        const be::Backend& b = table(d);
        Tensor x = values(5, DType::f32, d, 1, 3), y = empty_like(x), ref = empty_like(x), mid = empty_like(x);
        const be::ElementwiseStep steps[] = {{.unary_op = be::Unary::neg}, {.unary_op = be::Unary::relu}};
        b.unary(d.index, be::Unary::neg, DType::f32, 5, x.data_ptr(), mid.data_ptr(), 0, 0);
        b.unary(d.index, be::Unary::relu, DType::f32, 5, mid.data_ptr(), ref.data_ptr(), 0, 0);
        void* ptrs[] = {x.data_ptr(), y.data_ptr()};
        b.elementwise_chain(d.index, DType::f32, 5, steps, 2, ptrs);
        expect_same(y, ref, "neg then relu");
        b.elementwise_chain(d.index, DType::f32, 0, steps, 2, ptrs);  // nothing to do, nothing touched
        expect_same(y, ref, "an empty chain");
    }
}

// ---- conv2d_epilogue ----

be::Conv2dShape conv_shape(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t k, std::int64_t r,
                           std::int64_t stride, std::int64_t pad, std::int64_t groups) {
    const std::int64_t oh = (h + 2 * pad - r) / stride + 1;
    return {n, c, h, h, k, r, r, oh, oh, stride, stride, pad, pad, 1, 1, groups};
}

void check_conv(const fx::Device& d, DType t, const be::Conv2dShape& s, const be::ConvEpilogue& e) {
    const be::Backend& b = table(d);
    const std::int64_t ny = s.n * s.k * s.oh * s.ow, plane = s.oh * s.ow;
    Tensor x = values(s.n * s.c * s.h * s.w, t, d, 1, 4), w = values(s.k * (s.c / s.groups) * s.r * s.s, t, d, 0.5, 5, false);
    Tensor bias = values(s.k, t, d, 0.5, 6, false);
    Tensor y = values(ny, t, d, 1, 7, false), ref = empty_like(y);  // y's old values must not matter
    b.conv2d(d.index, t, &s, x.data_ptr(), w.data_ptr(), ref.data_ptr());
    if (e.bias) {
        Tensor sum = empty_like(ref);
        const be::Strided yv{4, {s.n, s.k, s.oh, s.ow}, {s.k * plane, plane, s.ow, 1}};
        const be::Strided bv{4, {s.n, s.k, s.oh, s.ow}, {0, 1, 0, 0}};
        b.binary(d.index, be::Binary::add, t, &yv, ref.data_ptr(), &bv, bias.data_ptr(), sum.data_ptr());
        ref = sum;
    }
    if (e.activation) {
        Tensor act = empty_like(ref);
        b.unary(d.index, e.op, t, ny, ref.data_ptr(), act.data_ptr(), e.a, e.b);
        ref = act;
    }
    b.conv2d_epilogue(d.index, t, &s, x.data_ptr(), w.data_ptr(), bias.data_ptr(), &e, y.data_ptr());
    expect_same(y, ref,
                std::string("conv2d_epilogue ") + fx::name(t) + " c " + std::to_string(s.c) + " k " + std::to_string(s.k) +
                    (e.bias ? " +bias" : "") + (e.activation ? " +act" : ""));
}

TEST(FusedKernels, ConvolutionEpilogueIsTheCallsItReplaces) {
    const be::ConvEpilogue both{.bias = true, .activation = true, .op = be::Unary::relu};
    const be::ConvEpilogue bias_only{.bias = true};
    const be::ConvEpilogue tanh_only{.activation = true, .op = be::Unary::tanh};
    const be::ConvEpilogue leaky{.bias = true, .activation = true, .op = be::Unary::leakyrelu, .a = 0.2};
    for (DType t : kTypes)
        for (const auto& d : devices(t))
            for (const auto& s : {conv_shape(2, 1, 12, 6, 5, 1, 0, 1),    // the CPU's direct kernel
                                  conv_shape(2, 8, 9, 16, 3, 1, 1, 1),    // oneDNN or im2col
                                  conv_shape(1, 4, 7, 6, 3, 2, 1, 2)})    // strided, two groups
                for (const auto& e : {both, bias_only, tanh_only, leaky}) check_conv(d, t, s, e);
}

// ---- pool2d_backward_activation ----

void check_pool(const fx::Device& d, DType t, be::Pool op, const be::Pool2dShape& s, be::Unary act) {
    const be::Backend& b = table(d);
    const std::int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.c * s.oh * s.ow;
    Tensor raw = values(nx, t, d, 2, 8), x = empty_like(raw);
    b.unary(d.index, act, t, nx, raw.data_ptr(), x.data_ptr(), 0, 0);  // the pool reads the activation's output
    Tensor y = fx::zeros({ny}, {.dtype = t, .device = d}), gy = values(ny, t, d, 1, 9);
    b.pool2d(d.index, op, t, &s, x.data_ptr(), y.data_ptr());
    Tensor g = empty_like(x), ref = empty_like(x), gx = values(nx, t, d, 1, 10, false);
    b.pool2d_backward(d.index, op, t, &s, x.data_ptr(), y.data_ptr(), gy.data_ptr(), g.data_ptr());
    b.unary_backward(d.index, act, t, nx, x.data_ptr(), x.data_ptr(), g.data_ptr(), ref.data_ptr(), 0, 0);
    b.pool2d_backward_activation(d.index, op, t, &s, x.data_ptr(), y.data_ptr(), gy.data_ptr(), act, gx.data_ptr());
    expect_same(gx, ref,
                std::string("pool2d_backward_activation ") + (op == be::Pool::max ? "max " : "mean ") + fx::name(t) +
                    " window " + std::to_string(s.kh) + " act " + std::to_string(int(act)));
}

TEST(FusedKernels, PoolGradientWithActivationIsTheCallsItReplaces) {
    const be::Pool2dShape tiles{2, 3, 8, 8, 4, 4, 2, 2, 2, 2, 0, 0};        // the CPU's vector 2×2 kernel
    const be::Pool2dShape overlapping{1, 2, 7, 9, 4, 5, 3, 3, 2, 2, 1, 1};  // windows overlap, padding
    for (DType t : kTypes)
        for (const auto& d : devices(t))
            for (be::Pool op : {be::Pool::max, be::Pool::mean})
                for (const auto& s : {tiles, overlapping})
                    for (be::Unary act : {be::Unary::relu, be::Unary::sigmoid, be::Unary::tanh})
                        check_pool(d, t, op, s, act);
}

// ---- optimiser_steps ----

TEST(FusedKernels, OptimiserStepsAreTheStepsTheyReplace) {
    struct Rule {
        be::Optimiser rule;
        int states;
    };
    for (DType t : kTypes)
        for (const auto& d : devices(t))
            for (Rule r : {Rule{be::Optimiser::descent, 0}, Rule{be::Optimiser::adam, 2}, Rule{be::Optimiser::amsgrad, 3}}) {
                const be::Backend& b = table(d);
                const std::int64_t sizes[] = {5, 1000, 70001};
                std::vector<Tensor> one, many;  // per tensor: parameter, gradient, three states
                std::vector<void*> ptrs;
                std::vector<be::OptimiserStep> hps;
                for (int i = 0; i < 3; ++i) hps.push_back({.eta = 1e-2 * (i + 1), .beta1 = 0.9, .beta2 = 0.999,
                                                           .epsilon = 1e-8, .t = 3 + i});
                for (int i = 0; i < 3; ++i)
                    for (int k = 0; k < 5; ++k) {
                        const bool state = k >= 2, used = !state || k - 2 < r.states;
                        Tensor v = used ? (state && k == 3 ? fx::abs(values(sizes[i], t, d, 1, 20 + 5 * i + k, false))
                                                           : values(sizes[i], t, d, 1, 20 + 5 * i + k, k != 1))
                                        : Tensor();
                        one.push_back(v.defined() ? v.clone() : v);
                        many.push_back(v);
                        ptrs.push_back(v.defined() ? v.data_ptr() : nullptr);
                    }
                for (int i = 0; i < 3; ++i) {
                    auto p = [&](int k) { return one[std::size_t(5 * i + k)].defined() ? one[std::size_t(5 * i + k)].data_ptr() : nullptr; };
                    b.optimiser_step(d.index, r.rule, t, sizes[i], p(0), p(1), p(2), p(3), p(4), &hps[std::size_t(i)]);
                }
                const be::OptimiserStep* hp[] = {&hps[0], &hps[1], &hps[2]};
                b.optimiser_steps(d.index, r.rule, t, 3, sizes, hp, ptrs.data());
                for (std::size_t k = 0; k < one.size(); ++k)
                    if (one[k].defined() && k % 5 != 1)
                        expect_same(many[k], one[k], "optimiser_steps rule " + std::to_string(int(r.rule)) + " " +
                                                         fx::name(t) + " buffer " + std::to_string(k));
            }
}

// ---- mixed precision's multi-tensor kernels ----

// The devices whose table has `entry`.
template <class Entry> std::vector<fx::Device> devices_with(DType t, Entry be::Backend::*entry) {
    std::vector<fx::Device> out;
    for (const auto& d : devices(t))
        if (table(d).*entry) out.push_back(d);
    return out;
}

// nonfinite_check's flag over `tensors` (all of type t on d).
float nonfinite_flag(const fx::Device& d, DType t, const std::vector<Tensor>& tensors, double divisor) {
    std::vector<std::int64_t> n;
    std::vector<const void*> ptrs;
    for (const auto& x : tensors) n.push_back(x.numel()), ptrs.push_back(x.data_ptr());
    Tensor flag = fx::full({}, 7.0, {.device = d});
    table(d).nonfinite_check(d.index, t, n.size(), n.data(), ptrs.data(), divisor, flag.data_ptr());
    return flag.item<float>();
}

// One non-finite element anywhere, in any tensor, of any sign, makes the flag NaN; none makes it 0.
// Tensors of 70,001 elements are split among threads, so the element sits at a slice's start, middle
// or end; an empty tensor is passed over.
TEST(FusedKernels, NonfiniteCheckFindsEveryNonFiniteElement) {
    const std::int64_t sizes[] = {0, 5, 70001, 1000};
    for (DType t : kTypes)
        for (const auto& d : devices_with(t, &be::Backend::nonfinite_check)) {
            std::vector<Tensor> finite;
            for (int i = 0; i < 4; ++i) finite.push_back(values(sizes[i], t, d, 100, 3 + i, false));
            EXPECT_EQ(nonfinite_flag(d, t, finite, 1), 0.0f) << fx::name(t) << " on " << d.str();
            EXPECT_EQ(nonfinite_flag(d, t, finite, 1024), 0.0f) << fx::name(t) << " on " << d.str();
            for (int i = 1; i < 4; ++i)
                for (std::int64_t at : {std::int64_t(0), sizes[i] / 2, sizes[i] - 1})
                    for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
                        auto v = finite[std::size_t(i)].to(DType::f64).to_vector<double>();
                        v[std::size_t(at)] = bad;
                        auto poisoned = finite;
                        poisoned[std::size_t(i)] = fx::tensor(v, {sizes[i]}).to(t) | d;
                        const std::string what = std::string(fx::name(t)) + " on " + d.str() + ": " +
                                                 std::to_string(bad) + " at " + std::to_string(at) + " of tensor " +
                                                 std::to_string(i);
                        EXPECT_TRUE(std::isnan(nonfinite_flag(d, t, poisoned, 1))) << what;
                        EXPECT_TRUE(std::isnan(nonfinite_flag(d, t, poisoned, 1024))) << what << ", divided";
                    }
        }
}

// Divided, a finite element can overflow: the quotient is what is checked, in t's compute type.
TEST(FusedKernels, NonfiniteCheckReadsTheQuotients) {
    for (DType t : {DType::f32, DType::bf16})
        for (const auto& d : devices_with(t, &be::Backend::nonfinite_check)) {
            const Tensor big = fx::tensor(std::vector<double>{1.0, -3e38, 2.0}, {3}).to(t) | d;
            EXPECT_EQ(nonfinite_flag(d, t, {big}, 1), 0.0f) << fx::name(t);
            EXPECT_TRUE(std::isnan(nonfinite_flag(d, t, {big}, 1.0 / 1024))) << fx::name(t);
        }
    for (const auto& d : devices_with(DType::f16, &be::Backend::nonfinite_check)) {
        // 60000 / 0.5 leaves f16's range but not f32's, where an f16 gradient is divided.
        const Tensor big = fx::tensor(std::vector<double>{60000.0}, {1}).to(DType::f16) | d;
        EXPECT_EQ(nonfinite_flag(d, DType::f16, {big}, 0.5), 0.0f);
    }
}

// mixed_optimiser_steps against, per tensor, the casts, the division and optimiser_step on f32
// that MixedPrecision composes where a table lacks it.
TEST(FusedKernels, MixedOptimiserStepsAreTheCastsAndStepsTheyReplace) {
    struct Rule {
        be::Optimiser rule;
        int states;
    };
    for (DType t : {DType::f16, DType::bf16})
        for (const auto& d : devices_with(t, &be::Backend::mixed_optimiser_steps))
            for (Rule r : {Rule{be::Optimiser::descent, 0}, Rule{be::Optimiser::momentum, 1},
                           Rule{be::Optimiser::adam, 2}, Rule{be::Optimiser::amsgrad, 3}})
                for (double divisor : {1.0, 1024.0}) {
                    const be::Backend& b = table(d);
                    const std::int64_t sizes[] = {5, 1000, 70001};
                    std::vector<Tensor> fused, composed;  // per tensor: parameter, gradient, three states, copy
                    std::vector<void*> ptrs;
                    std::vector<be::OptimiserStep> hps;
                    for (int i = 0; i < 3; ++i)
                        hps.push_back({.eta = 1e-2 * (i + 1), .rho = 0.9, .beta1 = 0.9, .beta2 = 0.999,
                                       .epsilon = 1e-8, .t = 3 + i});
                    for (int i = 0; i < 3; ++i)
                        for (int k = 0; k < 6; ++k) {
                            const bool state = k >= 2 && k <= 4, used = !state || k - 2 < r.states;
                            const int seed = 40 + 6 * i + k;
                            Tensor v;
                            if (k == 1) v = values(sizes[i], t, d, 1000, seed);  // specials too
                            else if (k == 5) v = fx::zeros({sizes[i]}, {.dtype = t, .device = d});
                            else if (used) v = k == 3 ? fx::abs(values(sizes[i], DType::f32, d, 1, seed, false))
                                                      : values(sizes[i], DType::f32, d, 1, seed, false);
                            composed.push_back(v.defined() ? v.clone() : v);
                            fused.push_back(v);
                            ptrs.push_back(v.defined() ? v.data_ptr() : nullptr);
                        }
                    for (int i = 0; i < 3; ++i) {
                        auto at = [&](int k) -> Tensor& { return composed[std::size_t(6 * i + k)]; };
                        auto p = [&](int k) { return at(k).defined() ? at(k).data_ptr() : nullptr; };
                        Tensor g = at(1).to(DType::f32);
                        if (divisor != 1) g = g / divisor;
                        b.optimiser_step(d.index, r.rule, DType::f32, sizes[i], p(0), g.data_ptr(), p(2), p(3), p(4),
                                         &hps[std::size_t(i)]);
                        at(5).copy_(at(0));
                    }
                    const be::OptimiserStep* hp[] = {&hps[0], &hps[1], &hps[2]};
                    b.mixed_optimiser_steps(d.index, r.rule, t, 3, sizes, hp, divisor, ptrs.data());
                    for (std::size_t k = 0; k < fused.size(); ++k)
                        if (fused[k].defined() && k % 6 != 1)
                            expect_same(fused[k], composed[k],
                                        "mixed_optimiser_steps rule " + std::to_string(int(r.rule)) + " " +
                                            fx::name(t) + " divisor " + std::to_string(divisor) + " buffer " +
                                            std::to_string(k));
                }
}

TEST(FusedKernels, MixedOptimiserStepsRefuseGradientsThatAreNotHalf) {
    for (const auto& d : devices_with(DType::f32, &be::Backend::mixed_optimiser_steps)) {
        Tensor p = fx::zeros({4}, {.device = d}), g = fx::ones({4}, {.device = d}), c = fx::zeros({4}, {.device = d});
        const std::int64_t n = 4;
        const be::OptimiserStep hp{.eta = 0.1};
        const be::OptimiserStep* hps[] = {&hp};
        void* ptrs[] = {p.data_ptr(), g.data_ptr(), nullptr, nullptr, nullptr, c.data_ptr()};
        EXPECT_THROW(table(d).mixed_optimiser_steps(d.index, be::Optimiser::descent, DType::f32, 1, &n, hps, 1, ptrs),
                     fx::DTypeError);
        EXPECT_EQ(p.to_vector<float>(), std::vector<float>(4, 0.0f)) << "nothing written";
    }
}

}  // namespace
