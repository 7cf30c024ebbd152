// test_ops.cpp — runs every entry of op_cases.hpp: forward values and gradients against PyTorch
// (Debian's python3-torch, skipped with the reason when missing), gradients against central finite
// differences in f64, and forward and gradients on every other functional backend against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <nlohmann/json.hpp>

#include "op_cases.hpp"
#include "other_devices.hpp"
#include "torch_reference.hpp"

namespace {

using fx::Tensor;
using json = nlohmann::json;

std::uint64_t hash_name(const std::string& s) { return fx_test::fnv1a(s); }

std::vector<Tensor> make_inputs(const OpCase& c) {
    fx::seed(hash_name(c.name));
    std::vector<Tensor> xs;
    for (const auto& shape : c.shapes) {
        Tensor x = fx::randn(shape, {.dtype = fx::DType::f64});
        if (c.domain == Domain::positive) x = fx::abs(x) + 0.5;
        if (c.domain == Domain::away_from_zero) x = fx::sign(x) * (fx::abs(x) + 0.1);
        xs.push_back(x);
    }
    return xs;
}

Tensor weights_for(const OpCase& c, const std::vector<Tensor>& xs) {
    fx::seed(hash_name(c.name) + 1);
    return fx::randn(c.f(xs).shape(), {.dtype = fx::DType::f64});
}

struct Result {
    Tensor out;
    std::vector<Tensor> grads;
};

// The output and the gradients of sum(f(xs) * w), on whatever device the inputs are.
Result evaluate(const OpCase& c, const std::vector<Tensor>& xs, const Tensor& w) {
    auto [value, grads] = fx::withgradient([&](const std::vector<Tensor>& v) { return fx::sum(c.f(v) * w); }, xs);
    (void)value;
    fx::NoGrad no_grad;
    return {c.f(xs), grads};
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol,
                  const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << what << " at element " << i;
}

using fx_test::torch_importable;
using fx_test::TorchResults;

json tensor_json(const Tensor& t) { return {{"shape", t.shape()}, {"data", t.to_vector<double>()}}; }

// Computed once in one Python process and cached under a key of the inputs and the script's text,
// so that an edited script or table never reuses stale results.
TorchResults compute_torch_results(const std::string& script) {
    json cases = json::array();
    for (const auto& c : op_cases()) {
        auto xs = make_inputs(c);
        json inputs = json::array();
        for (const auto& x : xs) inputs.push_back(tensor_json(x));
        cases.push_back({{"name", c.name}, {"expr", c.torch}, {"inputs", inputs}, {"weights", tensor_json(weights_for(c, xs))}});
    }
    return fx_test::run_torch_script(script, cases.dump(), "op_cases");
}

const TorchResults& torch_results() {
    static const TorchResults results = compute_torch_results(FLUXION_SOURCE_DIR "/tests/reference/torch_ops.py");
    return results;
}

using fx::testing::other_devices;

}  // namespace

// Test names and failure messages show the case's name, not its bytes.
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

namespace {

class OpTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpTest, MatchesPyTorch) {
    const auto& c = GetParam();
    const TorchResults& torch = torch_results();
    if (!torch.skip.empty()) GTEST_SKIP() << torch.skip;
    ASSERT_TRUE(torch.error.empty()) << torch.error;
    ASSERT_TRUE(torch.results.contains(c.name)) << "no PyTorch result for " << c.name << " (" << c.torch << ")";
    const auto& ref = torch.results[c.name];
    auto xs = make_inputs(c);
    auto r = evaluate(c, xs, weights_for(c, xs));
    EXPECT_EQ(r.out.shape(), ref["shape"].get<fx::Shape>());
    expect_close(r.out.to_vector<double>(), ref["out"].get<std::vector<double>>(), 1e-10, 1e-12, c.name + " forward");
    for (std::size_t i = 0; i < xs.size(); ++i) {
        if (ref["grads"][i].is_null()) continue;
        expect_close(r.grads[i].to_vector<double>(), ref["grads"][i].get<std::vector<double>>(), 1e-9, 1e-11,
                     c.name + " gradient of input " + std::to_string(i));
    }
}

TEST(TorchReference, AFailingScriptIsAnErrorNotASkip) {
    if (!torch_importable()) GTEST_SKIP() << "PyTorch is not importable by /usr/bin/python3";
    std::string script = FLUXION_BINARY_DIR "/torch_ops_failing.py";
    std::ofstream(script) << "raise SystemExit(3)\n";
    auto r = compute_torch_results(script);
    EXPECT_EQ(r.skip, "");
    EXPECT_NE(r.error.find("torch_ops_failing.py failed"), std::string::npos) << r.error;
}

TEST(TorchReference, ResultsAreCachedPerScriptText) {
    // The script needs Python, not PyTorch (a bare machine with the GPU bundle has neither).
    if (std::system("/usr/bin/python3 -c '' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no /usr/bin/python3";
    std::string script = FLUXION_BINARY_DIR "/torch_ops_constant.py";
    for (int value : {1, 2}) {
        std::ofstream(script) << "import json, sys\njson.dump({'value': " << value << "}, open(sys.argv[2], 'w'))\n";
        auto r = compute_torch_results(script);
        ASSERT_EQ(r.error, "");
        EXPECT_EQ(r.results["value"], value) << "an edited script reused the cached results of its previous text";
    }
}

TEST_P(OpTest, GradientMatchesFiniteDifferences) {
    const auto& c = GetParam();
    if (!c.finite_differences) GTEST_SKIP() << c.name << " rounds its input; its gradient is checked against PyTorch";
    auto xs = make_inputs(c);
    Tensor w = weights_for(c, xs);
    auto r = evaluate(c, xs, w);
    fx::NoGrad no_grad;
    const double eps = 1e-6;
    for (std::size_t i = 0; i < xs.size(); ++i) {
        auto base = xs[i].to_vector<double>();
        std::vector<double> numeric(base.size());
        for (std::size_t j = 0; j < base.size(); ++j) {
            auto at = [&](double delta) {
                auto v = base;
                v[j] += delta;
                auto moved = xs;
                moved[i] = fx::tensor(v, xs[i].shape());
                return fx::sum(c.f(moved) * w).item();
            };
            numeric[j] = (at(eps) - at(-eps)) / (2 * eps);
        }
        expect_close(r.grads[i].to_vector<double>(), numeric, 1e-5, 1e-6, c.name + " gradient of input " + std::to_string(i));
    }
}

TEST_P(OpTest, OtherBackendsMatchCpu) {
    const auto& c = GetParam();
    if (other_devices().empty()) GTEST_SKIP() << "no backend besides the CPU is functional";
    for (auto dtype : {fx::DType::f64, fx::DType::f32}) {
        auto xs = make_inputs(c);
        Tensor w = weights_for(c, xs).to(dtype);
        for (auto& x : xs) x = x.to(dtype);
        auto cpu = evaluate(c, xs, w);
        double rtol = dtype == fx::DType::f64 ? 1e-10 : 1e-4, atol = dtype == fx::DType::f64 ? 1e-12 : 1e-5;
        for (const auto& d : other_devices(dtype)) {  // those lacking a kernel for dtype are skipped
            std::vector<Tensor> moved;
            for (const auto& x : xs) moved.push_back(x | d);
            auto dev = evaluate(c, moved, w | d);
            std::string where = c.name + " on " + d.str() + " (" + fx::name(dtype) + ")";
            EXPECT_EQ(dev.out.device(), d) << where;
            expect_close((dev.out | fx::cpu).to_vector<double>(), cpu.out.to_vector<double>(), rtol, atol, where + " forward");
            for (std::size_t i = 0; i < xs.size(); ++i) {
                EXPECT_EQ(dev.grads[i].device(), d) << where;
                expect_close((dev.grads[i] | fx::cpu).to_vector<double>(), cpu.grads[i].to_vector<double>(), rtol, atol,
                             where + " gradient of input " + std::to_string(i));
            }
        }
    }
}

// The registry (src/core/elementwise_formulas.def) makes fx::name(x) for each FN line; each of
// those is an op case here, so a new op runs against PyTorch, finite differences and every backend.
TEST(OpRegistry, EveryRegisteredFunctionHasAnOpCase) {
    std::vector<std::string> registered;
#define FX_UNARY(name, code, reads, api, value, gradient) FX_NAME_##api(name)
#define FX_NAME_FN(name) registered.push_back(#name);
#define FX_NAME_OWN(name)
#include "core/elementwise_formulas.def"
#undef FX_NAME_FN
#undef FX_NAME_OWN
    ASSERT_GE(registered.size(), 16u);
    for (const auto& name : registered) {
        bool found = false;
        for (const auto& c : op_cases()) found |= c.name == name;
        EXPECT_TRUE(found) << "fx::" << name << " is in the op registry but has no case in tests/op_cases.hpp";
    }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTest, ::testing::ValuesIn(op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

}  // namespace

// The test backend plugin is a second device for OtherBackendsMatchCpu.
int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
