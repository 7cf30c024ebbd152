// upsample.cpp — PixelShuffle as a reshape and a permutation; Upsample one axis at a time: nearest
// as index_select, (bi/tri)linear as a product with a small interpolation matrix {out, in} built on
// the host (out = A_h · x · A_wᵀ, then A_d along the depth), so that all are differentiable, run on
// every device and compile.
#include "fluxion/layers/upsample.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/layers/context.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

std::string number(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
}

void check_image(const std::string& layer, const Tensor& x, int axes = 2) {
    if (!x.defined()) throw ValueError(layer + ": the input is an empty tensor");
    if (axes == 3 && x.ndim() != 4 && x.ndim() != 5)
        throw ShapeError(layer + ": input has shape " + to_string(x.shape()) +
                         "; expected {C, D, H, W} or {N, C, D, H, W}");
    if (axes == 2 && x.ndim() != 3 && x.ndim() != 4)
        throw ShapeError(layer + ": input has shape " + to_string(x.shape()) + "; expected {C, H, W} or {N, C, H, W}");
}

const char* mode_name(UpsampleMode m) {
    return m == UpsampleMode::nearest ? ":nearest" : m == UpsampleMode::bilinear ? ":bilinear" : ":trilinear";
}

// PyTorch's input index of each output index along an axis of `in` values resized to `out`:
// floor(o · in/out) in single precision, as its kernels compute it (1/scale where a scale is given).
Tensor nearest_indices(std::int64_t in, std::int64_t out, double scale, const Device& device) {
    std::vector<std::int64_t> index(static_cast<std::size_t>(out));
    const float ratio = scale > 0 ? static_cast<float>(1.0 / scale) : static_cast<float>(in) / static_cast<float>(out);
    for (std::int64_t o = 0; o < out; ++o)
        index[o] = out == in ? o : std::min<std::int64_t>(static_cast<std::int64_t>(std::floor(o * ratio)), in - 1);
    return tensor(index, {out}).to(device);
}

// The {out, in} matrix of linear interpolation along one axis, PyTorch's area_pixel source index:
// aligned corners place output o at o·(in-1)/(out-1); otherwise at (o + ½)·ratio - ½, clamped at 0.
Tensor bilinear_matrix(std::int64_t in, std::int64_t out, double scale, bool align_corners, const Tensor& like) {
    std::vector<double> a(static_cast<std::size_t>(out * in), 0.0);
    const double ratio = align_corners ? (out > 1 ? double(in - 1) / double(out - 1) : 0.0)
                         : scale > 0   ? 1.0 / scale
                                       : double(in) / double(out);
    for (std::int64_t o = 0; o < out; ++o) {
        const double src = align_corners ? ratio * o : std::max(ratio * (o + 0.5) - 0.5, 0.0);
        const auto i0 = std::min(static_cast<std::int64_t>(src), in - 1);
        const std::int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
        const double l1 = std::min(src - double(i0), 1.0);
        a[o * in + i0] += 1.0 - l1;
        a[o * in + i1] += l1;
    }
    return tensor(a, {out, in}).to(like.dtype()).to(like.device());
}

}  // namespace

// ---- PixelShuffle ----

PixelShuffle::PixelShuffle(std::int64_t factor) : factor_(factor) {
    if (factor < 1) throw ValueError("PixelShuffle(" + std::to_string(factor) + "): the factor must be positive");
}

Tensor PixelShuffle::operator()(const Tensor& x) const {
    check_image(describe(), x);
    const std::int64_t r = factor_, channels = x.shape(-3);
    if (channels % (r * r) != 0)
        throw ShapeError(describe() + ": input has " + std::to_string(channels) + " channels, not a multiple of " +
                         std::to_string(r * r) + " (input shape " + to_string(x.shape()) + ")");
    return detail::in_context(*this, [&] {
        const Tensor batch = x.ndim() == 4 ? x : x.unsqueeze(0);
        const std::int64_t n = batch.shape(0), c = channels / (r * r), h = batch.shape(2), w = batch.shape(3);
        Tensor y = batch.reshape({n, c, r, r, h, w}).permute({0, 1, 4, 2, 5, 3}).reshape({n, c, h * r, w * r});
        return x.ndim() == 4 ? y : y.squeeze(0);
    });
}

// ---- Upsample ----

Upsample::Upsample(UpsampleMode mode, const UpsampleOptions& o)
    : mode_(mode), scale_(o.scale), size_(o.size), align_corners_(o.align_corners) {
    const std::string layer = std::string("Upsample(") + mode_name(mode) + ")";
    axes_ = mode == UpsampleMode::trilinear || o.scale.size() == 3 || o.size.size() == 3 ? 3 : 2;
    if (scale_.size() == 1) scale_.assign(std::size_t(axes_), scale_[0]);
    if (scale_.empty() == size_.empty()) throw ValueError(layer + ": give either scale or size, not both or neither");
    const std::string axes = axes_ == 3 ? "three" : "two";
    if (!o.scale.empty() && (scale_.size() != std::size_t(axes_) ||
                             std::any_of(scale_.begin(), scale_.end(), [](double v) { return v <= 0; })))
        throw ValueError(layer + ": scale must be one or " + axes + " positive numbers");
    if (!size_.empty() && (size_.size() != std::size_t(axes_) ||
                           std::any_of(size_.begin(), size_.end(), [](std::int64_t v) { return v < 1; })))
        throw ValueError(layer + ": size must be " + axes + " positive lengths " +
                         (axes_ == 3 ? "{depth, height, width}" : "{height, width}") + ", got " + to_string(size_));
    if (mode == UpsampleMode::bilinear && axes_ == 3)
        throw ValueError(layer + ": bilinear resizes images; use trilinear for volumes");
    if (align_corners_ && mode == UpsampleMode::nearest)
        throw ValueError(layer + ": align_corners applies to bilinear and trilinear interpolation only");
}

std::string Upsample::describe() const {
    std::string s = std::string("Upsample(") + mode_name(mode_) + ", ";
    auto tuple = [](const auto& v, auto text) {
        std::string t = "(";
        for (std::size_t i = 0; i < v.size(); ++i) t += (i ? ", " : "") + text(v[i]);
        return t + ")";
    };
    if (!scale_.empty())
        s += std::all_of(scale_.begin(), scale_.end(), [&](double v) { return v == scale_[0]; })
                 ? "scale = " + number(scale_[0])
                 : "scale = " + tuple(scale_, number);
    else s += "size = " + tuple(size_, [](std::int64_t v) { return std::to_string(v); });
    if (align_corners_) s += ", align_corners=true";
    return s + ")";
}

Tensor Upsample::operator()(const Tensor& x) const {
    check_image(describe(), x, axes_);
    std::vector<std::int64_t> out(std::size_t(axes_), 0);
    for (int a = 0; a < axes_; ++a) {
        out[a] =
            size_.empty() ? static_cast<std::int64_t>(std::floor(double(x.shape(a - axes_)) * scale_[a])) : size_[a];
        if (out[a] < 1) throw ShapeError(describe() + ": input " + to_string(x.shape()) + " would become empty");
    }
    auto scale = [&](int a) { return scale_.empty() ? 0.0 : scale_[a]; };
    return detail::in_context(*this, [&] {
        const int last = x.ndim() - 1;
        if (mode_ == UpsampleMode::nearest) {
            Tensor y = x;
            for (int a = 0; a < axes_; ++a) {
                const int axis = last - axes_ + 1 + a;
                y = index_select(y, axis, nearest_indices(x.shape(axis), out[a], scale(a), x.device()));
            }
            return y;
        }
        const int h = axes_ - 2, w = axes_ - 1;  // the indices of height and width in out
        Tensor rows = bilinear_matrix(x.shape(-2), out[h], scale(h), align_corners_, x);
        Tensor cols = bilinear_matrix(x.shape(-1), out[w], scale(w), align_corners_, x);
        Tensor y = matmul(matmul(rows, x), cols.transpose());
        if (axes_ == 2) return y;
        // The depth: {..., D, H'·W'} times A_d from the left.
        Shape flat(y.shape().begin(), y.shape().end() - 2), back = flat;
        flat.push_back(out[h] * out[w]);
        back.back() = out[0], back.push_back(out[h]), back.push_back(out[w]);
        Tensor depth = bilinear_matrix(x.shape(-3), out[0], scale(0), align_corners_, x);
        return matmul(depth, y.reshape(flat)).reshape(back);
    });
}

}  // namespace fluxion
