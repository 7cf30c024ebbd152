// image.hpp — what the image layers share: one image {C, H, W} or a batch {N, C, H, W}, checked
// with messages that name the layer, and tuple-style text for sizes ("(3, 3)"); the 1-d layers view
// one sequence {C, L} or a batch {N, C, L} as images of height 1; the 3-d layers take one volume
// {C, D, H, W} or a batch {N, C, D, H, W}.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "fluxion/layers/layer.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion::detail {

// x as a batch {N, C, H, W}; ShapeError naming `layer` unless x is {C, H, W} or {N, C, H, W} with
// `channels` channels (any number when channels < 0).
Tensor as_image_batch(const std::string& layer, const Tensor& x, std::int64_t channels);
// y back to one image when x was one.
inline Tensor like_input(const Tensor& x, const Tensor& y) { return x.ndim() == 3 ? y.squeeze(0) : y; }

// x as a batch of images of height 1 {N, C, 1, L}; ShapeError naming `layer` unless x is {C, L} or
// {N, C, L} with `channels` channels (any number when channels < 0).
Tensor as_sequence_batch(const std::string& layer, const Tensor& x, std::int64_t channels);
// y {N, C, 1, L'} back to x's layout.
inline Tensor like_sequence(const Tensor& x, const Tensor& y) {
    Tensor s = y.squeeze(2);
    return x.ndim() == 2 ? s.squeeze(0) : s;
}

// x as a batch of volumes {N, C, D, H, W}; ShapeError naming `layer` unless x is {C, D, H, W} or
// {N, C, D, H, W} with `channels` channels (any number when channels < 0).
Tensor as_volume_batch(const std::string& layer, const Tensor& x, std::int64_t channels);
// y back to one volume when x was one.
inline Tensor like_volume(const Tensor& x, const Tensor& y) { return x.ndim() == 4 ? y.squeeze(0) : y; }

std::string tuple_text(const std::vector<std::int64_t>& v);  // "(3,)", "(3, 3)", "(3, 1, 2)"
std::string tuple_text(const Size2& s);                      // "(3, 3)"
// ", name=v" when v differs from `unless`: "stride=2" when its values are all 2, else "stride=(2, 1)"
std::string option_text(const char* name, const std::vector<std::int64_t>& v, const std::vector<std::int64_t>& unless);
std::string option_text(const char* name, const Size2& v, const Size2& unless);

// The spatial axes a 1-, 2- or 3-d layer has of its {d, h, w}: {w}, {h, w} or {d, h, w}.
std::vector<std::int64_t> spatial(int dims, const std::array<std::int64_t, 3>& dhw);
// A stride, dilation, output padding or pooling padding of a layer over `dims` spatial axes as {d,
// h, w}, where the axes the layer lacks are `absent`; ValueError naming the layer and the option
// unless it holds one value or `dims`.
std::array<std::int64_t, 3> per_axis(const Sizes& s, int dims, std::int64_t absent, const std::string& layer,
                                     const char* option);

}  // namespace fluxion::detail
