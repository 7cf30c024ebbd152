// operators_nn.cpp — ONNX's linear algebra, convolutions, pools and normalisations as fluxion's ops.
// fluxion convolves and pools 2-d with symmetric padding: 1-d runs as 2-d of height 1, and
// asymmetric or ceil_mode padding is added explicitly first (zeros, or −∞ before a max). 3-d
// convolutions are 2-d ones over the depth slices that each output depth reads; 3-d and dilated
// pools take the extreme or the sum of the input's strided slices, one per cell of the window.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using Ints = std::vector<std::int64_t>;

Ts matmul_op(const Node&, const Ts& in) { return {matmul(in[0], in[1])}; }

Ts gemm(const Node& n, const Ts& in) {
    const Tensor a = n.i("transA", 0) ? in[0].transpose(0, 1) : in[0];
    const Tensor b = n.i("transB", 0) ? in[1].transpose(0, 1) : in[1];
    Tensor y = matmul(a, b);
    if (const float alpha = n.f("alpha", 1.0f); alpha != 1.0f) y = y * double(alpha);
    if (in.size() > 2 && in[2].defined()) {
        const float beta = n.f("beta", 1.0f);
        y = y + (beta == 1.0f ? in[2] : in[2] * double(beta));
    }
    return {y};
}

// The spatial geometry of a convolution or pool on `x` {N, C, spatial...}: kernel, strides, pads
// {begin..., end...} (auto_pad resolved), dilations.
struct Window {
    Ints kernel, strides, pads, dilations;
};

Window window_of(const Node& n, const Tensor& x, const Ints& kernel) {
    const std::size_t d = kernel.size();
    Window w{kernel, n.ints("strides", Ints(d, 1)), n.ints("pads", Ints(2 * d, 0)), n.ints("dilations", Ints(d, 1))};
    if (w.strides.size() != d || w.pads.size() != 2 * d || w.dilations.size() != d)
        n.unsupported("strides, pads or dilations of the wrong length for a " + std::to_string(d) + "-d kernel");
    const std::string autopad = n.s("auto_pad", "NOTSET");
    if (autopad == "VALID") {
        w.pads.assign(2 * d, 0);
    } else if (autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
        for (std::size_t i = 0; i < d; ++i) {
            const std::int64_t in = x.shape(int(i) + 2), out = (in + w.strides[i] - 1) / w.strides[i];
            const std::int64_t total =
                std::max<std::int64_t>((out - 1) * w.strides[i] + (kernel[i] - 1) * w.dilations[i] + 1 - in, 0);
            const std::int64_t small = total / 2, large = total - small;
            w.pads[i] = autopad == "SAME_UPPER" ? small : large;
            w.pads[i + d] = autopad == "SAME_UPPER" ? large : small;
        }
    } else if (autopad != "NOTSET") {
        n.unsupported("auto_pad=" + autopad);
    }
    return w;
}

bool symmetric(const Window& w) {
    const std::size_t d = w.kernel.size();
    for (std::size_t i = 0; i < d; ++i)
        if (w.pads[i] != w.pads[i + d]) return false;
    return true;
}

// The explicit padding of `x` by pads {begin..., end...} over its spatial axes.
Tensor pad_spatial(const Tensor& x, const Ints& pads, double value) {
    const std::size_t d = pads.size() / 2;
    Tensor y = x;
    for (std::size_t i = 0; i < d; ++i) y = pad_axis(y, int(i) + 2, pads[i], pads[i + d], value);
    return y;
}

// 1-d as 2-d of height 1: a spatial list of one gains a leading 1 (0 for pads).
Ints two_d(const Ints& v, std::int64_t lead) { return v.size() == 1 ? Ints{lead, v[0]} : v; }

void check_rank(const Node& n, const Tensor& x) {
    if (x.ndim() < 3 || x.ndim() > 5)
        n.unsupported("an input of shape " + to_string(x.shape()) + " (fluxion runs 1-d, 2-d and 3-d " + n.op() +
                      " only)");
}

// {N, C, D, ...} with the depth folded into the batch: {N·D, C, ...}, and back.
Tensor depth_into_batch(const Tensor& x) {
    Shape s = x.shape();
    s.erase(s.begin() + 2);
    s[0] = x.shape(0) * x.shape(2);
    return x.transpose(1, 2).reshape(s);
}
Tensor depth_out_of_batch(const Tensor& y, std::int64_t batch) {
    Shape s = y.shape();  // {N·D, C, ...}
    s[0] = y.shape(0) / batch;
    s.insert(s.begin(), batch);
    return y.reshape(s).transpose(1, 2);
}

// conv3d of x {N, C, D, H, W} (padded already) with w {O, C/g, kd, kh, kw}: for each depth tap j,
// the depth slices it reads for every output depth, convolved as images.
Tensor conv3d(const Node& n, const Tensor& x, const Tensor& w, const Ints& strides, const Ints& dilations) {
    const std::int64_t span = (w.shape(2) - 1) * dilations[0] + 1, depth = x.shape(2);
    if (depth < span)
        n.unsupported("an input depth of " + std::to_string(depth) + " (with its pads) below the kernel's span " +
                      std::to_string(span));
    const std::int64_t out = (depth - span) / strides[0] + 1;
    Tensor y;
    for (std::int64_t j = 0; j < w.shape(2); ++j) {
        const std::int64_t first = j * dilations[0];
        const Tensor slices = x.slice(2, first, first + (out - 1) * strides[0] + 1, strides[0]);
        const Tensor part = conv2d(depth_into_batch(slices), w.select(2, j),
                                   {.stride = {strides[1], strides[2]},
                                    .padding = {0, 0},
                                    .dilation = {dilations[1], dilations[2]},
                                    .groups = n.i("group", 1)});
        y = y.defined() ? y + part : part;
    }
    return depth_out_of_batch(y, x.shape(0));
}

// The transpose of conv3d, unpadded, with output_pad: each input depth slice's contribution through
// depth tap j lands at depth i·stride + j·dilation.
Tensor conv_transpose3d(const Node& n, const Tensor& x, const Tensor& w, const Ints& strides, const Ints& dilations,
                        const Ints& out_pad) {
    const std::int64_t depth = x.shape(2), spread = (depth - 1) * strides[0] + 1;
    const std::int64_t full = spread + (w.shape(2) - 1) * dilations[0] + out_pad[0];
    const Tensor images = depth_into_batch(x);
    Tensor y;
    for (std::int64_t j = 0; j < w.shape(2); ++j) {
        Tensor part = depth_out_of_batch(conv_transpose2d(images, w.select(2, j),
                                                          {.stride = {strides[1], strides[2]},
                                                           .padding = {0, 0},
                                                           .dilation = {dilations[1], dilations[2]},
                                                           .groups = n.i("group", 1)},
                                                          {out_pad[1], out_pad[2]}),
                                         x.shape(0));  // {N, O, D, H', W'}
        if (strides[0] > 1) {                          // stride - 1 zero slices after each
            std::vector<Tensor> gaps(static_cast<std::size_t>(strides[0]), zeros_like(part));
            gaps[0] = part;
            Shape s = part.shape();
            s[2] *= strides[0];
            part = stack(gaps, 3).reshape(s).slice(2, 0, spread);
        }
        const std::int64_t before = j * dilations[0];
        part = pad_axis(part, 2, before, full - before - spread, 0);
        y = y.defined() ? y + part : part;
    }
    return y;
}

Ts conv(const Node& n, const Ts& in) {
    check_rank(n, in[0]);
    const bool one_d = in[0].ndim() == 3;
    const Tensor& w0 = in[1];
    Ints kernel(w0.shape().begin() + 2, w0.shape().end());
    Window w = window_of(n, in[0], kernel);
    Tensor x = in[0];
    Ints pads(kernel.size(), 0);
    if (symmetric(w) && kernel.size() < 3) pads.assign(w.pads.begin(), w.pads.begin() + std::ptrdiff_t(kernel.size()));
    else x = pad_spatial(x, w.pads, 0);
    Tensor weight = w0, y;
    if (one_d) x = x.unsqueeze(2), weight = weight.unsqueeze(2);
    if (kernel.size() == 3) y = conv3d(n, x, weight, w.strides, w.dilations);
    else
        y = conv2d(x, weight,
                   {.stride = two_d(w.strides, 1),
                    .padding = two_d(pads, 0),
                    .dilation = two_d(w.dilations, 1),
                    .groups = n.i("group", 1)});
    if (one_d) y = y.squeeze(2);
    if (in.size() > 2 && in[2].defined()) {
        Shape b(std::size_t(y.ndim()), 1);
        b[1] = in[2].numel();
        y = y + in[2].reshape(b);
    }
    return {y};
}

// Transposed convolution: unpadded (with output_padding), then the pads cropped from each side.
Ts conv_transpose(const Node& n, const Ts& in) {
    check_rank(n, in[0]);
    const bool one_d = in[0].ndim() == 3;
    const std::size_t d = std::size_t(in[0].ndim() - 2);
    const Ints kernel(in[1].shape().begin() + 2, in[1].shape().end());
    const Ints strides = n.ints("strides", Ints(d, 1)), dilations = n.ints("dilations", Ints(d, 1));
    Ints out_pad = n.ints("output_padding", Ints(d, 0)), pads = n.ints("pads", Ints(2 * d, 0));
    const std::string autopad = n.s("auto_pad", "NOTSET");
    Ints full(d);
    for (std::size_t i = 0; i < d; ++i)
        full[i] = (in[0].shape(int(i) + 2) - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 + out_pad[i];
    if (n.has("output_shape") || autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
        Ints target = n.ints("output_shape");
        if (target.size() > d) target.erase(target.begin(), target.end() - std::ptrdiff_t(d));
        for (std::size_t i = 0; i < d; ++i) {
            const std::int64_t want = target.empty() ? in[0].shape(int(i) + 2) * strides[i] : target[i];
            const std::int64_t total = std::max<std::int64_t>(full[i] - want, 0);
            out_pad[i] += want - (full[i] - total), full[i] = want + total;  // a larger output: more output_padding
            const std::int64_t small = total / 2, large = total - small;
            pads[i] = autopad == "SAME_LOWER" ? large : small;
            pads[i + d] = autopad == "SAME_LOWER" ? small : large;
        }
    } else if (autopad == "VALID") {
        pads.assign(2 * d, 0);
    } else if (autopad != "NOTSET") {
        n.unsupported("auto_pad=" + autopad);
    }
    for (std::size_t i = 0; i < d; ++i)
        if (out_pad[i] >= strides[i] && out_pad[i] >= dilations[i])
            n.unsupported("output_padding not below the stride or the dilation");
    Tensor x = in[0], weight = in[1];
    if (one_d) x = x.unsqueeze(2), weight = weight.unsqueeze(2);
    Tensor y = d == 3 ? conv_transpose3d(n, x, weight, strides, dilations, out_pad)
                      : conv_transpose2d(x, weight,
                                         {.stride = two_d(strides, 1),
                                          .padding = {0, 0},
                                          .dilation = two_d(dilations, 1),
                                          .groups = n.i("group", 1)},
                                         two_d(out_pad, 0));
    if (one_d) y = y.squeeze(2);
    for (std::size_t i = 0; i < d; ++i) y = y.slice(int(i) + 2, pads[i], full[i] - pads[i + d]);
    if (in.size() > 2 && in[2].defined()) {
        Shape b(std::size_t(y.ndim()), 1);
        b[1] = in[2].numel();
        y = y + in[2].reshape(b);
    }
    return {y};
}

// The maximum, or the mean, of every window of `kernel` cells (dilated, strided) of t {N, C, ...}
// unpadded: one strided slice of t per cell of the window, so any number of axes and any dilation.
Tensor slide(const Tensor& t, const Ints& kernel, const Ints& strides, const Ints& dilations, bool maximum) {
    const std::size_t d = kernel.size();
    Ints out(d);
    std::int64_t cells = 1;
    for (std::size_t i = 0; i < d; ++i)
        out[i] = (t.shape(int(i) + 2) - (kernel[i] - 1) * dilations[i] - 1) / strides[i] + 1, cells *= kernel[i];
    Tensor acc;
    for (std::int64_t cell = 0; cell < cells; ++cell) {
        Tensor v = t;
        for (std::int64_t i = std::int64_t(d) - 1, rest = cell; i >= 0; rest /= kernel[std::size_t(i)], --i) {
            const std::size_t a = std::size_t(i);
            const std::int64_t first = (rest % kernel[a]) * dilations[a];
            v = v.slice(int(a) + 2, first, first + (out[a] - 1) * strides[a] + 1, strides[a]);
        }
        acc = !acc.defined() ? v : maximum ? fluxion::maximum(acc, v) : acc + v;
    }
    return maximum ? acc : acc / double(cells);
}

// MaxPool's maximum of each window of x {N, C, spatial...} (padded by pads {begin..., end...}, the
// pads never chosen) with the flat index into x of the first of equal maxima: spatial axes row-major,
// or with column_major counted from the first; channels after them. On the host, for its Indices
// output and for integer inputs, neither of which fluxion's pools take.
template <class T> struct Maxima {
    std::vector<T> values;
    std::vector<std::int64_t> indices;
    Shape shape;
};
template <class T>
Maxima<T> host_maxima(const std::vector<T>& x, const Shape& in, const Window& w, const Ints& pads, bool column_major) {
    const std::size_t d = w.kernel.size();
    Maxima<T> m{{}, {}, {in[0], in[1]}};
    std::int64_t cells = 1, area = 1, outs = 1;
    for (std::size_t i = 0; i < d; ++i) {
        const std::int64_t reach = (w.kernel[i] - 1) * w.dilations[i] + 1;
        m.shape.push_back((in[i + 2] + pads[i] + pads[i + d] - reach) / w.strides[i] + 1);
        cells *= w.kernel[i], area *= in[i + 2], outs *= m.shape.back();
    }
    Ints row(d, 1), col(d, 1);  // each spatial axis's step in x, row-major and column-major
    for (std::size_t i = d - 1; i > 0; --i) row[i - 1] = row[i] * in[i + 2];
    for (std::size_t i = 1; i < d; ++i) col[i] = col[i - 1] * in[i + 1];
    for (std::int64_t plane = 0; plane < in[0] * in[1]; ++plane) {
        for (std::int64_t o = 0; o < outs; ++o) {
            bool found = false;
            T best{};
            std::int64_t best_index = -1;
            for (std::int64_t cell = 0; cell < cells; ++cell) {
                std::int64_t at = 0, at_col = 0;
                bool inside = true;
                for (std::int64_t i = std::int64_t(d) - 1, oi = o, ci = cell; i >= 0; --i) {
                    const std::size_t a = std::size_t(i);
                    const std::int64_t p =
                        (oi % m.shape[a + 2]) * w.strides[a] - pads[a] + (ci % w.kernel[a]) * w.dilations[a];
                    oi /= m.shape[a + 2], ci /= w.kernel[a];
                    if (p < 0 || p >= in[a + 2]) inside = false;
                    at += p * row[a], at_col += p * col[a];
                }
                if (!inside) continue;
                const T v = x[std::size_t(plane * area + at)];
                if (!found || v > best)
                    found = true, best = v, best_index = plane * area + (column_major ? at_col : at);
            }
            m.values.push_back(best);
            m.indices.push_back(best_index);
        }
    }
    return m;
}

// MaxPool, AveragePool and LpPool: the input padded explicitly (pads, then what ceil_mode adds at
// the end), then pooled unpadded. The average divides by the pooled count of cells that count: the
// input's, and the pads' under count_include_pad. LpPool is the p-th root of the windows' sums of |x|^p.
Ts pool(const Node& n, const Ts& in) {
    check_rank(n, in[0]);
    const bool max_pool = n.op() == "MaxPool", lp_pool = n.op() == "LpPool";
    if (!max_pool && !is_floating(in[0].dtype())) n.unsupported("an integer input");
    const Ints kernel = n.ints("kernel_shape");
    if (kernel.size() != std::size_t(in[0].ndim() - 2)) n.unsupported("kernel_shape of the wrong length");
    Window w = window_of(n, in[0], kernel);
    const std::size_t d = kernel.size();
    const bool dilated = std::any_of(w.dilations.begin(), w.dilations.end(), [](auto v) { return v != 1; });
    Ints extra(d, 0);
    if (n.i("ceil_mode", 0)) {
        for (std::size_t i = 0; i < d; ++i) {
            const std::int64_t span = in[0].shape(int(i) + 2) + w.pads[i] + w.pads[i + d];
            const std::int64_t reach = (kernel[i] - 1) * w.dilations[i] + 1;
            std::int64_t out = (span - reach + w.strides[i] - 1) / w.strides[i] + 1;
            if ((out - 1) * w.strides[i] >= in[0].shape(int(i) + 2) + w.pads[i])
                --out;  // no window starts in the end pad
            extra[i] = std::max<std::int64_t>((out - 1) * w.strides[i] + reach - span, 0);
        }
    }
    Ints pads = w.pads;
    for (std::size_t i = 0; i < d; ++i) pads[i + d] += extra[i];
    const bool padded = std::any_of(pads.begin(), pads.end(), [](auto p) { return p != 0; });
    const Pool2dOptions options{.window = two_d(kernel, 1), .stride = two_d(w.strides, 1), .padding = {0, 0}};
    const bool one_d = d == 1;
    auto pool2d = [&](const Tensor& t, bool maximum) {
        if (d == 3 || dilated) return slide(t, kernel, w.strides, w.dilations, maximum);
        const Tensor u = one_d ? t.unsqueeze(2) : t;
        const Tensor y = maximum ? maxpool2d(u, options) : meanpool2d(u, options);
        return one_d ? y.squeeze(2) : y;
    };
    if (max_pool) {
        const bool integers = !is_floating(in[0].dtype());
        Ts out;
        if (!integers) out.push_back(pool2d(pad_spatial(in[0], pads, -std::numeric_limits<double>::infinity()), true));
        if (!integers && n.outputs() < 2) return out;
        values_read_on_host(n, integers ? "its integer input (to pool it)" : "its input (to find its Indices)");
        const bool column_major = n.i("storage_order", 0) != 0;
        const TensorOptions on_x{.dtype = in[0].dtype(), .device = in[0].device()};
        const TensorOptions indices{.dtype = DType::i64, .device = in[0].device()};
        if (integers) {
            const auto m = host_maxima(host_ints(in[0].contiguous()), in[0].shape(), w, pads, column_major);
            out = {tensor(m.values, m.shape, on_x), tensor(m.indices, m.shape, indices)};
        } else {
            const auto m = host_maxima(in[0].contiguous().to_vector<double>(), in[0].shape(), w, pads, column_major);
            out.push_back(tensor(m.indices, m.shape, indices));
        }
        return out;
    }
    if (lp_pool) {
        const std::int64_t p = n.i("p", 2);
        if (p < 1) n.unsupported("p=" + std::to_string(p));
        const Tensor powers = p == 1 ? abs(in[0]) : p == 2 ? in[0] * in[0] : pow(abs(in[0]), double(p));
        double cells = 1;
        for (auto k : kernel) cells *= double(k);
        const Tensor sums = pool2d(padded ? pad_spatial(powers, pads, 0) : powers, false) * cells;
        return {p == 1 ? sums : p == 2 ? sqrt(sums) : pow(sums, 1.0 / double(p))};
    }
    const Tensor mean = pool2d(padded ? pad_spatial(in[0], pads, 0) : in[0], false);
    if (!padded) return {mean};
    Shape ones_shape(std::size_t(in[0].ndim()), 1);
    for (std::size_t i = 0; i < d; ++i) ones_shape[i + 2] = in[0].shape(int(i) + 2);
    Tensor mask = ones(ones_shape, {.dtype = in[0].dtype(), .device = in[0].device()});
    if (n.i("count_include_pad", 0)) {
        Ints ceil_only(2 * d, 0);  // what ceil_mode adds never counts
        for (std::size_t i = 0; i < d; ++i) ceil_only[i + d] = extra[i];
        mask = pad_spatial(pad_spatial(mask, w.pads, 1), ceil_only, 0);
    } else {
        mask = pad_spatial(mask, pads, 0);
    }
    return {mean / pool2d(mask, false)};
}

// MaxUnpool: x's values placed where the indices (MaxPool's: flat through batch and channels) say
// in zeros of the shape the pool's input had, then zeros added at the end of each spatial axis up to
// output_shape (ONNX's reference and its node suite place them so). A gather from x and one zero by
// the indices' inverse, made on the host, so differentiable in x.
Ts max_unpool(const Node& n, const Ts& in) {
    check_rank(n, in[0]);
    const Tensor& x = in[0];
    const Ints kernel = n.ints("kernel_shape");
    const std::size_t d = kernel.size();
    if (d != std::size_t(x.ndim() - 2)) n.unsupported("kernel_shape of the wrong length");
    const Ints strides = n.ints("strides", Ints(d, 1)), pads = n.ints("pads", Ints(2 * d, 0));
    Shape shape{x.shape(0), x.shape(1)};
    for (std::size_t i = 0; i < d; ++i)
        shape.push_back((x.shape(int(i) + 2) - 1) * strides[i] - pads[i] - pads[i + d] + kernel[i]);
    values_read_on_host(n, "its indices (to place the values)");
    const std::vector<std::int64_t> indices = host_ints(in[1].contiguous());
    if (std::int64_t(indices.size()) != x.numel())
        throw ShapeError("fx::onnx: " + n.label() + ": indices of shape " + to_string(in[1].shape()) +
                         " for an input of shape " + to_string(x.shape()));
    const std::int64_t total = numel(shape);
    std::vector<std::int64_t> from(std::size_t(total), x.numel());  // x.numel(): the zero after x's values
    for (std::size_t k = 0; k < indices.size(); ++k) {
        if (indices[k] < 0 || indices[k] >= total)
            throw ValueError("fx::onnx: " + n.label() + ": index " + std::to_string(indices[k]) +
                             " is outside the unpooled shape " + to_string(shape));
        from[std::size_t(indices[k])] = std::int64_t(k);
    }
    const Tensor values = concat({x.reshape({-1}), zeros({1}, {.dtype = x.dtype(), .device = x.device()})});
    Tensor y =
        index_select(values, 0, tensor(from, {total}, {.dtype = DType::i64, .device = x.device()})).reshape(shape);
    if (in.size() > 2 && in[2].defined()) {
        const std::vector<std::int64_t> want = host_ints(in[2]);
        if (want.size() != shape.size() || want[0] != shape[0] || want[1] != shape[1])
            n.unsupported("an output_shape of " + std::to_string(want.size()) + " values or another batch or channels");
        for (std::size_t i = 2; i < shape.size(); ++i) {
            if (want[i] < shape[i])
                n.unsupported("an output_shape smaller than the unpooled shape " + to_string(shape));
            y = pad_axis(y, int(i), 0, want[i] - shape[i], 0);
        }
    }
    return {y};
}

Ts global_pool(const Node& n, const Ts& in) {
    Tensor y = in[0];
    for (int a = y.ndim() - 1; a >= 2; --a) y = n.op() == "GlobalMaxPool" ? max(y, a, true) : mean(y, a, true);
    return {y};
}

// Local response normalisation across channels: x / (bias + alpha/size Σ x²)^beta over a window
// of `size` channels centred on each.
Ts lrn(const Node& n, const Ts& in) {
    const std::int64_t size = n.i("size", 0), channels = in[0].shape(1);
    if (size < 1) n.unsupported("size < 1");
    const Tensor sq = pad_axis(in[0] * in[0], 1, (size - 1) / 2, size / 2, 0);
    Tensor s = sq.slice(1, 0, channels);
    for (std::int64_t i = 1; i < size; ++i) s = s + sq.slice(1, i, i + channels);
    const double alpha = n.f("alpha", 1e-4f), beta = n.f("beta", 0.75f), bias = n.f("bias", 1.0f);
    return {in[0] / pow(bias + (alpha / double(size)) * s, beta)};
}

// A per-channel vector {C} as {1, C, 1, ...} against x.
Tensor per_channel(const Tensor& v, const Tensor& x) {
    Shape s(std::size_t(x.ndim()), 1);
    s[1] = v.numel();
    return v.reshape(s);
}

// For inference by the running statistics; with training_mode=1 by the batch's own (the variance
// without Bessel's correction), outputting the running statistics moved toward them by 1 − momentum.
Ts batch_norm(const Node& n, const Ts& in) {
    if (n.opset() < 9 && n.i("spatial", 1) == 0) n.unsupported("spatial=0");
    const Tensor& x = in[0];
    const double eps = n.f("epsilon", 1e-5f);
    const bool training = n.opset() >= 14 && n.i("training_mode", 0) != 0;
    if (!training) {
        if (n.outputs() > 1)
            n.unsupported(n.opset() >= 14
                              ? "the running statistics' outputs without training_mode=1"
                              : "the running statistics' outputs of training (before opset 14's training_mode)");
        const Tensor scale = per_channel(in[1], x) / sqrt(per_channel(in[4], x) + eps);
        return {(x - per_channel(in[3], x)) * scale + per_channel(in[2], x)};
    }
    auto over_all_but_channels = [&](Tensor t) {
        for (int a = x.ndim() - 1; a >= 0; --a)
            if (a != 1) t = mean(t, a, true);
        return t;
    };
    const Tensor m = over_all_but_channels(x), c = x - m, v = over_all_but_channels(c * c);
    const Tensor y = c / sqrt(v + eps) * per_channel(in[1], x) + per_channel(in[2], x);
    const double momentum = n.f("momentum", 0.9f);
    const Shape channels{x.shape(1)};
    return {y, in[3] * momentum + m.reshape(channels) * (1 - momentum),
            in[4] * momentum + v.reshape(channels) * (1 - momentum)};
}

Ts instance_norm(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    Tensor m = x;
    for (int a = x.ndim() - 1; a >= 2; --a) m = mean(m, a, true);
    const Tensor c = x - m;
    Tensor v = c * c;
    for (int a = x.ndim() - 1; a >= 2; --a) v = mean(v, a, true);
    return {c / sqrt(v + double(n.f("epsilon", 1e-5f))) * per_channel(in[1], x) + per_channel(in[2], x)};
}

Ts layer_norm(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const int axis = axis_of(n.i("axis", -1), x.ndim(), n);
    Tensor m = x;
    for (int a = x.ndim() - 1; a >= axis; --a) m = mean(m, a, true);
    const Tensor c = x - m;
    Tensor v = c * c;
    for (int a = x.ndim() - 1; a >= axis; --a) v = mean(v, a, true);
    const Tensor inv_std = 1.0 / sqrt(v + double(n.f("epsilon", 1e-5f)));
    Tensor y = c * inv_std * in[1];
    if (in.size() > 2 && in[2].defined()) y = y + in[2];
    return {y, m, inv_std};
}

// Softmax and LogSoftmax; before opset 13 over everything from `axis` on (the input as 2-d).
template <Tensor (*F)(const Tensor&, int)> Ts softmax_op(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    if (n.opset() >= 13) return {F(x, axis_of(n.i("axis", -1), x.ndim(), n))};
    const int axis = axis_of(n.i("axis", 1), x.ndim(), n);
    return {F(x.flatten(axis, -1), -1).reshape(x.shape())};
}
Tensor softmax_of(const Tensor& x, int a) { return softmax(x, a); }
Tensor logsoftmax_of(const Tensor& x, int a) { return logsoftmax(x, a); }

// The identity, and a mask of ones, outside training. With training_mode=true (opset 12 on) each
// element is kept where a draw of fx::rand on the input's device is at least the ratio, and scaled
// by 1 / (1 − ratio). The draws are fluxion's (fx::seed repeats them): the seed attribute, which
// names a draw of another generator, is not followed.
Ts dropout(const Node& n, const Ts& in) {
    if (n.opset() < 7 && n.i("is_test", 0) == 0) n.unsupported("is_test=0 (fluxion imports Dropout for inference)");
    const Tensor& x = in[0];
    const bool training = n.opset() >= 12 && in.size() > 2 && in[2].defined() && in[2].to(DType::f64).item() != 0;
    const double ratio =
        n.opset() >= 12 ? (in.size() > 1 && in[1].defined() ? in[1].to(DType::f64).item() : 0.5) : n.f("ratio", 0.5f);
    if (!training || ratio == 0) {
        Ts out{x};
        if (n.outputs() > 1) out.push_back(ones(x.shape(), {.dtype = DType::boolean, .device = x.device()}));
        return out;
    }
    if (!(ratio > 0 && ratio < 1))
        throw ValueError("fx::onnx: " + n.label() + ": a ratio of " + std::to_string(ratio) +
                         " (training Dropout drops with a probability in [0, 1))");
    const Tensor draws = rand(x.shape(), {.dtype = DType::f32, .device = x.device()});
    const Tensor keep = ge(draws, full({}, ratio, {.dtype = DType::f32, .device = x.device()}));
    return {x * keep.to(x.dtype()) * (1 / (1 - ratio)), keep};
}

}  // namespace

void add_nn_operators(std::map<std::string, Operator>& t) {
    t["MatMul"] = matmul_op;
    t["Gemm"] = gemm;
    t["Conv"] = conv;
    t["ConvTranspose"] = conv_transpose;
    t["MaxPool"] = pool;
    t["AveragePool"] = pool;
    t["LpPool"] = pool;
    t["MaxUnpool"] = max_unpool;
    t["GlobalAveragePool"] = global_pool;
    t["GlobalMaxPool"] = global_pool;
    t["LRN"] = lrn;
    t["BatchNormalization"] = batch_norm;
    t["InstanceNormalization"] = instance_norm;
    t["LayerNormalization"] = layer_norm;
    t["Softmax"] = softmax_op<softmax_of>;
    t["LogSoftmax"] = softmax_op<logsoftmax_of>;
    t["Dropout"] = dropout;
}

}  // namespace fluxion::onnx::detail
