// layer_reference.hpp — rebuilding the inputs of tests/reference/torch_layers.py and comparing layer
// outputs with its results: element by element where PyTorch runs the script, else with the
// numbers the tests keep from it (a checksum and the first values).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "fluxion/functor.hpp"
#include "fluxion/ops.hpp"
#include "torch_reference.hpp"

namespace reference {

namespace fx = fluxion;

// sin(a·i + b) over the flattened index i, in f64.
inline fx::Tensor wave(const fx::Shape& shape, double a, double b) {
    auto n = fx::numel(shape);
    return fx::sin(fx::arange(0, double(n), 1, {.dtype = fx::DType::f64}) * a + b).reshape(shape);
}

// Every floating tensor of a layer in f64.
template <class L> L f64(const L& layer) {
    return fx::fmap([](const fx::Tensor& t) { return t.to(fx::DType::f64); }, layer);
}

// The script's results, computed once per test process (and cached across them).
inline const fx_test::TorchResults& torch_layers() {
    static const fx_test::TorchResults results =
        fx_test::run_torch_script(FLUXION_SOURCE_DIR "/tests/reference/torch_layers.py", "", "torch_layers");
    return results;
}

// Numbers kept from the script's case `name` (a running statistic, `key`), checked against the
// script where PyTorch runs; they were kept at 12 significant digits.
inline std::vector<double> kept(const std::string& name, const std::string& key, std::vector<double> values) {
    if (fx_test::ran(torch_layers()))
        fx_test::expect_kept(values, torch_layers().results.at(name).at(key), 1e-11, name + " " + key);
    return values;
}

// Compares y with the case `name` of `script`'s results (torch_layers.py's, or another script's of the
// same form): its shape, Σ y_i·cos(0.7 i) and its first three values as kept here (12 and 9
// significant digits) and, where PyTorch runs, every value, and the kept numbers with the script's.
inline void expect_matches_in(const fx_test::TorchResults& results, const fx::Tensor& y, const std::string& name,
                              const fx::Shape& shape, double checksum, const std::vector<double>& first) {
    ASSERT_EQ(y.shape(), shape) << name;
    fx::Tensor flat = y.to(fx::DType::f64).reshape({-1});
    fx::Tensor w = fx::cos(fx::arange(0, double(flat.numel()), 1, {.dtype = fx::DType::f64}) * 0.7);
    EXPECT_NEAR(fx::sum(flat * w).item(), checksum, 1e-9 + 1e-9 * std::abs(checksum)) << name;
    auto v = flat.to_vector<double>();
    for (std::size_t i = 0; i < first.size(); ++i) EXPECT_NEAR(v[i], first[i], 1e-8) << name << " element " << i;
    if (!fx_test::ran(results)) return;
    const auto& script = results.results.at(name);
    EXPECT_EQ(shape, script.at("shape").get<fx::Shape>()) << name;
    fx_test::expect_close(v, script.at("out"), 1e-12, 1e-12, name + " against PyTorch");
    fx_test::expect_kept({checksum}, script.at("checksum"), 1e-11, name + " checksum");
    fx_test::expect_kept(first, script.at("first"), 1e-8, name + " first values");
}

// The same against torch_layers.py's case `name`.
inline void expect_matches(const fx::Tensor& y, const std::string& name, const fx::Shape& shape, double checksum,
                           const std::vector<double>& first) {
    expect_matches_in(torch_layers(), y, name, shape, checksum, first);
}

}  // namespace reference
