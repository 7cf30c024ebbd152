// operators_resize.cpp — ONNX's Resize (and the older Upsample) as fluxion's ops: resizing is
// separable, so each resized axis is a weighted sum of a few index_selects of its input (taps), the
// indices and weights computed on the host as ONNX's reference computes them. Nearest, linear and
// cubic, every coordinate_transformation_mode and nearest_mode, antialias, exclude_outside,
// tf_crop_and_resize's extrapolation, axes and keep_aspect_ratio_policy; differentiable in x.
#include <algorithm>
#include <cmath>
#include <functional>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using Ints = std::vector<std::int64_t>;
using Coefficients = std::function<std::vector<double>(double ratio, double scale)>;

std::vector<double> floats_of(const Tensor& t) { return t.to(DType::f64).to_vector<double>(); }

// The weights of the taps around a sample point, from its distance past the tap before it
// (`ratio`, in (0, 1]): ONNX's reference kernels.
Coefficients coefficients(const Node& n, const std::string& mode, bool antialias) {
    if (mode == "nearest") {
        if (antialias) n.unsupported("antialias with mode=nearest");
        const std::string rounding = n.opset() < 11 ? "floor" : n.s("nearest_mode", "round_prefer_floor");
        if (rounding != "round_prefer_floor" && rounding != "round_prefer_ceil" && rounding != "floor" &&
            rounding != "ceil")
            n.unsupported("nearest_mode=" + rounding);
        return [rounding](double r, double) -> std::vector<double> {
            if (r == 1) return {0, 1};
            const bool next = rounding == "round_prefer_floor"  ? r > 0.5
                              : rounding == "round_prefer_ceil" ? r >= 0.5
                                                                : rounding == "ceil";
            return {next ? 0.0 : 1.0, next ? 1.0 : 0.0};
        };
    }
    if (mode == "linear") {
        if (!antialias) return [](double r, double) -> std::vector<double> { return {1 - r, r}; };
        return [](double r, double scale) {  // a triangle stretched over the input when downsampling
            scale = std::min(scale, 1.0);
            const auto start = std::int64_t(std::floor(-1 / scale) + 1);
            std::vector<double> c;
            double total = 0;
            for (std::int64_t i = start; i < start + 2 - 2 * start; ++i)
                total += c.emplace_back(std::clamp(1 - std::abs((double(i) - r) * scale), 0.0, 1.0));
            for (auto& v : c) v /= total;
            return c;
        };
    }
    if (mode == "cubic") {
        const double a = n.f("cubic_coeff_a", -0.75f);
        auto kernel = [a](double x) {  // Keys' cubic convolution
            x = std::abs(x);
            if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
            if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
            return 0.0;
        };
        if (!antialias)
            return [kernel](double r, double) -> std::vector<double> {
                return {kernel(r + 1), kernel(r), kernel(1 - r), kernel(2 - r)};
            };
        return [kernel](double r, double scale) {
            scale = std::min(scale, 1.0);
            const auto start = std::int64_t(std::floor(-2 / scale) + 1);
            std::vector<double> c;
            double total = 0;
            for (std::int64_t i = start; i < 2 - start; ++i) total += c.emplace_back(kernel(scale * (double(i) - r)));
            for (auto& v : c) v /= total;
            return c;
        };
    }
    n.unsupported("mode=" + mode);
}

struct Axis {
    std::int64_t in, out;
    double scale;
    double roi_start = 0, roi_end = 1;
};

// The source coordinate of output index `o` along `a`.
double source(const Node& n, const std::string& transform, const Axis& a, std::int64_t o) {
    const double out = a.scale * double(a.in), x = double(o);
    if (transform == "half_pixel") return (x + 0.5) / a.scale - 0.5;
    if (transform == "asymmetric") return x / a.scale;
    if (transform == "align_corners") return out == 1 ? 0 : x * double(a.in - 1) / (out - 1);
    if (transform == "pytorch_half_pixel") return out == 1 ? -0.5 : (x + 0.5) / a.scale - 0.5;
    if (transform == "tf_half_pixel_for_nn") return (x + 0.5) / a.scale;
    if (transform == "half_pixel_symmetric") {
        const double centre = double(a.in) / 2, offset = centre * (1 - double(a.out) / out);
        return offset + (x + 0.5) / a.scale - 0.5;
    }
    if (transform == "tf_crop_and_resize") {
        const double span = (a.roi_end - a.roi_start) * double(a.in - 1);
        return (out == 1 ? span / 2 : x * span / (out - 1)) + a.roi_start * double(a.in - 1);
    }
    n.unsupported("coordinate_transformation_mode=" + transform);
}

// `x` resized along `axis`.
Tensor resize_axis(const Node& n, const Tensor& x, int axis, const Axis& a, const Coefficients& coefficients,
                   const std::string& transform) {
    const bool exclude_outside = n.i("exclude_outside", 0) != 0;
    std::vector<Ints> index;                  // [tap][output]
    std::vector<std::vector<double>> weight;  // [tap][output]
    std::vector<bool> outside(std::size_t(a.out), false);
    for (std::int64_t o = 0; o < a.out; ++o) {
        const double s = source(n, transform, a, o);
        if (transform == "tf_crop_and_resize") outside[std::size_t(o)] = s < 0 || s > double(a.in - 1);
        const double whole = std::floor(s);
        std::vector<double> c = coefficients(s == whole ? 1.0 : s - whole, a.scale);
        const auto taps = std::int64_t(c.size()), pad = (taps + 1) / 2;
        // The taps are the `taps` indices nearest s, the smaller on a tie (ONNX's reference).
        const double shifted = s + double(pad), p = std::floor(shifted), frac = shifted - p;
        const std::int64_t offset = taps % 2 == 0 ? (frac == 0 ? -(taps / 2) : -(taps / 2) + 1)
                                                  : (frac <= 0.5 ? -((taps - 1) / 2) : -((taps - 1) / 2) + 1);
        const std::int64_t first = std::int64_t(p) + offset - pad;
        if (exclude_outside) {
            double total = 0;
            for (std::int64_t k = 0; k < taps; ++k)
                total += (first + k < 0 || first + k >= a.in) ? (c[std::size_t(k)] = 0) : c[std::size_t(k)];
            for (auto& v : c) v /= total == 0 ? 1 : total;
        }
        if (index.empty()) index.resize(std::size_t(taps)), weight.resize(std::size_t(taps));
        for (std::int64_t k = 0; k < taps; ++k) {
            index[std::size_t(k)].push_back(std::clamp<std::int64_t>(first + k, 0, a.in - 1));
            weight[std::size_t(k)].push_back(c[std::size_t(k)]);
        }
    }
    Shape along(std::size_t(x.ndim()), 1);
    along[std::size_t(axis)] = a.out;
    auto column = [&](const std::vector<double>& v) {
        return tensor(v, {a.out}).reshape(along).to(x.dtype()).to(x.device());
    };
    auto take = [&](const Ints& i) { return index_select(x, axis, tensor(i, {a.out}).to(x.device())); };
    const bool zero_one = std::all_of(weight.begin(), weight.end(), [](const auto& w) {
        return std::all_of(w.begin(), w.end(), [](double v) { return v == 0 || v == 1; });
    });
    Tensor y;
    if (zero_one) {  // nearest: one index per output, exact for any value and any dtype
        Ints chosen(std::size_t(a.out));
        for (std::size_t k = 0; k < weight.size(); ++k)
            for (std::size_t o = 0; o < chosen.size(); ++o)
                if (weight[k][o] == 1) chosen[o] = index[k][o];
        y = take(chosen);
    } else {
        if (!is_floating(x.dtype())) n.unsupported("interpolating a " + std::string(name(x.dtype())) + " tensor");
        for (std::size_t k = 0; k < index.size(); ++k) {
            const Tensor term = take(index[k]) * column(weight[k]);
            y = y.defined() ? y + term : term;
        }
    }
    if (std::find(outside.begin(), outside.end(), true) != outside.end()) {
        std::vector<double> keep(outside.size()), fill(outside.size());
        for (std::size_t o = 0; o < outside.size(); ++o)
            keep[o] = outside[o] ? 0 : 1, fill[o] = outside[o] ? n.f("extrapolation_value", 0) : 0;
        y = y * column(keep) + column(fill);
    }
    return y;
}

Ts resize(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const int rank = x.ndim();
    const bool upsample = n.op() == "Upsample";
    std::string mode = n.s("mode", "nearest");
    if (mode == "bilinear") mode = "linear";  // Upsample-7's name for it
    const bool antialias = n.i("antialias", 0) != 0;
    const Coefficients c = coefficients(n, mode, antialias);
    const std::string transform =
        upsample || n.opset() < 11 ? "asymmetric" : n.s("coordinate_transformation_mode", "half_pixel");
    // Inputs: Upsample (X, scales) or scales as an attribute; Resize-10 (X, scales); Resize-11+ (X, roi, scales,
    // sizes).
    std::vector<double> scales, roi;
    Ints sizes;
    auto given = [&](std::size_t i) { return i < in.size() && in[i].defined() && in[i].numel() > 0; };
    if (upsample && n.opset() < 9) {
        for (const auto& a : n.proto().attribute())
            if (a.name() == "scales") scales.assign(a.floats().begin(), a.floats().end());
    } else if (upsample || n.opset() < 11) {
        if (given(1)) scales = floats_of(in[1]);
    } else {
        if (given(1)) roi = floats_of(in[1]);
        if (given(2)) scales = floats_of(in[2]);
        if (given(3)) sizes = host_ints(in[3]);
    }
    Ints axes = n.ints("axes");
    if (axes.empty())
        for (int a = 0; a < rank; ++a) axes.push_back(a);
    for (auto& a : axes) a = axis_of(a, rank, n);
    if (scales.empty() == sizes.empty()) n.unsupported("neither or both of scales and sizes given");
    if ((!scales.empty() && scales.size() != axes.size()) || (!sizes.empty() && sizes.size() != axes.size()))
        n.unsupported("scales or sizes of a length other than the axes'");
    std::vector<Axis> resized;
    for (std::size_t i = 0; i < axes.size(); ++i) {
        const std::int64_t len = x.shape(int(axes[i]));
        Axis a{len, len, 1};
        if (!scales.empty()) a.scale = scales[i], a.out = std::int64_t(scales[i] * double(len));
        else a.out = sizes[i], a.scale = double(sizes[i]) / double(len);
        if (roi.size() == 2 * axes.size()) a.roi_start = roi[i], a.roi_end = roi[i + axes.size()];
        else if (roi.size() == 2 * std::size_t(rank))
            a.roi_start = roi[std::size_t(axes[i])], a.roi_end = roi[std::size_t(axes[i]) + std::size_t(rank)];
        resized.push_back(a);
    }
    const std::string policy = n.s("keep_aspect_ratio_policy", "stretch");
    if (!sizes.empty() && policy != "stretch") {
        if (policy != "not_larger" && policy != "not_smaller") n.unsupported("keep_aspect_ratio_policy=" + policy);
        double scale = resized[0].scale;
        for (const auto& a : resized)
            scale = policy == "not_larger" ? std::min(scale, a.scale) : std::max(scale, a.scale);
        for (auto& a : resized) a.scale = scale, a.out = std::int64_t(scale * double(a.in) + 0.5);
    }
    Tensor y = x;
    for (std::size_t i = 0; i < axes.size(); ++i) {
        const Axis& a = resized[i];
        const bool whole = a.roi_start == 0 && a.roi_end == 1;
        if (std::abs(a.scale - 1) < 1e-9 && a.out == a.in && (whole || transform != "tf_crop_and_resize")) continue;
        y = resize_axis(n, y, int(axes[i]), a, c, transform);
    }
    return {y};
}

}  // namespace

void add_resize_operators(std::map<std::string, Operator>& t) {
    t["Resize"] = resize;
    t["Upsample"] = resize;
}

}  // namespace fluxion::onnx::detail
