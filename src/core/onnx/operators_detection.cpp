// operators_detection.cpp — ONNX's detection and patch operators: NonMaxSuppression (a greedy choice
// among boxes, made on the host), RoiAlign (bilinear taps chosen on the host from the regions, their
// weights and gathers through fluxion's ops, so that it differentiates in the image) and Col2Im (a
// one-hot matrix product, differentiable in its columns) and DeformConv (bilinear taps as RoiAlign's,
// differentiable in all its inputs).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using I = std::int64_t;

// ---- NonMaxSuppression ----

struct Box {
    double y1, x1, y2, x2;
};

Box box_at(const std::vector<double>& b, std::size_t at, bool center) {
    const double* v = &b[at * 4];
    if (center)  // (x_center, y_center, width, height)
        return {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
    // (y1, x1, y2, x2) with either corner first
    return {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3])};
}

double iou(const Box& a, const Box& b) {
    const double area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
    if (area_a <= 0 || area_b <= 0) return 0;
    const double h = std::max(0.0, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
    const double w = std::max(0.0, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
    const double inter = h * w;
    return inter / (area_a + area_b - inter);
}

// For every batch and class: the boxes above score_threshold by falling score (ties by index), each
// kept unless its IoU with one kept before exceeds iou_threshold, at most max_output_boxes_per_class.
Ts non_max_suppression(const Node& n, const Ts& in) {
    const Tensor &boxes = in[0], &scores = in[1];
    if (boxes.ndim() != 3 || boxes.shape(2) != 4 || scores.ndim() != 3 || scores.shape(0) != boxes.shape(0) ||
        scores.shape(2) != boxes.shape(1))
        throw ShapeError("fx::onnx: " + n.label() + ": boxes {B, S, 4} and scores {B, C, S} do not fit: " +
                         to_string(boxes.shape()) + " and " + to_string(scores.shape()));
    const I center = n.i("center_point_box", 0);
    if (center != 0 && center != 1) n.unsupported("center_point_box=" + std::to_string(center));
    values_read_on_host(n, "its boxes and scores (to choose the boxes it keeps)");
    const I most = in.size() > 2 && in[2].defined() && in[2].numel() > 0 ? host_ints(in[2])[0] : 0;
    const auto host_double = [](const Tensor& t) { return t.detach().to(Device{}).to(DType::f64).to_vector<double>(); };
    const double iou_threshold = in.size() > 3 && in[3].defined() && in[3].numel() > 0 ? host_double(in[3])[0] : 0.0;
    const bool thresholded = in.size() > 4 && in[4].defined() && in[4].numel() > 0;
    const double score_threshold = thresholded ? host_double(in[4])[0] : 0.0;
    const auto b = host_double(boxes), s = host_double(scores);
    const I batches = scores.shape(0), classes = scores.shape(1), count = scores.shape(2);
    std::vector<I> selected;
    for (I bi = 0; bi < batches; ++bi)
        for (I c = 0; c < classes; ++c) {
            const double* sc = &s[std::size_t((bi * classes + c) * count)];
            std::vector<I> order;
            for (I i = 0; i < count; ++i)
                if (!thresholded || sc[i] > score_threshold) order.push_back(i);
            std::stable_sort(order.begin(), order.end(), [&](I x, I y) { return sc[x] > sc[y]; });
            std::vector<Box> kept;
            for (I i : order) {
                if (I(kept.size()) >= most) break;
                const Box candidate = box_at(b, std::size_t(bi * count + i), center == 1);
                if (std::any_of(kept.begin(), kept.end(),
                                [&](const Box& k) { return iou(k, candidate) > iou_threshold; }))
                    continue;
                kept.push_back(candidate);
                selected.insert(selected.end(), {bi, c, i});
            }
        }
    return {tensor(selected, {I(selected.size() / 3), 3}).to(boxes.device())};
}

// ---- RoiAlign ----

// Each region's bins of output_height × output_width, each the average (or maximum) of a grid of
// bilinear samples, as ONNX's RoiAlign (and torchvision's roi_align) places them. The samples'
// taps and weights follow from the regions, read on the host; the pixels are gathered from X.
Ts roi_align(const Node& n, const Ts& in) {
    const Tensor &x = in[0], &rois = in[1], &batch_of = in[2];
    const std::string mode = n.s("mode", "avg");
    if (mode != "avg" && mode != "max") n.unsupported("mode=" + mode);
    const std::string transform =
        n.s("coordinate_transformation_mode", n.opset() < 16 ? "output_half_pixel" : "half_pixel");
    if (transform != "half_pixel" && transform != "output_half_pixel")
        n.unsupported("coordinate_transformation_mode=" + transform);
    const I oh = n.i("output_height", 1), ow = n.i("output_width", 1), ratio = n.i("sampling_ratio", 0);
    const double scale = n.f("spatial_scale", 1.0f);
    if (x.ndim() != 4 || rois.ndim() != 2 || rois.shape(1) != 4 || batch_of.numel() != rois.shape(0))
        throw ShapeError("fx::onnx: " + n.label() + ": X {N, C, H, W}, rois {R, 4} and batch_indices {R} do not fit: " +
                         to_string(x.shape()) + ", " + to_string(rois.shape()) + " and " + to_string(batch_of.shape()));
    if (oh < 1 || ow < 1 || ratio < 0) n.unsupported("output sizes below 1 or a negative sampling_ratio");
    values_read_on_host(n, "its regions (to choose its taps)");
    const I R = rois.shape(0), C = x.shape(1), H = x.shape(2), W = x.shape(3), bins = oh * ow;
    if (R == 0 || C == 0) return {zeros({R, C, oh, ow}, {.dtype = x.dtype(), .device = x.device()})};
    const auto r = rois.detach().to(Device{}).to(DType::f64).to_vector<double>();
    const auto batch = host_ints(batch_of);
    const double offset = transform == "half_pixel" ? 0.5 : 0.0;

    // One region's samples per bin: its grid, and the size the padded sample axis must have.
    struct Region {
        double y0, x0, bin_h, bin_w;
        I grid_h, grid_w;
    };
    std::vector<Region> regions;
    I samples = 1;
    for (I i = 0; i < R; ++i) {
        if (batch[std::size_t(i)] < 0 || batch[std::size_t(i)] >= x.shape(0))
            throw ValueError("fx::onnx: " + n.label() + ": batch index " + std::to_string(batch[std::size_t(i)]) +
                             " is out of range for " + std::to_string(x.shape(0)) + " images");
        const double* v = &r[std::size_t(i) * 4];
        Region g{v[1] * scale - offset, v[0] * scale - offset, 0, 0, 0, 0};
        double h = v[3] * scale - offset - g.y0, w = v[2] * scale - offset - g.x0;
        if (offset == 0.0) h = std::max(h, 1.0), w = std::max(w, 1.0);
        g.bin_h = h / double(oh), g.bin_w = w / double(ow);
        g.grid_h = ratio > 0 ? ratio : I(std::ceil(h / double(oh)));
        g.grid_w = ratio > 0 ? ratio : I(std::ceil(w / double(ow)));
        samples = std::max(samples, g.grid_h * g.grid_w);
        regions.push_back(g);
    }
    // Per (region, bin, sample, tap): the pixel's offset within its image and its weight. Samples past
    // a bin's own grid repeat its first (max) or weigh nothing (avg).
    const std::size_t taps = std::size_t(R * bins * samples * 4);
    std::vector<I> pixel(taps, 0);
    std::vector<double> weight(taps, 0.0);
    for (I i = 0; i < R; ++i) {
        const Region& g = regions[std::size_t(i)];
        const I grid = g.grid_h * g.grid_w;
        const double share = mode == "avg" ? 1.0 / double(std::max<I>(grid, 1)) : 1.0;
        for (I bin = 0; bin < bins; ++bin) {
            const std::size_t first = std::size_t(((i * bins + bin) * samples) * 4);
            for (I k = 0; k < grid; ++k) {
                double y =
                    g.y0 + double(bin / ow) * g.bin_h + (double(k / g.grid_w) + 0.5) * g.bin_h / double(g.grid_h);
                double xx =
                    g.x0 + double(bin % ow) * g.bin_w + (double(k % g.grid_w) + 0.5) * g.bin_w / double(g.grid_w);
                if (y < -1.0 || y > double(H) || xx < -1.0 || xx > double(W)) continue;  // reads nothing
                y = std::max(y, 0.0), xx = std::max(xx, 0.0);
                I y_lo = I(y), x_lo = I(xx), y_hi = y_lo + 1, x_hi = x_lo + 1;
                if (y_lo >= H - 1) y_lo = y_hi = H - 1, y = double(y_lo);
                if (x_lo >= W - 1) x_lo = x_hi = W - 1, xx = double(x_lo);
                const double ly = y - double(y_lo), lx = xx - double(x_lo);
                const std::size_t at = first + std::size_t(k) * 4;
                const I ps[4] = {y_lo * W + x_lo, y_lo * W + x_hi, y_hi * W + x_lo, y_hi * W + x_hi};
                const double ws[4] = {(1 - ly) * (1 - lx), (1 - ly) * lx, ly * (1 - lx), ly * lx};
                for (int t = 0; t < 4; ++t)
                    pixel[at + std::size_t(t)] = ps[t], weight[at + std::size_t(t)] = ws[t] * share;
            }
            if (mode == "max")
                for (I k = std::max<I>(grid, 1); k < samples; ++k)
                    for (std::size_t t = 0; t < 4; ++t) {
                        pixel[first + std::size_t(k) * 4 + t] = pixel[first + t];
                        weight[first + std::size_t(k) * 4 + t] = weight[first + t];
                    }
        }
    }
    std::vector<I> flat(taps * std::size_t(C));
    const std::size_t per_region = std::size_t(bins * samples * 4);
    for (I i = 0; i < R; ++i)
        for (I c = 0; c < C; ++c) {
            const I image = (batch[std::size_t(i)] * C + c) * H * W;
            for (std::size_t t = 0; t < per_region; ++t)
                flat[std::size_t(i * C + c) * per_region + t] = image + pixel[std::size_t(i) * per_region + t];
        }
    const Tensor values = gather_flat(x, flat, {R, C, bins, samples, 4}) * on_like(weight, {R, 1, bins, samples, 4}, x);
    const Tensor out = mode == "avg" ? sum(sum(values, -1), -1) : max(max(values, -1), -1);
    return {out.reshape({R, C, oh, ow})};
}

// ---- Col2Im ----

// Sums the columns' blocks back into an image: column (block offset k, block l) adds into the pixel
// l·stride − pad_begin + k·dilation where that falls inside, written as the columns times a one-hot
// matrix {K·L, pixels} so that it differentiates in them and runs on any device.
Ts col2im(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const auto image = host_ints(in[1]), block = host_ints(in[2]);
    const std::size_t r = image.size();
    if (r == 0 || block.size() != r) n.unsupported("image_shape and block_shape of different lengths");
    const auto strides = n.ints("strides", std::vector<I>(r, 1)), dilations = n.ints("dilations", std::vector<I>(r, 1));
    const auto pads = n.ints("pads", std::vector<I>(2 * r, 0));
    if (strides.size() != r || dilations.size() != r || pads.size() != 2 * r)
        n.unsupported("strides, dilations or pads of a length other than the image's rank");
    std::vector<I> blocks(r);
    I K = 1, L = 1, P = 1;
    for (std::size_t d = 0; d < r; ++d) {
        blocks[d] = (image[d] + pads[d] + pads[d + r] - dilations[d] * (block[d] - 1) - 1) / strides[d] + 1;
        K *= block[d], L *= blocks[d], P *= image[d];
    }
    if (x.ndim() != 3 || K == 0 || x.shape(1) % K != 0 || x.shape(2) != L)
        throw ShapeError("fx::onnx: " + n.label() + ": input " + to_string(x.shape()) + " is not {N, C·" +
                         std::to_string(K) + ", " + std::to_string(L) + "} for these blocks");
    const I N = x.shape(0), C = x.shape(1) / K;
    std::vector<double> onehot(std::size_t(K * L * P), 0.0);
    for (I k = 0; k < K; ++k)
        for (I l = 0; l < L; ++l) {
            I rk = k, rl = l, p = 0;
            bool inside = true;
            for (std::size_t d = r; d-- > 0;) {  // the last axis varies fastest
                const I kd = rk % block[d], ld = rl % blocks[d];
                rk /= block[d], rl /= blocks[d];
                const I at = ld * strides[d] - pads[d] + kd * dilations[d];
                inside = inside && at >= 0 && at < image[d];
                I stride = 1;
                for (std::size_t e = d + 1; e < r; ++e) stride *= image[e];
                p += at * stride;
            }
            if (inside) onehot[std::size_t((k * L + l) * P + p)] = 1.0;
        }
    Shape out{N, C};
    out.insert(out.end(), image.begin(), image.end());
    return {matmul(x.reshape({N, C, K * L}), on_like(onehot, {K * L, P}, x)).reshape(out)};
}

// ---- DeformConv ----

// A 2-d convolution whose every kernel tap samples X at its place moved by `offset` (bilinearly,
// zeros outside), scaled by `mask`: the samples' corners are chosen on the host from the offsets,
// their weights computed from the offsets with fluxion's ops (so that it differentiates in X, W,
// offset, B and mask), and the sampled columns times W as a matrix product per group.
Ts deform_conv(const Node& n, const Ts& in) {
    const Tensor &x = in[0], &w = in[1], &offset = in[2];
    const Tensor bias = in.size() > 3 ? in[3] : Tensor(), mask = in.size() > 4 ? in[4] : Tensor();
    if (x.ndim() != 4 || w.ndim() != 4) n.unsupported("an input of rank " + std::to_string(x.ndim()) + " (only 2-d)");
    const I N = x.shape(0), C = x.shape(1), H = x.shape(2), W = x.shape(3), OC = w.shape(0), kH = w.shape(2),
            kW = w.shape(3), K = kH * kW;
    const I group = n.i("group", 1), G = n.i("offset_group", 1);
    const auto strides = n.ints("strides", {1, 1}), dilations = n.ints("dilations", {1, 1});
    const auto pads = n.ints("pads", {0, 0, 0, 0});
    if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
        n.unsupported("strides, dilations or pads of a length other than 2-d's");
    if (group < 1 || G < 1 || C % group != 0 || C % G != 0 || OC % group != 0 || w.shape(1) != C / group ||
        offset.ndim() != 4 || offset.shape(0) != N || offset.shape(1) != G * K * 2 ||
        (mask.defined() && mask.numel() > 0 && mask.numel() != N * G * K * offset.shape(2) * offset.shape(3)))
        throw ShapeError("fx::onnx: " + n.label() + ": X " + to_string(x.shape()) + ", W " + to_string(w.shape()) +
                         " and offset " + to_string(offset.shape()) + " do not fit group " + std::to_string(group) +
                         " and offset_group " + std::to_string(G));
    const I oH = offset.shape(2), oW = offset.shape(3), P = oH * oW;
    values_read_on_host(n, "its offsets (to choose its taps)");
    // Each tap's place before its offset, {K, P} for y and x.
    std::vector<double> base_y(std::size_t(K * P)), base_x(std::size_t(K * P));
    for (I k = 0; k < K; ++k)
        for (I p = 0; p < P; ++p) {
            base_y[std::size_t(k * P + p)] = double((p / oW) * strides[0] - pads[0] + (k / kW) * dilations[0]);
            base_x[std::size_t(k * P + p)] = double((p % oW) * strides[1] - pads[1] + (k % kW) * dilations[1]);
        }
    const Tensor off = offset.reshape({N, G, K, 2, P});
    const Tensor y = off.select(3, 0) + on_like(base_y, {K, P}, offset);  // {N, G, K, P}
    const Tensor xx = off.select(3, 1) + on_like(base_x, {K, P}, offset);
    const auto hy = y.detach().contiguous().to(Device{}).to(DType::f64).to_vector<double>();
    const auto hx = xx.detach().contiguous().to(Device{}).to(DType::f64).to_vector<double>();
    const std::size_t points = hy.size();  // N·G·K·P
    std::vector<double> y0(points), x0(points), inside(points * 4, 0.0);
    std::vector<I> pixel(points * 4, 0);
    for (std::size_t i = 0; i < points; ++i) {
        y0[i] = std::floor(hy[i]), x0[i] = std::floor(hx[i]);
        for (int c = 0; c < 4; ++c) {
            const I py = I(y0[i]) + c / 2, px = I(x0[i]) + c % 2;
            if (py < 0 || py >= H || px < 0 || px >= W) continue;
            inside[i * 4 + std::size_t(c)] = 1.0, pixel[i * 4 + std::size_t(c)] = py * W + px;
        }
    }
    const Tensor ly = y - on_like(y0, {N, G, K, P}, offset), lx = xx - on_like(x0, {N, G, K, P}, offset);
    Tensor weights = stack({(1.0 - ly) * (1.0 - lx), (1.0 - ly) * lx, ly * (1.0 - lx), ly * lx}, -1) *
                     on_like(inside, {N, G, K, P, 4}, offset);
    if (mask.defined() && mask.numel() > 0) weights = weights * mask.reshape({N, G, K, P, 1});
    // The columns {N, C, K, P}: each channel's samples, by its offset group's weights.
    const I per = C / G;
    std::vector<I> flat(std::size_t(N * C) * std::size_t(K * P * 4));
    for (I b = 0; b < N; ++b)
        for (I c = 0; c < C; ++c) {
            const std::size_t from = std::size_t((b * G + c / per) * K * P * 4),
                              to = std::size_t((b * C + c) * K * P * 4);
            for (std::size_t t = 0; t < std::size_t(K * P * 4); ++t)
                flat[to + t] = (b * C + c) * H * W + pixel[from + t];
        }
    const Tensor samples =
        gather_flat(x, flat, {N, G, per, K, P, 4}) * weights.reshape({N, G, 1, K, P, 4}).to(x.dtype());
    const Tensor columns = sum(samples, -1).reshape({N, group, (C / group) * K, P});
    Tensor out = matmul(w.reshape({group, OC / group, (C / group) * K}), columns).reshape({N, OC, oH, oW});
    if (bias.defined() && bias.numel() > 0) out = out + bias.reshape({1, OC, 1, 1});
    return {out};
}

}  // namespace

void add_detection_operators(std::map<std::string, Operator>& t) {
    t["NonMaxSuppression"] = non_max_suppression;
    t["RoiAlign"] = roi_align;
    t["Col2Im"] = col2im;
    t["DeformConv"] = deform_conv;
}

}  // namespace fluxion::onnx::detail
