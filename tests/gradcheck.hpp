// gradcheck.hpp — checks autodiff gradients against central finite differences, for tests.
//
//   EXPECT_TRUE(fx::testing::gradcheck([](const fx::Dense& d, const fx::Tensor& x) {
//       return fx::sum(fx::square(d(x))); }, dense, x));
//   EXPECT_TRUE(fx::testing::gradcheck({.eps = 1e-4}, f, model, x));   // with options
//
// Every floating tensor of every argument (layers, Chains, FLUXION_FUNCTOR types, tensors) is cast
// to f64 first, so differences of 1e-6 are meaningful; integer tensors (indices) are left as they
// are. f must return a one-element tensor and be deterministic (reseed inside f for Dropout).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <concepts>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "fluxion/autodiff.hpp"
#include "fluxion/functor.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::testing {

struct GradcheckOptions {
    double eps = 1e-6;   // step of the central difference
    double atol = 1e-6;  // |analytic - numeric| <= atol + rtol·|numeric|
    double rtol = 1e-4;
};

namespace detail {

template <class T> T as_f64(const T& x) {
    return fmap([](const Tensor& t) { return is_floating(t.dtype()) ? t.to(DType::f64) : t; }, x);
}

struct Leaf {
    std::string path;
    Tensor tensor;
};

template <class T> std::vector<Leaf> leaves(const T& x) {
    std::vector<Leaf> out;
    visit_tensors(x, [&](const std::string& path, const Tensor& t) {
        if (t.defined()) out.push_back({path, t});
    });
    return out;
}

}  // namespace detail

template <class F, class... Args>
::testing::AssertionResult gradcheck(const GradcheckOptions& o, F&& f, const Args&... args) {
    auto inputs = std::make_tuple(detail::as_f64(args)...);
    auto call = [&] { return std::apply([&](const auto&... a) { return f(a...); }, inputs); };
    // Analytic gradients, one list of leaves per argument.
    std::vector<std::vector<detail::Leaf>> analytic;
    {
        auto r = std::apply([&](const auto&... a) { return withgradient(f, a...); }, inputs);
        if constexpr (sizeof...(Args) == 1) analytic.push_back(detail::leaves(r.grad));
        else std::apply([&](const auto&... g) { (analytic.push_back(detail::leaves(g)), ...); }, r.grad);
    }
    std::ostringstream failures;
    int failed = 0, checked = 0;
    std::size_t arg = 0;
    auto check_argument = [&](auto& a) {
        auto params = detail::leaves(a);
        for (std::size_t k = 0; k < params.size(); ++k) {
            Tensor t = params[k].tensor;
            if (!is_floating(t.dtype())) continue;
            std::vector<double> values = t.to_vector<double>();
            std::vector<double> grad = analytic[arg][k].tensor.template to_vector<double>();
            auto set = [&](const std::vector<double>& v) {
                t.copy_(tensor(v, t.shape(), {.dtype = DType::f64, .device = t.device()}));
            };
            for (std::size_t j = 0; j < values.size(); ++j) {
                std::vector<double> v = values;
                double up, down;
                {
                    NoGrad no_grad;
                    v[j] = values[j] + o.eps;
                    set(v);
                    up = call().item();
                    v[j] = values[j] - o.eps;
                    set(v);
                    down = call().item();
                }
                set(values);
                double numeric = (up - down) / (2 * o.eps);
                ++checked;
                if (!(std::abs(grad[j] - numeric) <= o.atol + o.rtol * std::abs(numeric))) {
                    if (++failed <= 8)
                        failures << "\n  argument " << arg << " '" << params[k].path << "' element " << j
                                 << ": autodiff " << grad[j] << ", finite difference " << numeric;
                }
            }
        }
        ++arg;
    };
    std::apply([&](auto&... a) { (check_argument(a), ...); }, inputs);
    if (failed == 0) return ::testing::AssertionSuccess() << checked << " elements agree";
    return ::testing::AssertionFailure() << failed << " of " << checked << " gradient elements differ:" << failures.str();
}

template <class F, class... Args>
    requires(std::invocable<F&, const Args&...>)
::testing::AssertionResult gradcheck(F&& f, const Args&... args) {
    return gradcheck(GradcheckOptions{}, f, args...);
}

}  // namespace fluxion::testing
