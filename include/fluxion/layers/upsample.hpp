// fluxion/layers/upsample.hpp — growing images {N, C, H, W} (or one image {C, H, W}) and volumes
// {N, C, D, H, W} (or one volume {C, D, H, W}), as PyTorch.
//
//   fx::PixelShuffle(2)                                                  // {N, 4C, H, W} -> {N, C, 2H, 2W}
//   fx::Upsample(fx::UpsampleMode::nearest, {.scale = {2}})              // {N, C, 2H, 2W}
//   fx::Upsample(fx::UpsampleMode::bilinear, {.size = {32, 48}, .align_corners = true})
//   fx::Upsample(fx::UpsampleMode::trilinear, {.scale = {2}})            // {N, C, 2D, 2H, 2W}
//
// PixelShuffle(r) moves each run of r² channels into an r×r block of pixels in PyTorch's order:
// out[n, c, h·r + i, w·r + j] = x[n, c·r² + i·r + j, h, w]. Upsample resizes the last two axes exactly as
// PyTorch's F.interpolate: `scale` (one for both axes, or {height, width}) makes floor(size·scale)
// and, as PyTorch, places samples by 1/scale; `size` sets the output's {height, width}. Nearest takes
// input index floor(out_index · in/out); bilinear weighs the two nearest inputs of each output
// (align_corners: the corners of input and output coincide, else their pixels' centres scale);
// trilinear does the same along depth, height and width of volumes, and nearest resizes volumes
// where its scale or size has three values. All are differentiable in x.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "fluxion/layers/layer.hpp"

namespace fluxion {

class PixelShuffle {
public:
    explicit PixelShuffle(std::int64_t factor);

    Tensor operator()(const Tensor& x) const;
    std::int64_t factor() const { return factor_; }
    std::string describe() const { return "PixelShuffle(" + std::to_string(factor_) + ")"; }

private:
    std::int64_t factor_;
};

enum class UpsampleMode { nearest, bilinear, trilinear };

struct UpsampleOptions {
    std::vector<double> scale =
        {};                      // {s} for every axis or {s_height, s_width} ({s_depth, s_height, s_width}); or else
    Shape size = {};             // the output's {height, width} ({depth, height, width})
    bool align_corners = false;  // bilinear and trilinear only
};

class Upsample {
public:
    Upsample(UpsampleMode mode, const UpsampleOptions& options);

    Tensor operator()(const Tensor& x) const;
    UpsampleMode mode() const { return mode_; }
    int axes() const { return axes_; }                           // 2 (images) or 3 (volumes)
    const std::vector<double>& scale() const { return scale_; }  // one per axis, or empty where size() is set
    const Shape& size() const { return size_; }
    bool align_corners() const { return align_corners_; }
    std::string describe() const;  // "Upsample(:nearest, scale = 2)", "Upsample(:bilinear, size = (32, 48))"

private:
    UpsampleMode mode_;
    int axes_;                   // 2 (images) or 3 (volumes)
    std::vector<double> scale_;  // one per axis, or empty where size_ is set
    Shape size_;
    bool align_corners_;
};

}  // namespace fluxion

FLUXION_FUNCTOR_NO_FIELDS(fluxion::PixelShuffle);
FLUXION_FUNCTOR_NO_FIELDS(fluxion::Upsample);
