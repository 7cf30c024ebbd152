// operators_shape.cpp — ONNX's operators that move, join, index and describe tensors. Shapes, axes
// and bounds are read on the host (Shape gives a host tensor, so the shape arithmetic of PyTorch's
// exports runs there, whatever the model's device).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {

Shape broadcast_shape(const Shape& a, const Shape& b) {
    const std::size_t r = std::max(a.size(), b.size());
    Shape out(r);
    for (std::size_t i = 0; i < r; ++i) {
        const std::int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
        const std::int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
        if (x != y && x != 1 && y != 1)
            throw ShapeError("fx::onnx: shapes " + to_string(a) + " and " + to_string(b) + " do not broadcast");
        out[i] = x == 1 ? y : x;
    }
    return out;
}

Tensor on_like(const std::vector<double>& values, const Shape& shape, const Tensor& like) {
    return tensor(values, shape).to(like.dtype()).to(like.device());
}

Tensor pad_axis(const Tensor& x, int axis, std::int64_t before, std::int64_t after, double value) {
    Tensor y = x;
    if (before < 0 || after < 0) {  // negative pads crop
        y = y.slice(axis, std::max<std::int64_t>(-before, 0), y.shape(axis) - std::max<std::int64_t>(-after, 0));
        before = std::max<std::int64_t>(before, 0), after = std::max<std::int64_t>(after, 0);
    }
    if (before == 0 && after == 0) return y;
    auto block = [&](std::int64_t n) {
        Shape s = y.shape();
        s[std::size_t(axis)] = n;
        return full(s, value, {.dtype = y.dtype(), .device = y.device()});
    };
    std::vector<Tensor> parts;
    if (before > 0) parts.push_back(block(before));
    parts.push_back(y);
    if (after > 0) parts.push_back(block(after));
    return concat(parts, axis);
}

namespace {

using Ts = std::vector<Tensor>;
using Ints = std::vector<std::int64_t>;

Tensor host_tensor(const Ints& v, const Shape& shape) { return tensor(v, shape); }

// An input from the opset where it replaced an attribute, else the attribute.
Ints ints_from(const Node& n, const Ts& in, std::size_t input, std::int64_t since, const char* attribute) {
    if (n.opset() >= since) return input < in.size() && in[input].defined() ? host_ints(in[input]) : Ints{};
    return n.ints(attribute);
}

Ts identity_op(const Node&, const Ts& in) { return {in[0]}; }

Ts constant(const Node& n, const Ts&) {
    if (n.has("value")) return {n.t("value")};
    if (n.has("value_float")) return {scalar(n.f("value_float", 0))};
    if (n.has("value_int")) return {host_tensor({n.i("value_int", 0)}, {})};
    if (n.has("value_ints")) {
        const Ints v = n.ints("value_ints");
        return {host_tensor(v, {std::int64_t(v.size())})};
    }
    if (n.has("value_floats")) {
        std::vector<float> v;
        for (const auto& a : n.proto().attribute())
            if (a.name() == "value_floats") v.assign(a.floats().begin(), a.floats().end());
        return {tensor(v)};
    }
    n.unsupported("a value that is not a dense numeric tensor (sparse_value, strings)");
}

Ts shape_op(const Node& n, const Ts& in) {
    const Shape& s = in[0].shape();
    const auto r = std::int64_t(s.size());
    auto clamp_axis = [&](std::int64_t a) { return std::clamp<std::int64_t>(a < 0 ? a + r : a, 0, r); };
    const std::int64_t start = clamp_axis(n.i("start", 0)), end = clamp_axis(n.i("end", r));
    const Ints dims(s.begin() + start, s.begin() + std::max(start, end));
    return {host_tensor(dims, {std::int64_t(dims.size())})};
}

Ts size_op(const Node&, const Ts& in) { return {host_tensor({in[0].numel()}, {})}; }

Ts constant_of_shape(const Node& n, const Ts& in) {
    const Ints shape = host_ints(in[0]);
    if (!n.has("value")) return {zeros(shape)};
    const Tensor v = n.t("value");
    return {full(shape, v.to(DType::f64).reshape({1}).item(), {.dtype = v.dtype()})};
}

Ts range(const Node&, const Ts& in) {
    const double start = in[0].to(DType::f64).item(), limit = in[1].to(DType::f64).item(),
                 delta = in[2].to(DType::f64).item();
    const auto n = std::max<std::int64_t>(std::int64_t(std::ceil((limit - start) / delta)), 0);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[std::size_t(i)] = start + double(i) * delta;
    return {tensor(v, {n}).to(in[0].dtype())};
}

Ts flatten_op(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const std::int64_t axis = n.i("axis", 1) < 0 ? n.i("axis", 1) + x.ndim() : n.i("axis", 1);
    if (axis < 0 || axis > x.ndim())
        n.unsupported("axis " + std::to_string(n.i("axis", 1)) + " for rank " + std::to_string(x.ndim()));
    std::int64_t outer = 1, inner = 1;
    for (int a = 0; a < x.ndim(); ++a) (a < axis ? outer : inner) *= x.shape(a);
    return {x.reshape({outer, inner})};
}

Ts reshape(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    Ints shape = n.opset() >= 5 ? host_ints(in[1]) : n.ints("shape");
    const bool allowzero = n.i("allowzero", 0) != 0;
    for (std::size_t i = 0; i < shape.size(); ++i)
        if (shape[i] == 0 && !allowzero) {
            if (int(i) >= x.ndim()) n.unsupported("a 0 in the shape beyond the input's rank");
            shape[i] = x.shape(int(i));
        }
    return {x.reshape(shape)};
}

Ts transpose_op(const Node& n, const Ts& in) {
    const int r = in[0].ndim();
    Ints perm = n.ints("perm");
    if (perm.empty())
        for (int a = r - 1; a >= 0; --a) perm.push_back(a);
    std::vector<int> axes;
    for (auto a : perm) axes.push_back(axis_of(a, r, n));
    return {in[0].permute(axes)};
}

Ts concat_op(const Node& n, const Ts& in) {
    std::vector<Tensor> xs;
    for (const auto& x : in)
        if (x.defined()) xs.push_back(x);
    return {concat(xs, axis_of(n.i("axis", 0), xs.at(0).ndim(), n))};
}

Ts split(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const int axis = axis_of(n.i("axis", 0), x.ndim(), n);
    Ints sizes = ints_from(n, in, 1, 13, "split");
    const auto parts = std::int64_t(n.proto().output_size());
    if (sizes.empty()) {
        const std::int64_t each = (x.shape(axis) + parts - 1) / parts;
        for (std::int64_t i = 0, left = x.shape(axis); i < parts; ++i, left -= each)
            sizes.push_back(std::min(each, left));
    }
    Ts out;
    std::int64_t at = 0;
    for (auto s : sizes) out.push_back(x.slice(axis, at, at + s)), at += s;
    return out;
}

// Rows `first, first + step, ...` (step < 0) of `x` along `axis`, stopping before `stop`.
Tensor reversed_slice(const Tensor& x, int axis, std::int64_t first, std::int64_t stop, std::int64_t step) {
    Ints idx;
    for (std::int64_t i = first; i > stop; i += step) idx.push_back(i);
    return index_select(x, axis, tensor(idx, {std::int64_t(idx.size())}).to(x.device()));
}

Ts slice(const Node& n, const Ts& in) {
    Tensor y = in[0];
    const int r = y.ndim();
    const Ints starts = ints_from(n, in, 1, 10, "starts"), ends = ints_from(n, in, 2, 10, "ends");
    Ints axes = ints_from(n, in, 3, 10, "axes"), steps = ints_from(n, in, 4, 10, "steps");
    if (axes.empty())
        for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(std::int64_t(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
        n.unsupported("starts, ends, axes and steps of different lengths");
    for (std::size_t i = 0; i < starts.size(); ++i) {
        const int axis = axis_of(axes[i], r, n);
        const std::int64_t dim = y.shape(axis), step = steps[i];
        if (step == 0) n.unsupported("a step of 0");
        std::int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
        std::int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
        if (step > 0) {
            start = std::clamp<std::int64_t>(start, 0, dim), end = std::clamp<std::int64_t>(end, 0, dim);
            y = y.slice(axis, start, std::max(start, end), step);
        } else {
            start = std::clamp<std::int64_t>(start, 0, dim - 1), end = std::clamp<std::int64_t>(end, -1, dim - 1);
            y = reversed_slice(y, axis, start, end, step);
        }
    }
    return {y};
}

Ts gather(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const int axis = axis_of(n.i("axis", 0), x.ndim(), n);
    const std::int64_t dim = x.shape(axis);
    Ints idx = host_ints(in[1]);
    for (auto& i : idx) {
        if (i < -dim || i >= dim)
            throw ValueError("fx::onnx: " + n.label() + ": index " + std::to_string(i) + " is out of range for axis " +
                             std::to_string(axis) + " of size " + std::to_string(dim));
        if (i < 0) i += dim;
    }
    const Tensor flat = tensor(idx, {std::int64_t(idx.size())}).to(x.device());
    Shape shape(x.shape().begin(), x.shape().begin() + axis);
    shape.insert(shape.end(), in[1].shape().begin(), in[1].shape().end());
    shape.insert(shape.end(), x.shape().begin() + axis + 1, x.shape().end());
    return {index_select(x, axis, flat).reshape(shape)};
}

Ts squeeze_op(const Node& n, const Ts& in) {
    Tensor y = in[0];
    const Ints given = ints_from(n, in, 1, 13, "axes");
    std::vector<int> axes;
    for (auto a : given) axes.push_back(axis_of(a, y.ndim(), n));
    if (given.empty())
        for (int a = 0; a < y.ndim(); ++a)
            if (y.shape(a) == 1) axes.push_back(a);
    std::sort(axes.rbegin(), axes.rend());
    for (int a : axes) {
        if (y.shape(a) != 1)
            n.unsupported("squeezing axis " + std::to_string(a) + " of size " + std::to_string(y.shape(a)));
        y = y.squeeze(a);
    }
    return {y};
}

Ts unsqueeze_op(const Node& n, const Ts& in) {
    Tensor y = in[0];
    const Ints given = ints_from(n, in, 1, 13, "axes");
    const int rank = y.ndim() + int(given.size());
    std::vector<int> axes;
    for (auto a : given) axes.push_back(axis_of(a, rank, n));
    std::sort(axes.begin(), axes.end());
    for (int a : axes) y = y.unsqueeze(a);
    return {y};
}

Ts expand(const Node&, const Ts& in) {
    const Shape out = broadcast_shape(in[0].shape(), host_ints(in[1]));
    Shape lead(out.size() - std::size_t(in[0].ndim()), 1);
    lead.insert(lead.end(), in[0].shape().begin(), in[0].shape().end());
    return {in[0].reshape(lead).expand(out)};
}

Ts tile(const Node& n, const Ts& in) {
    const Ints repeats = host_ints(in[1]);
    if (repeats.size() != std::size_t(in[0].ndim())) n.unsupported("repeats of a length other than the input's rank");
    Tensor y = in[0];
    for (std::size_t a = 0; a < repeats.size(); ++a)
        if (repeats[a] != 1) y = concat(std::vector<Tensor>(std::size_t(repeats[a]), y), int(a));
    return {y};
}

// x padded along `axis` by repeating its own elements: its edge, its reflection (the edge not
// repeated) or its other end (wrap); negative pads crop.
Tensor pad_by_index(const Tensor& x, int axis, std::int64_t before, std::int64_t after, const std::string& mode) {
    const Tensor y =
        x.slice(axis, std::max<std::int64_t>(-before, 0), x.shape(axis) - std::max<std::int64_t>(-after, 0));
    before = std::max<std::int64_t>(before, 0), after = std::max<std::int64_t>(after, 0);
    const std::int64_t len = y.shape(axis);
    if (before == 0 && after == 0) return y;
    Ints index;
    for (std::int64_t i = -before; i < len + after; ++i) {
        std::int64_t j = i;
        if (mode == "edge" || (mode == "reflect" && len == 1)) {
            j = std::clamp<std::int64_t>(i, 0, len - 1);
        } else if (mode == "reflect") {
            const std::int64_t period = 2 * (len - 1);
            j = ((i % period) + period) % period;
            if (j >= len) j = period - j;
        } else {  // wrap
            j = ((i % len) + len) % len;
        }
        index.push_back(j);
    }
    return index_select(y, axis, tensor(index, {std::int64_t(index.size())}).to(y.device()));
}

Ts pad(const Node& n, const Ts& in) {
    const std::string mode = n.s("mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") n.unsupported("mode=" + mode);
    const Tensor& x = in[0];
    const Ints pads = n.opset() >= 11 ? host_ints(in[1]) : n.ints(n.opset() >= 2 ? "pads" : "paddings");
    double value = n.f("value", 0);
    if (n.opset() >= 11 && in.size() > 2 && in[2].defined()) value = in[2].to(DType::f64).reshape({1}).item();
    Ints axes = n.opset() >= 18 && in.size() > 3 && in[3].defined() ? host_ints(in[3]) : Ints{};
    if (axes.empty())
        for (int a = 0; a < x.ndim(); ++a) axes.push_back(a);
    if (pads.size() != 2 * axes.size()) n.unsupported("pads of the wrong length");
    Tensor y = x;
    for (std::size_t i = 0; i < axes.size(); ++i) {
        const int axis = axis_of(axes[i], x.ndim(), n);
        const std::int64_t before = pads[i], after = pads[i + axes.size()];
        if (mode != "constant" &&
            x.shape(axis) + std::min<std::int64_t>(before, 0) + std::min<std::int64_t>(after, 0) <= 0 &&
            before + after > 0)
            n.unsupported("mode=" + mode + " on an empty axis " + std::to_string(axis));
        y = mode == "constant" ? pad_axis(y, axis, before, after, value) : pad_by_index(y, axis, before, after, mode);
    }
    return {y};
}

}  // namespace

void add_shape_operators(std::map<std::string, Operator>& t) {
    t["Identity"] = identity_op;
    t["Constant"] = constant;
    t["Shape"] = shape_op;
    t["Size"] = size_op;
    t["ConstantOfShape"] = constant_of_shape;
    t["Range"] = range;
    t["Flatten"] = flatten_op;
    t["Reshape"] = reshape;
    t["Transpose"] = transpose_op;
    t["Concat"] = concat_op;
    t["Split"] = split;
    t["Slice"] = slice;
    t["Gather"] = gather;
    t["Squeeze"] = squeeze_op;
    t["Unsqueeze"] = unsqueeze_op;
    t["Expand"] = expand;
    t["Tile"] = tile;
    t["Pad"] = pad;
}

}  // namespace fluxion::onnx::detail
