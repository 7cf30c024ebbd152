// differential_cases.hpp — seeded random configurations of every op family for test_differential:
// each is a fluxion expression and the same expression in PyTorch, over inputs that the op sees as
// contiguous tensors or as permuted, strided or broadcast views made inside the tape, in f64 or f32.
// Configuration `index` of seed `seed` depends on nothing else, so one can be re-run alone.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"

namespace fx_test {

namespace fx = fluxion;

// unit: uniform on (0.05, 0.95); nonfinite: normal with about one element in five nan, inf or -inf
enum class Values { normal, positive, away_from_zero, unit, nonfinite };

struct DiffConfig {
    std::string family;
    std::vector<fx::Shape> shapes;  // of the inputs as made, before any view
    std::vector<Values> values;
    std::vector<std::string> views;  // how the op sees each input: "contiguous", "permute(...)", ...
    std::function<fx::Tensor(const std::vector<fx::Tensor>&)> f;
    std::string torch;  // a Python expression over x0, x1, ...
    fx::DType dtype = fx::DType::f64;

    std::string repro() const;  // one line: family, dtype, PyTorch expression, inputs and views
};

// Configuration `index` of the run with seed `seed`.
DiffConfig differential_config(std::uint64_t seed, std::uint64_t index);

}  // namespace fx_test
