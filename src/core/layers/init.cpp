// init.cpp — weight initialisers: scaled draws from the one random generator.
#include "fluxion/layers/init.hpp"

#include <cmath>

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

}  // namespace fluxion
