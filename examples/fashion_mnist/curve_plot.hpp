// curve_plot.hpp — the training curve as a picture, for fashion_mnist_curve.png beside the CSV: one
// panel per series (train loss, then test accuracy), one point per epoch, joined by lines, over
// five grid lines spanning the series' own range. The numbers are in the CSV and on the console;
// the picture shows the shape. Drawn here into pixels; encoded by libpng through fx::save_png.
#pragma once
#include <fluxion/fluxion.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace curve_plot {

using Colour = std::array<std::uint8_t, 3>;

struct Series {
    std::vector<double> values;  // one per epoch
    Colour colour;
};

// A {3, H, W} u8 image (PyTorch's layout): the panels side by side.
inline fluxion::Tensor plot(const std::vector<Series>& series) {
    constexpr std::int64_t kPanelW = 420, kPanelH = 300, kMargin = 24;
    const std::int64_t width = kPanelW * static_cast<std::int64_t>(series.size()), height = kPanelH;
    std::vector<std::uint8_t> rgb(static_cast<std::size_t>(3 * width * height), 255);
    auto put = [&](std::int64_t x, std::int64_t y, const Colour& c) {
        if (x < 0 || y < 0 || x >= width || y >= height) return;
        for (std::size_t k = 0; k < 3; ++k) rgb[static_cast<std::size_t>((static_cast<std::int64_t>(k) * height + y) * width + x)] = c[k];
    };
    auto square = [&](std::int64_t cx, std::int64_t cy, std::int64_t r, const Colour& c) {
        for (std::int64_t y = cy - r; y <= cy + r; ++y)
            for (std::int64_t x = cx - r; x <= cx + r; ++x) put(x, y, c);
    };
    // A line two pixels wide: a small square at every step of the longer axis.
    auto line = [&](std::int64_t x0, std::int64_t y0, std::int64_t x1, std::int64_t y1, const Colour& c) {
        const std::int64_t steps = std::max(std::abs(x1 - x0), std::abs(y1 - y0));
        for (std::int64_t i = 0; i <= steps; ++i) {
            const double t = steps ? double(i) / double(steps) : 0.0;
            square(std::lround(double(x0) + t * double(x1 - x0)), std::lround(double(y0) + t * double(y1 - y0)), 1, c);
        }
    };
    const Colour grid{225, 225, 225}, axis{120, 120, 120};
    for (std::size_t p = 0; p < series.size(); ++p) {
        const std::int64_t left = static_cast<std::int64_t>(p) * kPanelW + kMargin, right = (static_cast<std::int64_t>(p) + 1) * kPanelW - kMargin;
        const std::int64_t top = kMargin, bottom = kPanelH - kMargin;
        for (int g = 0; g <= 4; ++g) {
            const std::int64_t y = top + (bottom - top) * g / 4;
            for (std::int64_t x = left; x <= right; ++x) put(x, y, g == 4 ? axis : grid);
        }
        for (std::int64_t y = top; y <= bottom; ++y) put(left, y, axis);
        const auto& v = series[p].values;
        double lo = INFINITY, hi = -INFINITY;  // over the finite values; the others are not drawn
        for (double x : v)
            if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
        if (!std::isfinite(lo)) continue;
        if (!(hi > lo)) lo -= 0.5, hi += 0.5;
        auto px = [&](std::size_t i) {
            return v.size() == 1 ? (left + right) / 2
                                 : left + 8 + (right - left - 16) * static_cast<std::int64_t>(i) / static_cast<std::int64_t>(v.size() - 1);
        };
        auto py = [&](double value) { return bottom - 8 - std::lround((value - lo) / (hi - lo) * double(bottom - top - 16)); };
        for (std::size_t i = 0; i + 1 < v.size(); ++i)
            if (std::isfinite(v[i]) && std::isfinite(v[i + 1])) line(px(i), py(v[i]), px(i + 1), py(v[i + 1]), series[p].colour);
        for (std::size_t i = 0; i < v.size(); ++i)
            if (std::isfinite(v[i])) square(px(i), py(v[i]), 3, series[p].colour);
    }
    return fluxion::tensor(rgb, {3, height, width});
}

}  // namespace curve_plot
