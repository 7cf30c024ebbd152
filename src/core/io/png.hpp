// png.hpp — a tensor as a PNG image (for fx::save_png and TensorBoard's images).
#pragma once
#include <string>
#include <string_view>

#include "fluxion/tensor.hpp"

namespace fluxion::detail {

struct Png {
    std::string bytes;  // the encoded file
    int height = 0, width = 0, channels = 0;
};

// `image` is {H, W} or {C, H, W} with C = 1 (grey), 2 (grey, alpha), 3 (RGB) or 4 (RGBA), on any
// device: u8 as it is, floating types read as [0, 1] (clamped; NaN as 0). `who` names the caller in
// errors (ShapeError, DTypeError).
Png encode_png(const Tensor& image, std::string_view who);

}  // namespace fluxion::detail
