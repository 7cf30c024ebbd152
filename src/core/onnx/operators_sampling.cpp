// operators_sampling.cpp — ONNX's AffineGrid and GridSample (a spatial transformer's two halves) as
// fluxion's ops. The sample points are read on the host to choose each output's taps (their indices,
// which pixels fall outside); the weights are computed from the grid with fluxion's ops and the
// pixels gathered with index_select, so that the result differentiates in the image and the grid.
#include <algorithm>
#include <cmath>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using I = std::int64_t;

// grid = theta · (x, y[, z], 1) at every position of an evenly spaced grid over [-1, 1], in
// {N, [D,] H, W, r} with (x, y[, z]) along (W, H[, D]).
Ts affine_grid(const Node& n, const Ts& in) {
    const Tensor& theta = in[0];
    const auto size = host_ints(in[1]);
    const bool align = n.i("align_corners", 0) != 0;
    const std::size_t r = size.size() - 2;
    if ((r != 2 && r != 3) || theta.ndim() != 3 || theta.shape(1) != I(r) || theta.shape(2) != I(r + 1) ||
        theta.shape(0) != size[0])
        throw ShapeError("fx::onnx: " + n.label() + ": theta " + to_string(theta.shape()) + " and size of " +
                         std::to_string(size.size()) + " values do not make a 2-d {N, 2, 3} or 3-d {N, 3, 4} transform");
    const Shape dims(size.begin() + 2, size.end());
    const I points = numel(dims);
    auto position = [align](I i, I d) {
        if (align) return d == 1 ? -1.0 : -1.0 + 2.0 * double(i) / double(d - 1);
        return (2.0 * double(i) + 1.0) / double(d) - 1.0;
    };
    std::vector<double> base(std::size_t(points) * (r + 1));
    for (I p = 0; p < points; ++p) {
        I rest = p;
        for (std::size_t a = r; a-- > 0;) {  // the last axis (W) is x, the homogeneous coordinate's first
            base[std::size_t(p) * (r + 1) + (r - 1 - a)] = position(rest % dims[a], dims[a]);
            rest /= dims[a];
        }
        base[std::size_t(p) * (r + 1) + r] = 1.0;
    }
    const Tensor b = on_like(base, {points, I(r + 1)}, theta);
    Shape out{size[0]};
    out.insert(out.end(), dims.begin(), dims.end());
    out.push_back(I(r));
    return {matmul(b, transpose(theta, 1, 2)).reshape(out)};
}

// Where a tap falls on one axis of `d` pixels: its index and whether it reads a pixel (zeros padding
// reads none outside), as ONNX's reference and PyTorch's grid_sample place it.
struct Tap {
    I index;
    bool inside;
};

// x reflected into [lo, hi] by the nearer border, as often as it takes; `slope` is d(result)/dx:
// -1 after an even number of further crossings, +1 after an odd one.
double reflect(double x, double lo, double hi, double* slope = nullptr) {
    const double range = hi - lo;
    double s = 1.0, y = x;
    if (range <= 0) s = 0.0, y = lo;
    else if (x < lo || x > hi) {
        const double dx = x < lo ? lo - x : x - hi, m = std::floor(dx / range), rem = dx - m * range;
        const bool even = std::fmod(m, 2.0) == 0;
        s = even ? -1.0 : 1.0;
        y = x < lo ? (even ? lo + rem : hi - rem) : (even ? hi - rem : lo + rem);
    }
    if (slope) *slope = s;
    return y;
}

struct Axis {
    I size;
    double lo, hi;  // the borders reflection reflects at
};

Tap tap(I i, const Axis& a, const std::string& padding) {
    if (padding == "zeros") return {i >= 0 && i < a.size ? i : 0, i >= 0 && i < a.size};
    if (padding == "border") return {std::clamp<I>(i, 0, a.size - 1), true};
    return {std::clamp<I>(I(reflect(double(i), a.lo, a.hi)), 0, a.size - 1), true};  // truncated, as the reference
}

// Keys' cubic convolution weights (a = -0.75) of the four taps around a point t past the second.
Ts cubic_weights(const Tensor& t) {
    constexpr double a = -0.75;
    auto far = [](const Tensor& s) { return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a; };  // 1 < s < 2
    auto near = [](const Tensor& s) { return ((a + 2) * s - (a + 3)) * s * s + 1.0; };    // s <= 1
    return {far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)};
}

Ts grid_sample(const Node& n, const Ts& in) {
    const Tensor &x = in[0], &grid = in[1];
    std::string mode = n.s("mode", n.opset() < 20 ? "bilinear" : "linear");
    if (mode == "bilinear") mode = "linear";
    if (mode == "bicubic") mode = "cubic";
    const std::string padding = n.s("padding_mode", "zeros");
    const bool align = n.i("align_corners", 0) != 0;
    if (mode != "linear" && mode != "nearest" && mode != "cubic") n.unsupported("mode=" + mode);
    if (padding != "zeros" && padding != "border" && padding != "reflection") n.unsupported("padding_mode=" + padding);
    const int r = x.ndim() - 2;
    if (r < 1 || grid.ndim() != r + 2 || grid.shape(0) != x.shape(0) || grid.shape(-1) != r)
        throw ShapeError("fx::onnx: " + n.label() + ": an input " + to_string(x.shape()) + " takes a grid {N, ..., " +
                         std::to_string(r) + "} of rank " + std::to_string(r + 2) + ", not " + to_string(grid.shape()));
    values_read_on_host(n, "its sample points (to choose its taps)");
    const I batch = x.shape(0), channels = x.shape(1);
    const Shape out_dims(grid.shape().begin() + 1, grid.shape().end() - 1);
    const I outs = numel(out_dims), points = batch * outs;
    Shape out_shape{batch, channels};
    out_shape.insert(out_shape.end(), out_dims.begin(), out_dims.end());
    if (points == 0 || channels == 0) return {zeros(out_shape, {.dtype = x.dtype(), .device = x.device()})};

    // Each axis's sample coordinate in pixels, {N·outs}, from the grid's component r-1-axis.
    std::vector<Axis> axes;
    std::vector<Tensor> coordinate;
    std::vector<std::vector<double>> host;
    I pixels = 1;
    for (int a = 0; a < r; ++a) {
        const I d = x.shape(2 + a);
        pixels *= d;
        axes.push_back({d, align ? 0.0 : -0.5, align ? double(d - 1) : double(d) - 0.5});
        const Tensor g = grid.select(-1, r - 1 - a).reshape({points});
        Tensor c = align ? (g + 1.0) * (0.5 * double(d - 1)) : ((g + 1.0) * double(d) - 1.0) * 0.5;
        std::vector<double> v = c.detach().to(Device{}).to(DType::f64).to_vector<double>();
        if (mode == "nearest")
            for (auto& e : v) e = std::nearbyint(e);  // halves to even, as PyTorch
        // Points outside the borders move in: clamped (border) or reflected, kept as slope·c + shift
        // so that the gradient follows (0 where clamped, mirrored where reflected).
        if (padding != "zeros") {
            std::vector<double> slope(v.size(), 1.0), shift(v.size(), 0.0);
            bool moved = false;
            const Axis& ax = axes.back();
            for (std::size_t i = 0; i < v.size(); ++i) {
                if (v[i] >= ax.lo && v[i] <= ax.hi) continue;
                const double to = padding == "border" ? std::clamp(v[i], 0.0, double(d - 1))
                                                      : reflect(v[i], ax.lo, ax.hi, &slope[i]);
                if (padding == "border") slope[i] = 0.0;
                shift[i] = to - slope[i] * v[i];
                v[i] = to;
                moved = true;
            }
            if (moved) c = c * on_like(slope, {points}, c) + on_like(shift, {points}, c);
        }
        coordinate.push_back(c);
        host.push_back(std::move(v));
    }

    // Per axis: the taps' offsets from floor(c) and their weights as tensors of c (nearest: one tap).
    const int taps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
    const int first = mode == "cubic" ? -1 : 0;
    std::vector<Ts> weights(static_cast<std::size_t>(r));
    std::vector<std::vector<double>> floors(static_cast<std::size_t>(r));
    for (int a = 0; a < r; ++a) {
        auto& f = floors[std::size_t(a)];
        for (double v : host[std::size_t(a)]) f.push_back(mode == "nearest" ? std::trunc(v) : std::floor(v));
        if (mode == "nearest") continue;
        const Tensor t = coordinate[std::size_t(a)] - on_like(f, {points}, coordinate[std::size_t(a)]);
        weights[std::size_t(a)] = mode == "linear" ? Ts{1.0 - t, t} : cubic_weights(t);
    }

    // {N·pixels, C}: each pixel's channels a row, gathered by every combination of the axes' taps.
    std::vector<int> to_rows{0};
    for (int a = 0; a < r; ++a) to_rows.push_back(2 + a);
    to_rows.push_back(1);
    const Tensor rows = x.permute(to_rows).reshape({batch * pixels, channels});
    Tensor y;
    I combinations = 1;
    for (int a = 0; a < r; ++a) combinations *= taps;
    for (I k = 0; k < combinations; ++k) {
        std::vector<std::int64_t> index(static_cast<std::size_t>(points));
        std::vector<double> inside(static_cast<std::size_t>(points), 1.0);
        bool any_outside = false;
        for (I p = 0; p < points; ++p) {
            I flat = 0, rest = k;
            for (int a = 0; a < r; ++a) {
                const int offset = first + int(rest % taps);
                rest /= taps;
                const Tap t = tap(I(floors[std::size_t(a)][std::size_t(p)]) + offset, axes[std::size_t(a)], padding);
                flat = flat * axes[std::size_t(a)].size + t.index;
                if (!t.inside) inside[std::size_t(p)] = 0.0, any_outside = true;
            }
            index[std::size_t(p)] = (p / outs) * pixels + flat;
        }
        Tensor part = index_select(rows, 0, tensor(index, {points}).to(x.device()));
        Tensor w;
        I rest = k;
        for (int a = 0; a < r && mode != "nearest"; ++a) {
            const Tensor& wa = weights[std::size_t(a)][std::size_t(rest % taps)];
            rest /= taps;
            w = w.defined() ? w * wa : wa;
        }
        if (any_outside) {
            const Tensor mask = on_like(inside, {points}, x);
            w = w.defined() ? w * mask : mask;
        }
        if (w.defined()) part = part * w.reshape({points, 1});
        y = y.defined() ? y + part : part;
    }
    Shape rows_shape{batch};
    rows_shape.insert(rows_shape.end(), out_dims.begin(), out_dims.end());
    rows_shape.push_back(channels);
    std::vector<int> back{0, r + 1};
    for (int a = 0; a < r; ++a) back.push_back(1 + a);
    return {y.reshape(rows_shape).permute(back)};
}

}  // namespace

void add_sampling_operators(std::map<std::string, Operator>& t) {
    t["AffineGrid"] = affine_grid;
    t["GridSample"] = grid_sample;
}

}  // namespace fluxion::onnx::detail
