// fluxion/layers/conv.hpp — convolution and its transpose on images {C, H, W} or {N, C, H, W},
// sequences {C, L} or {N, C, L} (1-d) and volumes {C, D, H, W} or {N, C, D, H, W} (3-d).
//
//   fx::Conv({5, 5}, 1, 16, fx::relu)                        // weight {16, 1, 5, 5}, bias {16}
//   fx::Conv({3, 3}, 16, 32, fx::relu, {.stride = 2, .pad = fx::SamePad()})
//   fx::Conv(std::array{3}, 2, 4, {.pad = 1})                // 1-d, Flux's Conv((3,), 2 => 4): weight {4, 2, 3}
//   fx::Conv(std::array{3, 3, 3}, 1, 8, {.stride = 2})      // 3-d, Flux's Conv((3, 3, 3), 1 => 8): weight {8, 1, 3, 3,
//   3} fx::ConvTranspose({4, 4}, 32, 16, fx::relu, {.stride = 2, .pad = 1})  // weight {32, 16, 4, 4}
//
// Weights use PyTorch's layouts (docs/ARCHITECTURE.md, "Conventions"): Conv {out, in/groups, kh,
// kw} (1-d: {out, in/groups, k}, as Conv1d; 3-d: {out, in/groups, kd, kh, kw}, as Conv3d),
// ConvTranspose {in, out/groups, kh, kw} (1-d and 3-d likewise). Weights are Glorot uniform and
// biases zeros by default, as in Flux. The 1-d and 3-d layers take one stride, dilation, padding
// (or SamePad) and output padding for all their axes.
#pragma once
#include <array>
#include <concepts>
#include <cstdint>
#include <string>

#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/init.hpp"
#include "fluxion/layers/layer.hpp"

namespace fluxion {

// Padding that keeps H and W (divided by the stride, rounded up), as Flux's SamePad and
// PyTorch's padding="same"; an odd total puts the extra row/column at the bottom/right.
struct SamePad {};

// Zero padding: `1` on every side, `{ph, pw}` per axis, `{top, bottom, left, right}`, or SamePad().
class Pad {
public:
    Pad(std::int64_t p = 0) : Pad(p, p, p, p) {}  // NOLINT: implicit so that `.pad = 1` reads naturally
    Pad(std::int64_t h, std::int64_t w) : Pad(h, h, w, w) {}
    Pad(std::int64_t top, std::int64_t bottom, std::int64_t left, std::int64_t right)
        : top_(top), bottom_(bottom), left_(left), right_(right) {}
    Pad(SamePad) : same_(true) {}  // NOLINT

    bool same() const { return same_; }
    std::int64_t top() const { return top_; }
    std::int64_t bottom() const { return bottom_; }
    std::int64_t left() const { return left_; }
    std::int64_t right() const { return right_; }

private:
    bool same_ = false;
    std::int64_t top_ = 0, bottom_ = 0, left_ = 0, right_ = 0;
};

struct ConvOptions {
    Size2 stride = 1;
    Pad pad = 0;
    Size2 dilation = 1;
    std::int64_t groups = 1;
    bool bias = true;
    Init init = glorot_uniform;
};

struct ConvTransposeOptions {
    Size2 stride = 1;
    Pad pad = 0;  // removed from the output, as PyTorch's padding; SamePad gives H·stride
    Size2 dilation = 1;
    std::int64_t groups = 1;
    bool bias = true;
    Init init = glorot_uniform;
    Size2 output_pad = 0;  // added to the bottom/right of the output (less than the stride or the dilation)
};

class Conv {
public:
    Tensor weight;  // {out, in/groups, kh, kw}
    Tensor bias;    // {out}, or undefined
    Activation activation;
    Size2 stride, dilation;                                 // 3-d: the same along the depth
    std::int64_t pad_top, pad_bottom, pad_left, pad_right;  // resolved (SamePad included)
    std::int64_t pad_front = 0, pad_back = 0;               // 3-d: along the depth
    std::int64_t groups;

    Conv(Size2 kernel, std::int64_t in, std::int64_t out, Activation activation = {}, const ConvOptions& options = {});
    Conv(Size2 kernel, std::int64_t in, std::int64_t out, const ConvOptions& options);
    // 1-d (a weight {out, in/groups, k}), viewed as 2-d with a height of 1. Its options take one
    // stride, dilation and padding each (`.pad = 1`, or SamePad()).
    template <std::integral I> Conv(std::array<I, 1> kernel, std::int64_t in, std::int64_t out,
                                    Activation activation = {}, const ConvOptions& options = {})
        : Conv(std::int64_t(kernel[0]), in, out, std::move(activation), options, OneD{}) {}
    template <std::integral I>
    Conv(std::array<I, 1> kernel, std::int64_t in, std::int64_t out, const ConvOptions& options)
        : Conv(kernel, in, out, {}, options) {}
    // 3-d (a weight {out, in/groups, kd, kh, kw}): kd slices of the volume side by side as channels
    // of one conv2d, whose extra memory is kd times the input, where an im2col takes kd·kh·kw times.
    template <std::integral I> Conv(std::array<I, 3> kernel, std::int64_t in, std::int64_t out,
                                    Activation activation = {}, const ConvOptions& options = {})
        : Conv({std::int64_t(kernel[0]), std::int64_t(kernel[1]), std::int64_t(kernel[2])}, in, out,
               std::move(activation), options, ThreeD{}) {}
    template <std::integral I>
    Conv(std::array<I, 3> kernel, std::int64_t in, std::int64_t out, const ConvOptions& options)
        : Conv(kernel, in, out, {}, options) {}

    // {in, H, W} or {N, in, H, W}; 1-d: {in, L} or {N, in, L}; 3-d: {in, D, H, W} or {N, in, D, H, W}
    Tensor operator()(const Tensor& x) const;
    std::int64_t in_channels() const { return weight.shape(1) * groups; }
    std::int64_t out_channels() const { return weight.shape(0); }
    std::string describe() const;  // "Conv((3, 3), 1 => 16, relu, pad=1, stride=2)", "Conv((3,), 2 => 4)"

private:
    struct OneD {};
    struct ThreeD {};
    Conv(std::int64_t kernel, std::int64_t in, std::int64_t out, Activation activation, const ConvOptions& options,
         OneD);
    Conv(std::array<std::int64_t, 3> kernel, std::int64_t in, std::int64_t out, Activation activation,
         const ConvOptions& options, ThreeD);
};

class ConvTranspose {
public:
    Tensor weight;  // {in, out/groups, kh, kw}
    Tensor bias;    // {out}, or undefined
    Activation activation;
    Size2 stride, dilation, output_pad;        // 3-d: stride and dilation the same along the depth
    std::int64_t pad_h, pad_w;                 // symmetric, as conv_transpose2d takes it
    std::int64_t pad_d = 0, output_pad_d = 0;  // 3-d: along the depth
    std::int64_t groups;

    ConvTranspose(Size2 kernel, std::int64_t in, std::int64_t out, Activation activation = {},
                  const ConvTransposeOptions& options = {});
    ConvTranspose(Size2 kernel, std::int64_t in, std::int64_t out, const ConvTransposeOptions& options);
    // 1-d (a weight {in, out/groups, k}, as ConvTranspose1d), viewed as 2-d with a height of 1.
    template <std::integral I> ConvTranspose(std::array<I, 1> kernel, std::int64_t in, std::int64_t out,
                                             Activation activation = {}, const ConvTransposeOptions& options = {})
        : ConvTranspose({std::int64_t(1), std::int64_t(1), std::int64_t(kernel[0])}, in, out, std::move(activation),
                        options, 1) {}
    template <std::integral I>
    ConvTranspose(std::array<I, 1> kernel, std::int64_t in, std::int64_t out, const ConvTransposeOptions& options)
        : ConvTranspose(kernel, in, out, {}, options) {}
    // 3-d (a weight {in, out/groups, kd, kh, kw}, as ConvTranspose3d): one conv_transpose2d over the
    // depth slices gives each slice's kd contributions, which are then added at their depths.
    template <std::integral I> ConvTranspose(std::array<I, 3> kernel, std::int64_t in, std::int64_t out,
                                             Activation activation = {}, const ConvTransposeOptions& options = {})
        : ConvTranspose({std::int64_t(kernel[0]), std::int64_t(kernel[1]), std::int64_t(kernel[2])}, in, out,
                        std::move(activation), options, 3) {}
    template <std::integral I>
    ConvTranspose(std::array<I, 3> kernel, std::int64_t in, std::int64_t out, const ConvTransposeOptions& options)
        : ConvTranspose(kernel, in, out, {}, options) {}

    Tensor operator()(const Tensor& x) const;  // {in, H, W} or {N, in, H, W}; 1-d, 3-d as Conv
    std::int64_t in_channels() const { return weight.shape(0); }
    std::int64_t out_channels() const { return weight.shape(1) * groups; }
    std::string describe() const;  // "ConvTranspose((4, 4), 32 => 16, relu, pad=1, stride=2)"

private:
    // `dims` 1 or 3: kernel {1, 1, k} or {kd, kh, kw}.
    ConvTranspose(std::array<std::int64_t, 3> kernel, std::int64_t in, std::int64_t out, Activation activation,
                  const ConvTransposeOptions& options, int dims);
};

}  // namespace fluxion

FLUXION_FUNCTOR(fluxion::Conv, weight, bias);
FLUXION_FUNCTOR(fluxion::ConvTranspose, weight, bias);
