// fluxion/layers/pooling.hpp — pooling over the spatial axes of images {C, H, W} or {N, C, H, W}.
//
//   fx::MaxPool({2, 2})                         // window 2×2, stride = window
//   fx::MeanPool({3, 3}, {.stride = 1, .pad = 1})
//   fx::GlobalMeanPool()                        // {N, C, H, W} -> {N, C, 1, 1}
//   fx::AdaptiveMeanPool({7, 7})                // {N, C, H, W} -> {N, C, 7, 7}
#pragma once
#include <optional>
#include <string>

#include "fluxion/layers/layer.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

struct PoolOptions {
    std::optional<Size2> stride;  // the window when not given
    Size2 pad = 0;                // zeros on both sides of each axis; at most half the window
};

class MaxPool {
public:
    Size2 window, stride, pad;
    explicit MaxPool(Size2 window, const PoolOptions& options = {});
    Tensor operator()(const Tensor& x) const;
    std::string describe() const;  // "MaxPool((2, 2))", "MaxPool((3, 3), pad=1, stride=2)"
};

class MeanPool {
public:
    Size2 window, stride, pad;
    explicit MeanPool(Size2 window, const PoolOptions& options = {});
    Tensor operator()(const Tensor& x) const;  // padded cells count as zeros in the mean
    std::string describe() const;
};

class GlobalMeanPool {
public:
    Tensor operator()(const Tensor& x) const;  // {C, H, W} -> {C, 1, 1}, {N, C, H, W} -> {N, C, 1, 1}
    std::string describe() const { return "GlobalMeanPool()"; }
};

// Flux's adaptive pooling: window in / out (integer division) with that stride, no padding; the
// windows match PyTorch's AdaptiveAvgPool2d where out divides the input size.
class AdaptiveMeanPool {
public:
    Size2 out;
    explicit AdaptiveMeanPool(Size2 out_size);
    Tensor operator()(const Tensor& x) const;
    std::string describe() const;  // "AdaptiveMeanPool((7, 7))"
};

}  // namespace fluxion

FLUXION_FUNCTOR_NO_FIELDS(fluxion::MaxPool);
FLUXION_FUNCTOR_NO_FIELDS(fluxion::MeanPool);
FLUXION_FUNCTOR_NO_FIELDS(fluxion::GlobalMeanPool);
FLUXION_FUNCTOR_NO_FIELDS(fluxion::AdaptiveMeanPool);
