// fluxion/layers/conv.hpp — convolution and its transpose on images {C, H, W} or {N, C, H, W},
// sequences {C, L} or {N, C, L} (1-d) and volumes {C, D, H, W} or {N, C, D, H, W} (3-d).
//
//   fx::Conv({5, 5}, 1, 16, fx::relu)                        // weight {16, 1, 5, 5}, bias {16}
//   fx::Conv({3, 3}, 16, 32, fx::relu, {.stride = 2, .pad = fx::SamePad()})
//   fx::Conv(std::array{3}, 2, 4, {.pad = 1})                // 1-d, Flux's Conv((3,), 2 => 4): weight {4, 2, 3}
//   fx::Conv(std::array{3, 3, 3}, 1, 8, {.stride = {1, 2, 2}, .pad = {0, 1, 1}})
//       // 3-d, Flux's Conv((3, 3, 3), 1 => 8, stride=(1, 2, 2)), PyTorch's Conv3d(1, 8, 3, stride=(1, 2, 2),
//       // padding=(0, 1, 1)): weight {8, 1, 3, 3, 3}
//   fx::ConvTranspose({4, 4}, 32, 16, fx::relu, {.stride = 2, .pad = 1})  // weight {32, 16, 4, 4}
//
// Weights use PyTorch's layouts (docs/ARCHITECTURE.md, "Conventions"): Conv {out, in/groups, kh,
// kw} (1-d: {out, in/groups, k}, as Conv1d; 3-d: {out, in/groups, kd, kh, kw}, as Conv3d),
// ConvTranspose {in, out/groups, kh, kw} (1-d and 3-d likewise). Weights are Glorot uniform and
// biases zeros by default, as in Flux. Stride, dilation and output padding take one value for every
// axis or one per axis (fx::Sizes); padding also one per side (fx::Pad).
#pragma once
#include <array>
#include <concepts>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/init.hpp"
#include "fluxion/layers/layer.hpp"

namespace fluxion {

// Padding that keeps H and W (divided by the stride, rounded up), as Flux's SamePad and
// PyTorch's padding="same"; an odd total puts the extra row/column at the bottom/right.
struct SamePad {};

// Zero padding of a convolution: `1` on every side; one per axis, `{ph, pw}` (3-d `{pd, ph, pw}`); one
// per side, each axis's beginning then its end, `{top, bottom, left, right}` (1-d `{left, right}`, 3-d
// `{front, back, top, bottom, left, right}`), as Flux's pad of 2N values (in the input's axis order);
// or SamePad(). ConvTranspose takes the same padding at both ends of an axis, as PyTorch.
class Pad {
public:
    Pad(std::int64_t p = 0) : values_{p} {}  // NOLINT: implicit so that `.pad = 1` reads naturally
    Pad(std::int64_t h, std::int64_t w) : values_{h, w} {}
    Pad(std::int64_t d, std::int64_t h, std::int64_t w) : values_{d, h, w} {}
    Pad(std::int64_t top, std::int64_t bottom, std::int64_t left, std::int64_t right)
        : values_{top, bottom, left, right} {}
    Pad(std::int64_t front, std::int64_t back, std::int64_t top, std::int64_t bottom, std::int64_t left,
        std::int64_t right)
        : values_{front, back, top, bottom, left, right} {}
    Pad(SamePad) : same_(true) {}  // NOLINT

    bool same() const { return same_; }
    const std::vector<std::int64_t>& values() const { return values_; }  // as given (none for SamePad)

private:
    bool same_ = false;
    std::vector<std::int64_t> values_;
};

struct ConvOptions {
    Sizes stride = 1;
    Pad pad = 0;
    Sizes dilation = 1;
    std::int64_t groups = 1;
    bool bias = true;
    Init init = glorot_uniform;
};

struct ConvTransposeOptions {
    Sizes stride = 1;
    Pad pad = 0;  // removed from the output, as PyTorch's padding; SamePad gives H·stride
    Sizes dilation = 1;
    std::int64_t groups = 1;
    bool bias = true;
    Init init = glorot_uniform;
    Sizes output_pad = 0;  // added to the end of each axis of the output (less than its stride or dilation)
};

class Conv {
public:
    Tensor weight;  // {out, in/groups, kh, kw}
    Tensor bias;    // {out}, or undefined
    Activation activation;
    Size2 stride, dilation;                                 // 1-d: a height of 1
    std::int64_t pad_top, pad_bottom, pad_left, pad_right;  // resolved (SamePad included)
    std::int64_t stride_d = 1, dilation_d = 1, pad_front = 0, pad_back = 0;  // 3-d: along the depth
    std::int64_t groups;

    Conv(Size2 kernel, std::int64_t in, std::int64_t out, Activation activation = {}, const ConvOptions& options = {})
        : Conv({1, kernel.h, kernel.w}, in, out, std::move(activation), options, 2) {}
    Conv(Size2 kernel, std::int64_t in, std::int64_t out, const ConvOptions& options)
        : Conv(kernel, in, out, {}, options) {}
    // 1-d (a weight {out, in/groups, k}), viewed as 2-d with a height of 1.
    template <std::integral I> Conv(std::array<I, 1> kernel, std::int64_t in, std::int64_t out,
                                    Activation activation = {}, const ConvOptions& options = {})
        : Conv({1, 1, std::int64_t(kernel[0])}, in, out, std::move(activation), options, 1) {}
    template <std::integral I>
    Conv(std::array<I, 1> kernel, std::int64_t in, std::int64_t out, const ConvOptions& options)
        : Conv(kernel, in, out, {}, options) {}
    // 3-d (a weight {out, in/groups, kd, kh, kw}): kd slices of the volume side by side as channels
    // of one conv2d, whose extra memory is kd times the input, where an im2col takes kd·kh·kw times.
    template <std::integral I> Conv(std::array<I, 3> kernel, std::int64_t in, std::int64_t out,
                                    Activation activation = {}, const ConvOptions& options = {})
        : Conv({std::int64_t(kernel[0]), std::int64_t(kernel[1]), std::int64_t(kernel[2])}, in, out,
               std::move(activation), options, 3) {}
    template <std::integral I>
    Conv(std::array<I, 3> kernel, std::int64_t in, std::int64_t out, const ConvOptions& options)
        : Conv(kernel, in, out, {}, options) {}

    // {in, H, W} or {N, in, H, W}; 1-d: {in, L} or {N, in, L}; 3-d: {in, D, H, W} or {N, in, D, H, W}
    Tensor operator()(const Tensor& x) const;
    std::int64_t in_channels() const { return weight.shape(1) * groups; }
    std::int64_t out_channels() const { return weight.shape(0); }
    // "Conv((3, 3), 1 => 16, relu, pad=1, stride=2)", "Conv((3,), 2 => 4)", "Conv((3, 3, 3), 1 => 8, stride=(1, 2, 2))"
    std::string describe() const;

private:
    // `dims` 1, 2 or 3 spatial axes: kernel {1, 1, k}, {1, kh, kw} or {kd, kh, kw}.
    Conv(std::array<std::int64_t, 3> kernel, std::int64_t in, std::int64_t out, Activation activation,
         const ConvOptions& options, int dims);
};

class ConvTranspose {
public:
    Tensor weight;  // {in, out/groups, kh, kw}
    Tensor bias;    // {out}, or undefined
    Activation activation;
    Size2 stride, dilation, output_pad;  // 1-d: a height of 1
    std::int64_t pad_h, pad_w;           // the same at both ends, as conv_transpose2d takes it
    std::int64_t stride_d = 1, dilation_d = 1, pad_d = 0, output_pad_d = 0;  // 3-d: along the depth
    std::int64_t groups;

    ConvTranspose(Size2 kernel, std::int64_t in, std::int64_t out, Activation activation = {},
                  const ConvTransposeOptions& options = {})
        : ConvTranspose({1, kernel.h, kernel.w}, in, out, std::move(activation), options, 2) {}
    ConvTranspose(Size2 kernel, std::int64_t in, std::int64_t out, const ConvTransposeOptions& options)
        : ConvTranspose(kernel, in, out, {}, options) {}
    // 1-d (a weight {in, out/groups, k}, as ConvTranspose1d), viewed as 2-d with a height of 1.
    template <std::integral I> ConvTranspose(std::array<I, 1> kernel, std::int64_t in, std::int64_t out,
                                             Activation activation = {}, const ConvTransposeOptions& options = {})
        : ConvTranspose({1, 1, std::int64_t(kernel[0])}, in, out, std::move(activation), options, 1) {}
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
    // `dims` 1, 2 or 3 spatial axes: kernel {1, 1, k}, {1, kh, kw} or {kd, kh, kw}.
    ConvTranspose(std::array<std::int64_t, 3> kernel, std::int64_t in, std::int64_t out, Activation activation,
                  const ConvTransposeOptions& options, int dims);
};

}  // namespace fluxion

FLUXION_FUNCTOR(fluxion::Conv, weight, bias);
FLUXION_FUNCTOR(fluxion::ConvTranspose, weight, bias);
