// init.cpp — weight initialisers: scaled draws from the one random generator.
#include "fluxion/layers/init.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "fluxion/error.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

struct Fans {
    double in, out;
};

Fans fans(const Shape& shape) {
    if (shape.empty()) return {1, 1};
    if (shape.size() == 1) return {1, double(shape[0])};
    double receptive = 1;
    for (std::size_t i = 2; i < shape.size(); ++i) receptive *= double(shape[i]);
    return {double(shape[1]) * receptive, double(shape[0]) * receptive};
}

Tensor uniform(const Shape& shape, double bound) { return rand(shape) * (2 * bound) - bound; }

std::int64_t count(const Shape& shape) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

// Gram-Schmidt, twice over (one pass loses orthogonality in floating point; two keep it to
// rounding): the n×m matrix `a` (row-major, n ≥ m) becomes Q of a QR factorisation whose R has a
// positive diagonal, so Q of a Gaussian draw is uniform over the orthonormal frames.
void orthonormalise_columns(std::vector<double>& a, std::int64_t n, std::int64_t m) {
    auto at = [&](std::int64_t i, std::int64_t j) -> double& { return a[static_cast<std::size_t>(i * m + j)]; };
    for (std::int64_t j = 0; j < m; ++j) {
        for (int pass = 0; pass < 2; ++pass)
            for (std::int64_t k = 0; k < j; ++k) {
                double dot = 0;
                for (std::int64_t i = 0; i < n; ++i) dot += at(i, k) * at(i, j);
                for (std::int64_t i = 0; i < n; ++i) at(i, j) -= dot * at(i, k);
            }
        double norm = 0;
        for (std::int64_t i = 0; i < n; ++i) norm += at(i, j) * at(i, j);
        norm = std::sqrt(norm);
        for (std::int64_t i = 0; i < n; ++i) at(i, j) /= norm;
    }
}

}  // namespace

Tensor glorot_uniform(const Shape& shape) {
    auto f = fans(shape);
    return uniform(shape, std::sqrt(6.0 / (f.in + f.out)));
}

Tensor glorot_normal(const Shape& shape) {
    auto f = fans(shape);
    return randn(shape) * std::sqrt(2.0 / (f.in + f.out));
}

Tensor kaiming_uniform(const Shape& shape) { return uniform(shape, std::sqrt(6.0 / fans(shape).in)); }

Tensor kaiming_normal(const Shape& shape) { return randn(shape) * std::sqrt(2.0 / fans(shape).in); }

Tensor randn32(const Shape& shape) { return randn(shape); }
Tensor zeros32(const Shape& shape) { return zeros(shape); }
Tensor ones32(const Shape& shape) { return ones(shape); }

Tensor TruncatedNormal::operator()(const Shape& shape) const {
    auto text = [&] {
        return "TruncatedNormal(mean = " + std::to_string(mean) + ", std = " + std::to_string(std) +
               ", lo = " + std::to_string(lo) + ", hi = " + std::to_string(hi) + ")";
    };
    if (!(std > 0) || !(lo < hi) || !std::isfinite(mean))
        throw ValueError(text() + ": needs std > 0, lo < hi and a finite mean");
    // The share of N(mean, std²) inside [lo, hi]: each round draws enough to fill what is missing.
    const double inside = 0.5 * (std::erfc((lo - mean) / (std * M_SQRT2)) - std::erfc((hi - mean) / (std * M_SQRT2)));
    if (!(inside >= 1e-4))
        throw ValueError(text() + ": the bounds hold " + std::to_string(inside) +
                         " of the distribution; drawing until values fall inside would not end");
    const auto n = static_cast<std::size_t>(count(shape));
    std::vector<float> values;
    values.reserve(n);
    while (values.size() < n) {
        const double missing = double(n - values.size());
        const auto draw = static_cast<std::int64_t>(std::ceil(missing / inside * 1.1)) + 16;
        for (double z : randn({draw}, {.dtype = DType::f64}).to_vector<double>()) {
            const double x = mean + std * z;
            if (lo <= x && x <= hi && values.size() < n) values.push_back(static_cast<float>(x));
        }
    }
    return tensor(values, shape);
}

Tensor truncated_normal(const Shape& shape) { return TruncatedNormal{}(shape); }

Tensor lecun_normal(const Shape& shape) { return TruncatedNormal{.std = std::sqrt(1.0 / fans(shape).in)}(shape); }

Tensor Orthogonal::operator()(const Shape& shape) const {
    if (shape.size() < 2)
        throw ShapeError("orthogonal: the weight needs at least 2 dimensions (seen as {shape[0], the rest}), got " +
                         to_string(shape));
    const std::int64_t rows = shape[0], cols = rows ? count(shape) / rows : 0;
    if (rows == 0 || cols == 0) return zeros(shape);
    const std::int64_t n = std::max(rows, cols), m = std::min(rows, cols);
    std::vector<double> q = randn({n, m}, {.dtype = DType::f64}).to_vector<double>();
    orthonormalise_columns(q, n, m);
    // Q is n×m with orthonormal columns: the weight itself when it is tall, its transpose when wide.
    std::vector<float> w(static_cast<std::size_t>(rows * cols));
    for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j)
            w[static_cast<std::size_t>(i * cols + j)] =
                static_cast<float>(gain * q[static_cast<std::size_t>(rows >= cols ? i * m + j : j * m + i)]);
    return tensor(w, shape);
}

Tensor orthogonal(const Shape& shape) { return Orthogonal{}(shape); }

Init sparse_init(double sparsity, double std) {
    if (!(sparsity >= 0 && sparsity <= 1) || !(std >= 0))
        throw ValueError("sparse_init(sparsity = " + std::to_string(sparsity) + ", std = " + std::to_string(std) +
                         "): needs 0 ≤ sparsity ≤ 1 and std ≥ 0");
    return [sparsity, std](const Shape& shape) {
        if (shape.size() != 2) throw ShapeError("sparse_init: the weight must be {rows, cols}, got " + to_string(shape));
        const std::int64_t rows = shape[0], cols = shape[1];
        const auto zeros_per_column = static_cast<std::int64_t>(std::ceil(sparsity * double(rows)));
        std::vector<float> w = (randn(shape) * std).to_vector<float>();
        // Each column's zeros at the rows of its smallest keys: a uniform choice of that many rows.
        const std::vector<float> keys = rand({cols, rows}).to_vector<float>();
        std::vector<std::int64_t> order(static_cast<std::size_t>(rows));
        for (std::int64_t j = 0; j < cols; ++j) {
            std::iota(order.begin(), order.end(), 0);
            const float* key = keys.data() + j * rows;
            std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return key[a] < key[b]; });
            for (std::int64_t k = 0; k < zeros_per_column; ++k) w[static_cast<std::size_t>(order[k] * cols + j)] = 0;
        }
        return tensor(w, shape);
    };
}

Tensor identity_init(const Shape& shape) {
    if (shape.size() < 2) return zeros(shape);  // a bias: adds nothing
    std::vector<float> w(static_cast<std::size_t>(count(shape)), 0.0f);
    const std::int64_t kernel = count(Shape(shape.begin() + 2, shape.end()));
    // The kernel's centre, as a flat offset within one {k...} block.
    std::int64_t centre = 0;
    for (std::size_t d = 2; d < shape.size(); ++d) centre = centre * shape[d] + shape[d] / 2;
    for (std::int64_t i = 0; i < std::min(shape[0], shape[1]); ++i)
        w[static_cast<std::size_t>((i * shape[1] + i) * kernel + centre)] = 1.0f;
    return tensor(w, shape);
}

}  // namespace fluxion
