// test_differential.cpp — seeded random differential testing against PyTorch (issue 15): N random
// configurations of every op family (differential_cases.hpp), their forward values and the gradient
// of every input compared with Debian's PyTorch on the same inputs in the same dtype. Skipped with
// the reason without PyTorch; a broken script is a failure. FLUXION_DIFF_SEED, FLUXION_DIFF_FIRST
// and FLUXION_DIFF_COUNT choose the configurations (a failure names the seed and index to re-run);
// scripts/differential_long.sh runs many seeds. The op table (op_cases.hpp, which test_ops compares
// with PyTorch in f64) is compared here in f32 too, with the same f32 tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "differential_cases.hpp"
#include "op_cases.hpp"
#include "torch_reference.hpp"

namespace {

namespace fx = fluxion;
using fx::Tensor;
using fx_test::DiffConfig;
using json = nlohmann::json;

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// The short run of `make test`: a few hundred configurations, a few seconds.
constexpr std::uint64_t default_seed = 20261125, default_count = 300;

std::vector<Tensor> make_inputs(const DiffConfig& c, std::uint64_t seed, std::uint64_t index) {
    fx::seed(fx_test::fnv1a(std::to_string(seed) + "/" + std::to_string(index)));
    std::vector<Tensor> xs;
    for (std::size_t i = 0; i < c.shapes.size(); ++i) {
        Tensor x = fx::randn(c.shapes[i], {.dtype = fx::DType::f64});
        if (c.values[i] == fx_test::Values::positive) x = fx::abs(x) + 0.5;
        if (c.values[i] == fx_test::Values::away_from_zero) x = fx::sign(x) * (fx::abs(x) + 0.1);
        if (c.values[i] == fx_test::Values::unit) x = fx::rand(c.shapes[i], {.dtype = fx::DType::f64}) * 0.9 + 0.05;
        if (c.values[i] == fx_test::Values::nonfinite) {
            auto v = x.to_vector<double>();
            auto u = fx::rand({std::int64_t(v.size())}, {.dtype = fx::DType::f64}).to_vector<double>();
            const double special[] = {std::nan(""), INFINITY, -INFINITY};
            for (std::size_t j = 0; j < v.size(); ++j)
                if (u[j] < 0.2) v[j] = special[int(u[j] * 15)];
            x = fx::tensor(v, c.shapes[i]);
        }
        xs.push_back(x.to(c.dtype));
    }
    return xs;
}

// fluxion's answer: the output and the gradients of sum(output * weights), or the error it threw.
// The weights continue the random stream that make_inputs seeded, so they too depend only on the
// seed and the index.
struct Answer {
    Tensor out, weights;
    std::vector<Tensor> grads;
    std::string error;
};

Answer fluxion_answer(const DiffConfig& c, const std::vector<Tensor>& xs) {
    Answer a;
    try {
        {
            fx::NoGrad no_grad;
            a.out = c.f(xs);
        }
        a.weights = fx::randn(a.out.shape(), {.dtype = fx::DType::f64}).to(c.dtype);
        auto [value, grads] =
            fx::withgradient([&](const std::vector<Tensor>& v) { return fx::sum(c.f(v) * a.weights); }, xs);
        (void)value;
        a.grads = grads;
    } catch (const fx::Error& e) {
        a.error = e.what();
    }
    return a;
}

// Non-finite numbers as the strings "nan", "inf" and "-inf", which JSON cannot hold.
json tensor_json(const Tensor& t) {
    json data = json::array();
    for (double v : t.to_vector<double>())
        data.push_back(std::isfinite(v) ? json(v) : json(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"));
    return {{"shape", t.shape()}, {"data", data}};
}

std::vector<double> numbers(const json& values) {
    std::vector<double> v;
    for (const auto& x : values) v.push_back(x.is_string() ? std::stod(x.get<std::string>()) : x.get<double>());
    return v;
}

// Stated tolerances, element by element. f64: |got - want| <= rtol |want| + atol max(1, max |want|),
// want PyTorch's f64 answer; the atol term scales with the tensor's largest element so that a sum
// that cancels to near zero is judged by the size of its terms' rounding, not by its own. f32:
// |got - exact| <= rtol |exact| + atol + 4 |want - exact| + bound, exact PyTorch's answer computed
// in f64 from the same f32 inputs, want its f32 answer: fluxion may round differently from PyTorch
// but not much worse, element by element (a precision loss like that of a naive log-softmax with
// logits of 1e4 is caught). Where the output is a sum of products (DiffConfig::sum_of_products),
// or the gradient a sum whose terms the configuration names (DiffConfig::gradient_terms), bound is
// the classic bound on the rounding error of a sum of K terms in any order, eps K sum |term| (eps
// of f32; K and sum |term| at that element, from the script), so that a sum that cancels, where
// PyTorch's own f32 answer may be exact by luck, is judged by the size of its terms; a dropped or
// misplaced term, of size about sum |term| / K, stays far beyond it while K^2 << 1 / eps.
struct Tolerance {
    double rtol, atol, torch_error_factor;
};
Tolerance tolerance(fx::DType dtype) {
    return dtype == fx::DType::f64 ? Tolerance{1e-9, 1e-11, 0} : Tolerance{1e-5, 2e-6, 4};
}

// The first element where got and want differ beyond the tolerance, described; empty if none.
// `exact` is want computed in f64 (for f32), or empty; `bound` the rounding bound of each element
// (above), or empty; non-finite values must match want's.
std::string difference(const std::vector<double>& got, const std::vector<double>& want,
                       const std::vector<double>& exact, const std::vector<double>& bound, Tolerance tol) {
    if (got.size() != want.size())
        return std::to_string(got.size()) + " elements, PyTorch " + std::to_string(want.size());
    const std::vector<double>& ref = exact.size() == want.size() ? exact : want;
    double scale = 1;
    for (double w : ref)
        if (std::isfinite(w) && &ref == &want) scale = std::max(scale, std::abs(w));
    for (std::size_t i = 0; i < got.size(); ++i) {
        double g = got[i], w = want[i], e = std::isfinite(ref[i]) ? ref[i] : w;
        double b = bound.size() == got.size() ? bound[i] : 0;
        bool same = std::isnan(g) ? std::isnan(w)
                    : std::isinf(g) || !std::isfinite(w)
                        ? g == w
                        : std::abs(g - e) <=
                              tol.rtol * std::abs(e) + tol.atol * scale + tol.torch_error_factor * std::abs(w - e) + b;
        if (!same) {
            std::ostringstream s;
            s.precision(10);
            s << "element " << i << ": " << g << ", PyTorch " << w;
            if (&ref == &exact) s << " (" << e << " in f64)";
            if (b > 0) s << ", bound from the terms' size " << b;
            s << ", difference " << std::abs(g - w);
            return s.str();
        }
    }
    return "";
}

// What differs between fluxion's answer and PyTorch's, or empty.
std::string compare(const DiffConfig& c, const Answer& a, const json& ref) {
    if (ref.contains("error") || !a.error.empty()) {
        if (ref.contains("error") && !a.error.empty()) return "";  // both refuse it
        if (!a.error.empty()) return "fluxion refuses what PyTorch accepts: " + a.error;
        return "PyTorch refuses (" + ref["error"].get<std::string>() + ") but fluxion gives shape " +
               fx::to_string(a.out.shape());
    }
    if (a.out.shape() != ref["shape"].get<fx::Shape>())
        return "output shape " + fx::to_string(a.out.shape()) + ", PyTorch " +
               fx::to_string(ref["shape"].get<fx::Shape>());
    Tolerance tol = tolerance(c.dtype);
    bool exact = ref.contains("f64") && !ref["f64"].contains("error");
    // eps K sum |term| element by element, from the script's K sum |term| (0 where not finite)
    bool terms = ref.contains("terms") && !ref["terms"].contains("error");
    auto bound = [](std::vector<double> sizes) {
        for (double& v : sizes) v = std::isfinite(v) ? std::numeric_limits<float>::epsilon() * std::abs(v) : 0;
        return sizes;
    };
    auto out = numbers(ref["out"]), out64 = exact ? numbers(ref["f64"]["out"]) : std::vector<double>();
    auto out_bound = terms ? bound(numbers(ref["terms"]["out"])) : std::vector<double>();
    if (auto d = difference(a.out.to_vector<double>(), out, out64, out_bound, tol); !d.empty()) return "forward, " + d;
    for (std::size_t i = 0; i < a.grads.size(); ++i) {
        auto got = a.grads[i].to_vector<double>();
        auto grad = [&](const json& g) { return g.is_null() ? std::vector<double>(got.size(), 0.0) : numbers(g); };
        auto want = grad(ref["grads"][i]), want64 = exact ? grad(ref["f64"]["grads"][i]) : std::vector<double>();
        auto grad_bound = terms ? bound(grad(ref["terms"]["grads"][i])) : std::vector<double>();
        if (auto d = difference(got, want, want64, grad_bound, tol); !d.empty())
            return "gradient of x" + std::to_string(i) + ", " + d;
    }
    return "";
}

struct DiffRun {
    std::uint64_t seed, first, count;
    std::vector<DiffConfig> configs;
    std::vector<std::vector<Tensor>> inputs;
    std::vector<Answer> answers;
};

DiffRun make_run(std::uint64_t seed, std::uint64_t first, std::uint64_t count) {
    DiffRun run{seed, first, count, {}, {}, {}};
    for (std::uint64_t i = first; i < first + count; ++i) {
        run.configs.push_back(fx_test::differential_config(seed, i));
        run.inputs.push_back(make_inputs(run.configs.back(), seed, i));
        run.answers.push_back(fluxion_answer(run.configs.back(), run.inputs.back()));
    }
    return run;
}

fx_test::TorchResults torch_answers(const DiffRun& run, const std::string& script) {
    json configs = json::array();
    for (std::size_t k = 0; k < run.configs.size(); ++k) {
        json inputs = json::array();
        for (const auto& x : run.inputs[k]) inputs.push_back(tensor_json(x));
        const Answer& a = run.answers[k];
        configs.push_back({{"expr", run.configs[k].torch},
                           {"dtype", fx::name(run.configs[k].dtype)},
                           {"inputs", inputs},
                           {"sum_of_products", run.configs[k].sum_of_products},
                           {"gradient_terms", run.configs[k].gradient_terms},
                           {"terms_at", run.configs[k].terms_at},
                           {"weights", a.error.empty() ? tensor_json(a.weights) : json()}});
    }
    return fx_test::run_torch_script(script, configs.dump(), "differential");
}

const char* const script = FLUXION_SOURCE_DIR "/tests/reference/torch_differential.py";

TEST(Differential, RandomConfigurationsMatchPyTorch) {
    std::uint64_t seed = env_or("FLUXION_DIFF_SEED", default_seed), first = env_or("FLUXION_DIFF_FIRST", 0),
                  count = env_or("FLUXION_DIFF_COUNT", default_count);
    DiffRun run = make_run(seed, first, count);
    auto torch = torch_answers(run, script);
    if (!torch.skip.empty()) GTEST_SKIP() << torch.skip;
    ASSERT_TRUE(torch.error.empty()) << torch.error;
    ASSERT_EQ(torch.results.size(), run.configs.size()) << script << " answered a different number of configurations";
    std::size_t mismatches = 0, refused = 0;
    std::map<std::string, std::pair<std::size_t, std::size_t>> per_family;  // compared, refused by both
    for (std::size_t k = 0; k < run.configs.size(); ++k) {
        const bool both_refuse = !run.answers[k].error.empty() && torch.results[k].contains("error");
        refused += both_refuse;
        auto& [compared_here, refused_here] = per_family[run.configs[k].family];
        ++(both_refuse ? refused_here : compared_here);
        std::string d = compare(run.configs[k], run.answers[k], torch.results[k]);
        if (d.empty()) continue;
        ++mismatches;
        std::uint64_t index = first + k;
        ADD_FAILURE() << "seed " << seed << ", configuration " << index << ": " << d << "\n  " << run.configs[k].repro()
                      << "\n  re-run alone: FLUXION_DIFF_SEED=" << seed << " FLUXION_DIFF_FIRST=" << index
                      << " FLUXION_DIFF_COUNT=1 tests/test_differential";
    }
    std::cout << "[differential] seed " << seed << ": " << count << " configurations from " << first << ", "
              << mismatches << " mismatches, " << refused << " refused by both\n";
    // A configuration both sides refuse passes without comparing anything: the refusals are bounded
    // (at most kRefusedShare of each family's configurations, with room for small families), so that
    // a generator drifting into errors cannot turn the run into agreement about errors.
    constexpr double kRefusedShare = 0.25;
    for (const auto& [family, counts] : per_family) {
        const auto [compared, refused_both] = counts;
        std::cout << "[differential]   " << family << ": " << compared << " compared, " << refused_both
                  << " refused by both\n";
        EXPECT_LE(double(refused_both), kRefusedShare * double(compared + refused_both) + 2)
            << family << ": too many configurations refused by both sides to count as compared";
        if (count >= default_count) {  // the short run: every family compared several times
            EXPECT_GE(compared, 5u) << family << ": too few configurations compared";
        }
    }
}

// The op table of test_ops (op_cases.hpp) as configurations in f32: every case compared with
// PyTorch's f32 answer under the f32 tolerance above. Where a case's output or gradient is a sum
// of products (its sums, matmuls, linears, convolutions, mean pooling, + and x, copies and views) the
// script gives each element's rounding bound; softmax's gradients name their terms as the softmax
// family's do; the other cases are elementwise or short compositions, judged by the relative
// tolerance and PyTorch's own f32 error.
std::vector<DiffConfig> op_table_in_f32() {
    const std::vector<std::string> sums = {
        "add_broadcast", "add_outer",      "mul_broadcast",      "sum",        "sum_axis",   "sum_keepdims",
        "mean",          "mean_axis",      "matmul",             "matmul_vector", "matmul_row", "matmul_dot",
        "matmul_batched", "matmul_broadcast", "linear",          "linear_batched", "linear_sample",
        "linear_transposed_input", "matmul_transposed", "conv2d", "conv2d_stride_pad", "conv2d_dilation_groups",
        "conv_transpose2d", "meanpool2d", "concat",   "concat_axis1", "stack",      "index_select",
        "index_select_axis1", "gather_rows", "reshape", "permute", "transpose_contiguous", "slice_step",
        "select",        "unsqueeze_expand", "flatten"};
    // softmax's gradient at z, its input: s (w - sum(s w)) along the axis, K its length; log-softmax's
    // w - s sum(w)
    auto softmax_terms = [](DiffConfig& c, const std::string& z, int axis, bool log) {
        std::string s = "torch.softmax(z, " + std::to_string(axis) + ")",
                    sum = ".sum(" + std::to_string(axis) + ", keepdim=True)";
        c.terms_at = z;
        c.gradient_terms = "z.shape[" + std::to_string(axis) + "] * " +
                           (log ? "(w.abs() + " + s + " * w.abs()" + sum + ")" : s + " * (w.abs() + (" + s + " * w.abs())" + sum + ")");
    };
    std::vector<DiffConfig> configs;
    for (const auto& op : op_cases()) {
        DiffConfig c;
        c.family = "op table: " + op.name;
        c.shapes = op.shapes;
        for (std::size_t i = 0; i < op.shapes.size(); ++i) {
            c.values.push_back(op.domain == Domain::positive         ? fx_test::Values::positive
                               : op.domain == Domain::away_from_zero ? fx_test::Values::away_from_zero
                                                                     : fx_test::Values::normal);
            c.views.push_back("contiguous");
        }
        c.f = op.f;
        c.torch = op.torch;
        c.dtype = fx::DType::f32;
        c.sum_of_products = std::find(sums.begin(), sums.end(), op.name) != sums.end();
        if (op.name == "softmax") softmax_terms(c, "x0", -1, false);
        if (op.name == "softmax_axis0") softmax_terms(c, "x0", 1, false);
        if (op.name == "logsoftmax") softmax_terms(c, "x0 * 50.0", -1, true);
        configs.push_back(c);
    }
    return configs;
}

TEST(Differential, TheOpTableMatchesPyTorchInF32) {
    DiffRun run{default_seed, 0, 0, op_table_in_f32(), {}, {}};
    run.count = run.configs.size();
    for (std::size_t k = 0; k < run.configs.size(); ++k) {
        run.inputs.push_back(make_inputs(run.configs[k], default_seed, k));
        run.answers.push_back(fluxion_answer(run.configs[k], run.inputs[k]));
    }
    auto torch = torch_answers(run, script);
    if (!torch.skip.empty()) GTEST_SKIP() << torch.skip;
    ASSERT_TRUE(torch.error.empty()) << torch.error;
    ASSERT_EQ(torch.results.size(), run.configs.size()) << script << " answered a different number of configurations";
    std::size_t compared = 0, bounded = 0;
    for (std::size_t k = 0; k < run.configs.size(); ++k) {
        const DiffConfig& c = run.configs[k];
        // Every case of the table is one that both compute in f64 (test_ops): in f32 neither may refuse it.
        EXPECT_EQ(run.answers[k].error, "") << c.family;
        EXPECT_FALSE(torch.results[k].contains("error")) << c.family << ": " << torch.results[k].dump();
        if (!run.answers[k].error.empty() || torch.results[k].contains("error")) continue;
        ++compared;
        bounded += torch.results[k].contains("terms");
        EXPECT_EQ(compare(c, run.answers[k], torch.results[k]), "") << c.repro();
    }
    std::cout << "[differential] the op table in f32: " << compared << " of " << run.configs.size()
              << " cases compared, " << bounded << " of them with the rounding bound of their sums\n";
    EXPECT_EQ(compared, op_cases().size());
    EXPECT_EQ(bounded, 40u) << "the sums, softmaxes and views named in op_table_in_f32 should each have a bound";
}

// The f32 tolerance catches issue 15's precision loss: log-softmax as x - logsumexp(x) with
// logits near 1e4 loses about 3 digits where PyTorch's log_softmax keeps them.
TEST(Differential, AnF32PrecisionLossIsReported) {
    DiffRun run = make_run(default_seed, 0, 1);
    DiffConfig& c = run.configs[0];
    c.dtype = fx::DType::f32;
    c.shapes = {{4, 6}};
    c.values = {fx_test::Values::normal};
    c.views = {"contiguous"};
    c.f = [](const std::vector<Tensor>& xs) {
        Tensor x = xs[0] + 1e4;
        return x - fx::logsumexp(x, 1, true);
    };
    c.torch = "torch.log_softmax(x0 + 10000.0, 1)";
    run.inputs[0] = make_inputs(c, default_seed, 0);
    Answer naive = fluxion_answer(c, run.inputs[0]);
    c.f = [](const std::vector<Tensor>& xs) { return fx::logsoftmax(xs[0] + 1e4, 1); };
    Answer good = naive;  // the same output weights
    good.out = c.f(run.inputs[0]);
    auto [value, grads] =
        fx::withgradient([&](const std::vector<Tensor>& v) { return fx::sum(c.f(v) * good.weights); }, run.inputs[0]);
    (void)value;
    good.grads = grads;
    run.answers[0] = naive;
    auto torch = torch_answers(run, script);
    if (!torch.skip.empty()) GTEST_SKIP() << torch.skip;
    ASSERT_TRUE(torch.error.empty()) << torch.error;
    EXPECT_NE(compare(c, naive, torch.results[0]), "") << "a naive f32 log-softmax passed";
    EXPECT_EQ(compare(c, good, torch.results[0]), "") << "fluxion's own log-softmax failed";
}

TEST(Differential, ConfigurationsDependOnlyOnSeedAndIndex) {
    for (std::uint64_t i : {0, 7, 123}) {
        auto alone = fx_test::differential_config(default_seed, i),
             again = fx_test::differential_config(default_seed, i);
        EXPECT_EQ(alone.repro(), again.repro());
        EXPECT_FALSE(alone.torch.empty()) << alone.family;
    }
    EXPECT_NE(fx_test::differential_config(1, 0).repro() + fx_test::differential_config(1, 1).repro(),
              fx_test::differential_config(2, 0).repro() + fx_test::differential_config(2, 1).repro());
}

// Every family and both dtypes, views of every kind, and empty tensors occur in the short run.
TEST(Differential, TheShortRunCoversEveryFamily) {
    std::map<std::string, int> seen;
    for (std::uint64_t i = 0; i < default_count; ++i) {
        auto c = fx_test::differential_config(default_seed, i);
        ++seen[c.family];
        ++seen[fx::name(c.dtype)];
        for (const auto& v : c.views) ++seen[v.substr(0, v.find('('))];
        for (const auto& s : c.shapes)
            if (std::find(s.begin(), s.end(), 0) != s.end()) ++seen["zero-size"];
    }
    for (const char* what :
         {"unary", "binary", "reduction", "softmax", "matmul", "conv2d", "conv_transpose2d", "pool", "loss", "indexing",
          "views", "composition", "f64", "f32", "contiguous", "permute", "slice", "expand", "zero-size"})
        EXPECT_GE(seen[what], 5) << what;
}

TEST(Differential, AFailingScriptIsAnErrorNotASkip) {
    if (!fx_test::torch_importable()) GTEST_SKIP() << "PyTorch is not importable by /usr/bin/python3";
    std::string broken = FLUXION_BINARY_DIR "/torch_differential_failing.py";
    std::ofstream(broken) << "raise SystemExit(3)\n";
    auto r = torch_answers(make_run(default_seed, 0, 2), broken);
    EXPECT_EQ(r.skip, "");
    EXPECT_NE(r.error.find("torch_differential_failing.py failed"), std::string::npos) << r.error;
}

// A difference is reported: a configuration whose PyTorch expression is deliberately another op.
TEST(Differential, AWrongAnswerIsReported) {
    DiffRun run = make_run(default_seed, 0, 1);
    DiffConfig& c = run.configs[0];
    c.torch = "(" + c.torch + ") * 1.001 + 0.001";
    auto torch = torch_answers(run, script);
    if (!torch.skip.empty()) GTEST_SKIP() << torch.skip;
    ASSERT_TRUE(torch.error.empty()) << torch.error;
    EXPECT_NE(compare(c, run.answers[0], torch.results[0]), "") << c.repro();
}

}  // namespace
