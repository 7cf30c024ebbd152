// fluxion/layers/pooling.hpp — pooling over the spatial axes of images {C, H, W} or {N, C, H, W},
// sequences {C, L} or {N, C, L} (MaxPool and MeanPool view them as images of height 1) and volumes
// {C, D, H, W} or {N, C, D, H, W}: MaxPool, MeanPool, the global and the adaptive pools.
//
//   fx::MaxPool({2, 2})                         // window 2×2, stride = window
//   fx::MaxPool(std::array{2})                  // 1-d, Flux's MaxPool((2,))
//   fx::MeanPool(std::array{2, 2, 2})           // 3-d, Flux's MeanPool((2, 2, 2))
//   fx::MeanPool({3, 3}, {.stride = 1, .pad = 1})
//   fx::MaxPool(std::array{1, 3, 3}, {.stride = {1, 2, 2}, .pad = {0, 1, 1}})  // PyTorch's MaxPool3d((1, 3, 3), ...)
//   fx::GlobalMeanPool()                        // {N, C, H, W} -> {N, C, 1, 1}; GlobalMaxPool likewise
//   fx::GlobalMeanPool(1), fx::GlobalMaxPool(3) // {N, C, L} -> {N, C, 1}; {N, C, D, H, W} -> {N, C, 1, 1, 1}
//   fx::AdaptiveMeanPool({7, 7})                // {N, C, H, W} -> {N, C, 7, 7}; AdaptiveMaxPool likewise
//   fx::AdaptiveMaxPool(std::array{5})          // 1-d: {N, C, L} -> {N, C, 5}
//   fx::AdaptiveMeanPool(std::array{2, 3, 4})   // 3-d: {N, C, D, H, W} -> {N, C, 2, 3, 4}
// (each also on one sample, without N: the global pools are told their number of spatial axes, 2 by
// default, since {C, H, W} and {N, C, L} could not be told apart otherwise).
#pragma once
#include <array>
#include <concepts>
#include <string>

#include "fluxion/layers/layer.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

// Stride and padding take one value for every axis or one per axis (fx::Sizes), as PyTorch's.
struct PoolOptions {
    Sizes stride = {};  // the window when not given
    Sizes pad = 0;      // zeros on both sides of each axis; at most half the window
};

// A 3-d pooling is the 2-d one over (H, W) of every depth slice, then along the depth: both max and
// mean (its padding counted as zeros) are separable, so no kernel of its own is needed.

class MaxPool {
public:
    Size2 window, stride, pad;                                       // 1-d: a height of 1 and no padding of it
    std::int64_t depth_window = 1, depth_stride = 1, depth_pad = 0;  // 3-d
    explicit MaxPool(Size2 window, const PoolOptions& options = {}) : MaxPool({1, window.h, window.w}, options, 2) {}
    template <std::integral I> explicit MaxPool(std::array<I, 1> window, const PoolOptions& options = {})
        : MaxPool({1, 1, std::int64_t(window[0])}, options, 1) {}
    template <std::integral I> explicit MaxPool(std::array<I, 3> window, const PoolOptions& options = {})
        : MaxPool({std::int64_t(window[0]), std::int64_t(window[1]), std::int64_t(window[2])}, options, 3) {}
    Tensor operator()(const Tensor& x) const;
    // "MaxPool((2, 2))", "MaxPool((3, 3), pad=1, stride=2)", "MaxPool((2,))", "MaxPool((1, 3, 3), stride=(1, 2, 2))"
    std::string describe() const;

private:
    int dims_ = 2;
    MaxPool(std::array<std::int64_t, 3> window, const PoolOptions& options, int dims);  // window {d, h, w}
};

class MeanPool {
public:
    Size2 window, stride, pad;                                       // 1-d: a height of 1 and no padding of it
    std::int64_t depth_window = 1, depth_stride = 1, depth_pad = 0;  // 3-d
    explicit MeanPool(Size2 window, const PoolOptions& options = {}) : MeanPool({1, window.h, window.w}, options, 2) {}
    template <std::integral I> explicit MeanPool(std::array<I, 1> window, const PoolOptions& options = {})
        : MeanPool({1, 1, std::int64_t(window[0])}, options, 1) {}
    template <std::integral I> explicit MeanPool(std::array<I, 3> window, const PoolOptions& options = {})
        : MeanPool({std::int64_t(window[0]), std::int64_t(window[1]), std::int64_t(window[2])}, options, 3) {}
    Tensor operator()(const Tensor& x) const;  // padded cells count as zeros in the mean
    std::string describe() const;

private:
    int dims_ = 2;
    MeanPool(std::array<std::int64_t, 3> window, const PoolOptions& options, int dims);  // window {d, h, w}
};

class GlobalMeanPool {
public:
    GlobalMeanPool() = default;                      // images
    explicit GlobalMeanPool(int spatial_axes);  // 1: sequences, 2: images, 3: volumes
    Tensor operator()(const Tensor& x) const;       // {C, H, W} -> {C, 1, 1}, {N, C, H, W} -> {N, C, 1, 1}
    std::string describe() const { return "GlobalMeanPool()"; }
    int spatial_axes() const { return axes_; }

private:
    int axes_ = 2;
};

class GlobalMaxPool {
public:
    GlobalMaxPool() = default;                      // images
    explicit GlobalMaxPool(int spatial_axes);  // 1: sequences, 2: images, 3: volumes
    Tensor operator()(const Tensor& x) const;      // {C, H, W} -> {C, 1, 1}, {N, C, H, W} -> {N, C, 1, 1}
    std::string describe() const { return "GlobalMaxPool()"; }
    int spatial_axes() const { return axes_; }

private:
    int axes_ = 2;
};

// Adaptive pooling to a fixed output size. Output cell i along an axis of n inputs and m outputs
// pools inputs floor(i·n/m) to ceil((i+1)·n/m) - 1, as PyTorch's AdaptiveAvgPool2d/AdaptiveMaxPool2d;
// where m divides n these are Flux's windows (n/m wide, stride n/m), where it does not, Flux's
// stride rule would give other windows and fluxion keeps PyTorch's. An output larger than the
// input repeats cells. 1-d and 3-d: the same along each axis (PyTorch's adaptive_*_pool1d / 3d).
class AdaptiveMeanPool {
public:
    Size2 out;                   // 1-d: a height of 1
    std::int64_t out_depth = 1;  // 3-d
    explicit AdaptiveMeanPool(Size2 out_size);
    template <std::integral I> explicit AdaptiveMeanPool(std::array<I, 1> out_size)
        : AdaptiveMeanPool(Size2(1, std::int64_t(out_size[0])), 1, 1) {}
    template <std::integral I> explicit AdaptiveMeanPool(std::array<I, 3> out_size)
        : AdaptiveMeanPool(Size2(std::int64_t(out_size[1]), std::int64_t(out_size[2])), std::int64_t(out_size[0]), 3) {}
    Tensor operator()(const Tensor& x) const;
    std::string describe() const;  // "AdaptiveMeanPool((7, 7))", "AdaptiveMeanPool((5,))", "AdaptiveMeanPool((2, 3, 4))"
    int spatial_axes() const { return dims_; }

private:
    int dims_ = 2;
    AdaptiveMeanPool(Size2 out_size, std::int64_t out_depth, int dims);
};

class AdaptiveMaxPool {
public:
    Size2 out;                   // 1-d: a height of 1
    std::int64_t out_depth = 1;  // 3-d
    explicit AdaptiveMaxPool(Size2 out_size);
    template <std::integral I> explicit AdaptiveMaxPool(std::array<I, 1> out_size)
        : AdaptiveMaxPool(Size2(1, std::int64_t(out_size[0])), 1, 1) {}
    template <std::integral I> explicit AdaptiveMaxPool(std::array<I, 3> out_size)
        : AdaptiveMaxPool(Size2(std::int64_t(out_size[1]), std::int64_t(out_size[2])), std::int64_t(out_size[0]), 3) {}
    Tensor operator()(const Tensor& x) const;
    std::string describe() const;  // "AdaptiveMaxPool((7, 7))", "AdaptiveMaxPool((5,))", "AdaptiveMaxPool((2, 3, 4))"
    int spatial_axes() const { return dims_; }

private:
    int dims_ = 2;
    AdaptiveMaxPool(Size2 out_size, std::int64_t out_depth, int dims);
};

}  // namespace fluxion

FLUXION_FUNCTOR_NO_FIELDS(fluxion::MaxPool);
FLUXION_FUNCTOR_NO_FIELDS(fluxion::MeanPool);
FLUXION_FUNCTOR_NO_FIELDS(fluxion::GlobalMeanPool);
FLUXION_FUNCTOR_NO_FIELDS(fluxion::GlobalMaxPool);
FLUXION_FUNCTOR_NO_FIELDS(fluxion::AdaptiveMeanPool);
FLUXION_FUNCTOR_NO_FIELDS(fluxion::AdaptiveMaxPool);
