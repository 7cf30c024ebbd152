// pooling.cpp — the pooling layers on top of maxpool2d / meanpool2d and mean; 1-d as images of
// height 1, 3-d as (H, W) then depth.
#include "fluxion/layers/pooling.hpp"

#include <array>
#include <vector>

#include "core/layers/context.hpp"
#include "core/layers/image.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

using Axes = std::array<std::int64_t, 3>;  // {d, h, w}

// The window, stride and padding of a pooling over `dims` spatial axes, checked before the layer
// holds any of them; the axes it lacks get a window and stride of 1 and no padding.
struct Geometry {
    Axes window, stride, pad;
};
Geometry geometry(const char* layer, const Axes& window, const PoolOptions& o, int dims) {
    const std::string name = std::string(layer) + "(" + detail::tuple_text(detail::spatial(dims, window)) + ")";
    Geometry g{window, o.stride.values().empty() ? window : detail::per_axis(o.stride, dims, 1, name, "stride"),
               detail::per_axis(o.pad, dims, 0, name, "pad")};
    for (int a = 0; a < 3; ++a)
        if (g.window[a] < 1 || g.stride[a] < 1 || g.pad[a] < 0)
            throw ValueError(name + ": window and stride must be >= 1 and padding >= 0");
    return g;
}

template <class L> std::string pool_text(const char* name, const L& l, int dims) {
    auto axes = [&](std::int64_t d, Size2 hw) { return detail::spatial(dims, {d, hw.h, hw.w}); };
    const std::vector<std::int64_t> window = axes(l.depth_window, l.window);
    return std::string(name) + "(" + detail::tuple_text(window) +
           detail::option_text("pad", axes(l.depth_pad, l.pad), std::vector<std::int64_t>(window.size(), 0)) +
           detail::option_text("stride", axes(l.depth_stride, l.stride), window) + ")";
}

template <class L, class Op> Tensor pool(const L& layer, const Tensor& x, int dims, Op op) {
    Tensor xb = dims == 1   ? detail::as_sequence_batch(layer.describe(), x, -1)
                : dims == 3 ? detail::as_volume_batch(layer.describe(), x, -1)
                            : detail::as_image_batch(layer.describe(), x, -1);
    return detail::in_context(layer, [&] {
        Pool2dOptions o{.window = {layer.window.h, layer.window.w},
                        .stride = {layer.stride.h, layer.stride.w},
                        .padding = {layer.pad.h, layer.pad.w}};
        if (dims == 3) {  // (H, W) of every depth slice, then the depth
            auto n = xb.shape(0), c = xb.shape(1), d = xb.shape(2);
            Tensor y = op(xb.reshape({n, c * d, xb.shape(3), xb.shape(4)}), o);
            auto h = y.shape(2), w = y.shape(3);
            y = op(y.reshape({n, c, d, h * w}), Pool2dOptions{.window = {layer.depth_window, 1},
                                                              .stride = {layer.depth_stride, 1},
                                                              .padding = {layer.depth_pad, 0}});
            return detail::like_volume(x, y.reshape({n, c, y.shape(2), h, w}));
        }
        Tensor y = op(xb, o);
        return dims == 1 ? detail::like_sequence(x, y) : detail::like_input(x, y);
    });
}

}  // namespace

MaxPool::MaxPool(Axes window_dhw, const PoolOptions& o, int dims) : dims_(dims) {
    const Geometry g = geometry("MaxPool", window_dhw, o, dims);
    window = {g.window[1], g.window[2]}, stride = {g.stride[1], g.stride[2]}, pad = {g.pad[1], g.pad[2]};
    depth_window = g.window[0], depth_stride = g.stride[0], depth_pad = g.pad[0];
}
std::string MaxPool::describe() const { return pool_text("MaxPool", *this, dims_); }
Tensor MaxPool::operator()(const Tensor& x) const { return pool(*this, x, dims_, maxpool2d); }

MeanPool::MeanPool(Axes window_dhw, const PoolOptions& o, int dims) : dims_(dims) {
    const Geometry g = geometry("MeanPool", window_dhw, o, dims);
    window = {g.window[1], g.window[2]}, stride = {g.stride[1], g.stride[2]}, pad = {g.pad[1], g.pad[2]};
    depth_window = g.window[0], depth_stride = g.stride[0], depth_pad = g.pad[0];
}
std::string MeanPool::describe() const { return pool_text("MeanPool", *this, dims_); }
Tensor MeanPool::operator()(const Tensor& x) const { return pool(*this, x, dims_, meanpool2d); }

namespace {

// x as a batch for a layer over `axes` spatial axes: {N, C, L}, {N, C, H, W} or {N, C, D, H, W}
// (one sample without N too); ShapeError naming the layer otherwise.
Tensor as_batch(const std::string& layer, const Tensor& x, int axes) {
    if (axes == 1) return detail::as_sequence_batch(layer, x, -1).squeeze(2);
    return axes == 3 ? detail::as_volume_batch(layer, x, -1) : detail::as_image_batch(layer, x, -1);
}

// y {N, ...} back to x's layout: without N where x had none.
Tensor like(const Tensor& x, const Tensor& y, int axes) { return x.ndim() == axes + 1 ? y.squeeze(0) : y; }

int checked_axes(const char* layer, int axes) {
    if (axes < 1 || axes > 3)
        throw ValueError(std::string(layer) + "(): the spatial axes are 1 (sequences), 2 (images) or 3 (volumes), got " +
                         std::to_string(axes));
    return axes;
}

// Reduces every spatial axis of x (all after N and C), keeping them with size 1.
template <class Reduce> Tensor global(const std::string& layer, const Tensor& x, int axes, Reduce reduce) {
    Tensor y = as_batch(layer, x, axes);
    for (int a = 0; a < axes; ++a) y = reduce(y, 2 + a, true);
    return like(x, y, axes);
}

}  // namespace

GlobalMeanPool::GlobalMeanPool(int spatial_axes) : axes_(checked_axes("GlobalMeanPool", spatial_axes)) {}
Tensor GlobalMeanPool::operator()(const Tensor& x) const {
    return global(describe(), x, axes_, [](const Tensor& t, int axis, bool keep) { return mean(t, axis, keep); });
}

GlobalMaxPool::GlobalMaxPool(int spatial_axes) : axes_(checked_axes("GlobalMaxPool", spatial_axes)) {}
Tensor GlobalMaxPool::operator()(const Tensor& x) const {
    return global(describe(), x, axes_, [](const Tensor& t, int axis, bool keep) { return max(t, axis, keep); });
}

namespace {

// PyTorch's adaptive windows along `axis` of x: cell i reduces inputs floor(i·n/m) to
// ceil((i+1)·n/m) - 1. Max and mean are separable, so one axis at a time.
Tensor adaptive_axis(const Tensor& x, int axis, std::int64_t m, bool take_max) {
    const std::int64_t n = x.shape(axis);
    if (n == m) return x;
    std::vector<Tensor> cells;
    for (std::int64_t i = 0; i < m; ++i) {
        Tensor window = x.slice(axis, i * n / m, ((i + 1) * n + m - 1) / m);
        cells.push_back(take_max ? max(window, axis, true) : mean(window, axis, true));
    }
    return concat(cells, axis);
}

// "((5,))", "((7, 7))", "((2, 3, 4))". Appended: GCC 12 sees a false overlap (-Wrestrict) in
// "((" + std::to_string(...).
std::string out_text(Size2 out, std::int64_t depth, int dims) {
    std::string t = "(";
    if (dims == 1) return t.append("(").append(std::to_string(out.w)).append(",))");
    if (dims == 3)
        t.append("(").append(std::to_string(depth)).append(", ").append(std::to_string(out.h)).append(", ")
            .append(std::to_string(out.w)).append(")");
    else t.append(detail::tuple_text(out));
    return t.append(")");
}

template <class L> Tensor adaptive(const L& layer, const Tensor& x, bool take_max) {
    const int dims = layer.spatial_axes();
    Tensor xb = as_batch(layer.describe(), x, dims);
    return detail::in_context(layer, [&] {
        for (int a = 2; a < xb.ndim(); ++a)
            if (xb.shape(a) == 0)
                throw ShapeError("input " + to_string(x.shape()) + " has no elements to pool along axis " +
                                 std::to_string(a));
        if (dims == 1) {
            return like(x, adaptive_axis(xb, 2, layer.out.w, take_max), 1);
        }
        if (dims == 3) {
            Tensor y = adaptive_axis(xb, 2, layer.out_depth, take_max);
            return like(x, adaptive_axis(adaptive_axis(y, 3, layer.out.h, take_max), 4, layer.out.w, take_max), 3);
        }
        const std::int64_t h = xb.shape(2), w = xb.shape(3);
        if (h % layer.out.h == 0 && w % layer.out.w == 0) {  // equal windows: one pooling op
            Pool2dOptions o{.window = {h / layer.out.h, w / layer.out.w}, .padding = {0, 0}};
            return detail::like_input(x, take_max ? maxpool2d(xb, o) : meanpool2d(xb, o));
        }
        return detail::like_input(x,
                                  adaptive_axis(adaptive_axis(xb, 2, layer.out.h, take_max), 3, layer.out.w, take_max));
    });
}

template <class L> void check_out(const L& layer) {
    if (layer.out.h < 1 || layer.out.w < 1 || layer.out_depth < 1)
        throw ValueError(layer.describe() + ": the output size must be positive");
}

}  // namespace

AdaptiveMeanPool::AdaptiveMeanPool(Size2 out_size) : AdaptiveMeanPool(out_size, 1, 2) {}
AdaptiveMeanPool::AdaptiveMeanPool(Size2 out_size, std::int64_t depth, int dims)
    : out(out_size), out_depth(depth), dims_(dims) {
    check_out(*this);
}
std::string AdaptiveMeanPool::describe() const { return "AdaptiveMeanPool" + out_text(out, out_depth, dims_); }
Tensor AdaptiveMeanPool::operator()(const Tensor& x) const { return adaptive(*this, x, false); }

AdaptiveMaxPool::AdaptiveMaxPool(Size2 out_size) : AdaptiveMaxPool(out_size, 1, 2) {}
AdaptiveMaxPool::AdaptiveMaxPool(Size2 out_size, std::int64_t depth, int dims)
    : out(out_size), out_depth(depth), dims_(dims) {
    check_out(*this);
}
std::string AdaptiveMaxPool::describe() const { return "AdaptiveMaxPool" + out_text(out, out_depth, dims_); }
Tensor AdaptiveMaxPool::operator()(const Tensor& x) const { return adaptive(*this, x, true); }

}  // namespace fluxion
