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
    // The output is a sum of products of the inputs' elements and positive constants (matmul,
    // convolutions, sum, mean, mean pooling, + and x, views): PyTorch's answer on the inputs'
    // absolute values, with the weights' absolute values, is then the size of the terms summed at
    // each element of the output and of every gradient, which bounds the f32 rounding error there.
    bool sum_of_products = false;
    // Otherwise, where the gradient is a sum that may cancel (softmax's), a PyTorch expression over
    // z, the op's input (`terms_at`, over x0, linear in it), and w, the output's weights: K sum |term|
    // at each element of the gradient with respect to z, K the number of terms summed there.
    std::string gradient_terms, terms_at;

    std::string repro() const;  // one line: family, dtype, PyTorch expression, inputs and views
};

// Configuration `index` of the run with seed `seed`.
DiffConfig differential_config(std::uint64_t seed, std::uint64_t index);

}  // namespace fx_test
