// image.cpp — checks and text shared by the image layers.
#include "core/layers/image.hpp"

#include <algorithm>

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

std::string tuple_text(const std::vector<std::int64_t>& v) {
    std::string t = "(";  // appended: GCC 12 sees a false overlap (-Wrestrict) in "(" + std::to_string(...)
    for (std::size_t i = 0; i < v.size(); ++i) t.append(i ? ", " : "").append(std::to_string(v[i]));
    return t.append(v.size() == 1 ? ",)" : ")");
}

std::string tuple_text(const Size2& s) { return tuple_text(std::vector<std::int64_t>{s.h, s.w}); }

std::string option_text(const char* name, const std::vector<std::int64_t>& v, const std::vector<std::int64_t>& unless) {
    if (v == unless) return "";
    const bool one = std::all_of(v.begin(), v.end(), [&](std::int64_t x) { return x == v[0]; });
    std::string s = ", ";
    s.append(name).append("=").append(one ? std::to_string(v[0]) : tuple_text(v));
    return s;
}

std::string option_text(const char* name, const Size2& v, const Size2& unless) {
    return option_text(name, std::vector<std::int64_t>{v.h, v.w}, std::vector<std::int64_t>{unless.h, unless.w});
}

std::vector<std::int64_t> spatial(int dims, const std::array<std::int64_t, 3>& dhw) {
    return {dhw.end() - dims, dhw.end()};
}

std::array<std::int64_t, 3> per_axis(const Sizes& s, int dims, std::int64_t absent, const std::string& layer,
                                     const char* option) {
    const std::vector<std::int64_t>& v = s.values();
    if (v.size() != 1 && v.size() != std::size_t(dims))
        throw ValueError(layer + ": " + option + " takes " +
                         (dims == 1 ? std::string("one value")
                                    : "one value for every axis or " + std::to_string(dims) + " (one per axis)") +
                         ", given " + std::to_string(v.size()) + ": " + tuple_text(v));
    std::array<std::int64_t, 3> dhw{absent, absent, absent};
    for (int a = 0; a < dims; ++a) dhw[3 - dims + a] = v.size() == 1 ? v[0] : v[a];
    return dhw;
}

}  // namespace fluxion::detail
