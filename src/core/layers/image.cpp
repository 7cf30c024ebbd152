// image.cpp — checks and text shared by the image layers.
#include "core/layers/image.hpp"

namespace fluxion::detail {

Tensor as_image_batch(const std::string& layer, const Tensor& x, std::int64_t channels) {
    if (!x.defined()) throw ValueError(layer + ": the input is an empty tensor");
    std::string c = channels < 0 ? "C" : std::to_string(channels);
    std::string expected = "{" + c + ", H, W} (one image) or {N, " + c + ", H, W} (a batch)";
    if (x.ndim() != 3 && x.ndim() != 4)
        throw ShapeError(layer + ": input has shape " + to_string(x.shape()) + "; expected " + expected);
    if (channels >= 0 && x.shape(-3) != channels)
        throw ShapeError(layer + ": input has " + std::to_string(x.shape(-3)) + " channels, expected " +
                         std::to_string(channels) + " (input shape " + to_string(x.shape()) + "; expected " + expected +
                         ")");
    return x.ndim() == 3 ? x.unsqueeze(0) : x;
}

Tensor as_sequence_batch(const std::string& layer, const Tensor& x, std::int64_t channels) {
    if (!x.defined()) throw ValueError(layer + ": the input is an empty tensor");
    std::string c = channels < 0 ? "C" : std::to_string(channels);
    std::string expected = "{" + c + ", L} (one sequence) or {N, " + c + ", L} (a batch)";
    if (x.ndim() != 2 && x.ndim() != 3)
        throw ShapeError(layer + ": input has shape " + to_string(x.shape()) + "; expected " + expected);
    if (channels >= 0 && x.shape(-2) != channels)
        throw ShapeError(layer + ": input has " + std::to_string(x.shape(-2)) + " channels, expected " +
                         std::to_string(channels) + " (input shape " + to_string(x.shape()) + "; expected " + expected +
                         ")");
    return (x.ndim() == 2 ? x.unsqueeze(0) : x).unsqueeze(2);
}

Tensor as_volume_batch(const std::string& layer, const Tensor& x, std::int64_t channels) {
    if (!x.defined()) throw ValueError(layer + ": the input is an empty tensor");
    std::string c = channels < 0 ? "C" : std::to_string(channels);
    std::string expected = "{" + c + ", D, H, W} (one volume) or {N, " + c + ", D, H, W} (a batch)";
    if (x.ndim() != 4 && x.ndim() != 5)
        throw ShapeError(layer + ": input has shape " + to_string(x.shape()) + "; expected " + expected);
    if (channels >= 0 && x.shape(-4) != channels)
        throw ShapeError(layer + ": input has " + std::to_string(x.shape(-4)) + " channels, expected " +
                         std::to_string(channels) + " (input shape " + to_string(x.shape()) + "; expected " + expected +
                         ")");
    return x.ndim() == 4 ? x.unsqueeze(0) : x;
}

std::string tuple_text(const Size2& s) {
    std::string t = "(";
    t.append(std::to_string(s.h)).append(", ").append(std::to_string(s.w)).append(")");
    return t;
}

std::string option_text(const char* name, const Size2& v, const Size2& unless) {
    if (v == unless) return "";
    std::string s = ", ";
    s.append(name).append("=").append(v.h == v.w ? std::to_string(v.h) : tuple_text(v));
    return s;
}

}  // namespace fluxion::detail
