// test_ops_zero_size.cpp — every entry of op_cases.hpp again, with a zero-length leading axis,
// against PyTorch (tests/reference/torch_zero_size.py; skipped with the reason where PyTorch cannot
// be imported): the same output shape, values (the empty sum's 0, the empty mean's NaN) and
// gradients (zeros for a weight that met no data), or an fx::Error where PyTorch raises one; and on
// every other functional backend, the CPU's results or its error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "op_cases.hpp"
#include "other_devices.hpp"
#include "torch_reference.hpp"

namespace {

using fx::Tensor;
using json = nlohmann::json;

// The case's shapes with the leading axis of x0 set to 0, and of every other input of x0's rank and
// leading length: the batch axis, where the table's inputs share one.
std::vector<fx::Shape> zero_size_shapes(const OpCase& c) {
    std::vector<fx::Shape> shapes = c.shapes;
    const fx::Shape first = c.shapes[0];
    for (auto& s : shapes)
        if (!s.empty() && s.size() == first.size() && s[0] == first[0]) s[0] = 0;
    return shapes;
}

std::vector<Tensor> make_inputs(const OpCase& c) {
    fx::seed(fx_test::fnv1a(c.name));
    std::vector<Tensor> xs;
    for (const auto& shape : zero_size_shapes(c)) {
        Tensor x = fx::randn(shape, {.dtype = fx::DType::f64});
        if (c.domain == Domain::positive) x = fx::abs(x) + 0.5;
        if (c.domain == Domain::away_from_zero) x = fx::sign(x) * (fx::abs(x) + 0.1);
        xs.push_back(x);
    }
    return xs;
}

const fx_test::TorchResults& torch_results() {
    static const fx_test::TorchResults results = [] {
        json cases = json::array();
        for (const auto& c : op_cases()) {
            json inputs = json::array();
            for (const auto& x : make_inputs(c))
                inputs.push_back({{"shape", x.shape()}, {"data", x.to_vector<double>()}});
            cases.push_back({{"name", c.name}, {"expr", c.torch}, {"inputs", inputs}});
        }
        return fx_test::run_torch_script(FLUXION_SOURCE_DIR "/tests/reference/torch_zero_size.py", cases.dump(),
                                         "zero_size");
    }();
    return results;
}

// The script's values: numbers, or "nan", "inf" and "-inf".
std::vector<double> numbers(const json& values) {
    std::vector<double> out;
    for (const auto& v : values) out.push_back(v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>());
    return out;
}

void expect_same(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(want[i])) {
            EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i << " is " << got[i] << ", PyTorch's NaN";
            continue;
        }
        if (std::isinf(want[i])) EXPECT_EQ(got[i], want[i]) << what << " element " << i;
        else EXPECT_NEAR(got[i], want[i], 1e-12 + 1e-10 * std::abs(want[i])) << what << " element " << i;
    }
}

}  // namespace

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

namespace {

struct Result {
    Tensor out;
    std::vector<Tensor> grads;
};

// The output and the gradients of Σ f(xs)·w, w = 1 + 0.5 i over the flattened output, on the
// inputs' device.
Result evaluate(const OpCase& c, const std::vector<Tensor>& xs) {
    Tensor out = c.f(xs);
    Tensor w = (fx::arange(0, double(out.numel()), 1, {.dtype = xs[0].dtype()}) * 0.5 + 1.0).reshape(out.shape());
    w = w | out.device();
    return {out, fx::withgradient([&](const std::vector<Tensor>& v) { return fx::sum(c.f(v) * w); }, xs).grad};
}

class ZeroSize : public ::testing::TestWithParam<OpCase> {};

TEST_P(ZeroSize, MatchesPyTorch) {
    const auto& c = GetParam();
    const auto& torch = torch_results();
    if (!torch.skip.empty()) GTEST_SKIP() << torch.skip;
    ASSERT_TRUE(torch.error.empty()) << torch.error;
    const auto& ref = torch.results.at(c.name);
    auto xs = make_inputs(c);
    std::string shapes;
    for (const auto& x : xs) shapes += fx::to_string(x.shape()) + " ";
    const std::string what = c.name + " on " + shapes;
    if (ref.contains("error")) {
        EXPECT_THROW(c.f(xs), fx::Error) << what << ": PyTorch raises " << ref["error"].get<std::string>();
        return;
    }
    Result r;
    try {
        r = evaluate(c, xs);
    } catch (const fx::Error& e) {
        FAIL() << what << " raised, where PyTorch gives shape " << ref["shape"].dump() << ": " << e.what();
    }
    EXPECT_EQ(r.out.shape(), ref["shape"].get<fx::Shape>()) << what;
    expect_same(r.out.to_vector<double>(), numbers(ref["out"]), what + " output");
    for (std::size_t i = 0; i < xs.size(); ++i) {
        if (ref["grads"][i].is_null()) continue;
        ASSERT_EQ(r.grads[i].shape(), xs[i].shape()) << what << " gradient of input " << i;
        expect_same(r.grads[i].to_vector<double>(), numbers(ref["grads"][i]),
                    what + " gradient of input " + std::to_string(i));
    }
}

TEST_P(ZeroSize, OtherBackendsMatchCpu) {
    const auto& c = GetParam();
    if (fx::testing::other_devices().empty()) GTEST_SKIP() << "no backend besides the CPU is functional";
    for (auto dtype : {fx::DType::f64, fx::DType::f32}) {
        auto xs = make_inputs(c);
        for (auto& x : xs) x = x.to(dtype);
        bool cpu_raised = false;
        Result cpu;
        try {
            cpu = evaluate(c, xs);
        } catch (const fx::Error&) {
            cpu_raised = true;
        }
        for (const auto& d : fx::testing::other_devices(dtype)) {
            const std::string where = c.name + " on " + d.str() + " (" + fx::name(dtype) + ")";
            std::vector<Tensor> moved;
            for (const auto& x : xs) moved.push_back(x | d);
            if (cpu_raised) {
                EXPECT_THROW(evaluate(c, moved), fx::Error) << where << ": the CPU raises";
                continue;
            }
            Result dev;
            try {
                dev = evaluate(c, moved);
            } catch (const fx::Error& e) {
                ADD_FAILURE() << where << " raised where the CPU does not: " << e.what();
                continue;
            }
            EXPECT_EQ(dev.out.shape(), cpu.out.shape()) << where;
            expect_same((dev.out | fx::cpu).to_vector<double>(), cpu.out.to_vector<double>(), where + " output");
            for (std::size_t i = 0; i < xs.size(); ++i)
                expect_same((dev.grads[i] | fx::cpu).to_vector<double>(), cpu.grads[i].to_vector<double>(),
                            where + " gradient of input " + std::to_string(i));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Ops, ZeroSize, ::testing::ValuesIn(op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

}  // namespace

// The test backend plugin is a second device for OtherBackendsMatchCpu.
int main(int argc, char** argv) {
    setenv("FLUXION_PLUGIN_PATH", FLUXION_TEST_PLUGIN_DIR, 0);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
