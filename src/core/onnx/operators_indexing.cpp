// operators_indexing.cpp — ONNX's operators that pick, place and mask elements by index:
// GatherElements, GatherND, ScatterElements (and the older Scatter), ScatterND, OneHot, Compress,
// TopK, Hardmax, Trilu, EyeLike, ReverseSequence, DepthToSpace, SpaceToDepth and CenterCropPad.
// Indices are data of the graph read on the host, where each operator computes which element goes
// where; the elements themselves move with fluxion's ops (index_select, concat, where, permute),
// so the results differentiate in the data and stay on its device.
#include <algorithm>
#include <functional>
#include <numeric>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {

Tensor gather_flat(const Tensor& x, const std::vector<std::int64_t>& flat, const Shape& shape) {
    const Tensor index = tensor(flat, {std::int64_t(flat.size())}).to(x.device());
    return index_select(x.reshape({x.numel()}), 0, index).reshape(shape);
}

namespace {

using Ts = std::vector<Tensor>;
using Ints = std::vector<std::int64_t>;

Ints strides_of(const Shape& s) {
    Ints st(s.size());
    std::int64_t k = 1;
    for (std::size_t i = s.size(); i-- > 0;) st[i] = k, k *= s[i];
    return st;
}
// The product of s[from, to).
std::int64_t count(const Shape& s, std::size_t from = 0, std::size_t to = std::size_t(-1)) {
    to = std::min(to, s.size()), from = std::min(from, to);
    return std::accumulate(s.begin() + std::ptrdiff_t(from), s.begin() + std::ptrdiff_t(to), std::int64_t(1),
                           std::multiplies<>());
}
// An index in [-dim, dim) made non-negative; ValueError otherwise.
std::int64_t checked(const Node& n, std::int64_t i, std::int64_t dim, std::size_t axis) {
    if (i < -dim || i >= dim)
        throw ValueError("fx::onnx: " + n.label() + ": index " + std::to_string(i) + " is out of range for axis " +
                         std::to_string(axis) + " of size " + std::to_string(dim));
    return i < 0 ? i + dim : i;
}
Tensor host_tensor(const Ints& values, const Shape& shape, DType dtype, const Device& device) {
    return tensor(values, shape).to(dtype).to(device);
}

// For each element of `indices` (same rank as data), the flat position in data that it names:
// its own coordinates with the one along `axis` replaced by its value (GatherElements, ScatterElements).
Ints along_axis(const Node& n, const Shape& data, const Tensor& indices, int axis) {
    const Shape& is = indices.shape();
    if (is.size() != data.size())
        throw ShapeError("fx::onnx: " + n.label() + ": indices " + to_string(is) + " and data " + to_string(data) +
                         " have different ranks");
    for (std::size_t a = 0; a < is.size(); ++a)
        if (int(a) != axis && is[a] > data[a])
            throw ShapeError("fx::onnx: " + n.label() + ": indices " + to_string(is) + " exceed data " +
                             to_string(data) + " along axis " + std::to_string(a));
    values_read_on_host(n, "its indices");
    const Ints idx = host_ints(indices), st = strides_of(data), ist = strides_of(is);
    Ints flat(idx.size());
    for (std::size_t p = 0; p < idx.size(); ++p) {
        std::int64_t rest = std::int64_t(p), at = 0;
        for (std::size_t a = 0; a < is.size(); ++a) {
            std::int64_t c = rest / ist[a];
            rest %= ist[a];
            if (int(a) == axis) c = checked(n, idx[p], data[a], a);
            at += c * st[a];
        }
        flat[p] = at;
    }
    return flat;
}

// data with the elements of `updates` placed at the flat positions `targets` (one per update, in
// order), combined by `reduction`: none (the last update wins), add, mul, max or min. Each round
// takes every position's next update, so the result is a few index_selects and elementwise ops.
Tensor scatter(const Node& n, const Tensor& data, const Tensor& updates, const Ints& targets,
               const std::string& reduction) {
    if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min")
        n.unsupported("reduction='" + reduction + "'");
    if (updates.numel() != std::int64_t(targets.size()))
        throw ShapeError("fx::onnx: " + n.label() + ": updates " + to_string(updates.shape()) + " do not fit " +
                         std::to_string(targets.size()) + " indexed elements");
    const std::int64_t size = data.numel();
    std::vector<Ints> at(std::size_t(size), Ints{});  // the updates landing on each element, in order
    std::size_t rounds = 0;
    for (std::size_t u = 0; u < targets.size(); ++u) {
        auto& list = at[std::size_t(targets[u])];
        list.push_back(std::int64_t(u));
        rounds = std::max(rounds, list.size());
    }
    const bool neutral = reduction == "add" || reduction == "mul";  // an identity element follows the updates
    std::vector<Tensor> parts = {data.reshape({size}), updates.reshape({updates.numel()})};
    if (neutral)
        parts.push_back(full({1}, reduction == "add" ? 0 : 1, {.dtype = data.dtype(), .device = data.device()}));
    const Tensor source = concat(parts);
    const std::int64_t identity = size + updates.numel();
    if (reduction == "none") {
        Ints pick(static_cast<std::size_t>(size));
        for (std::int64_t o = 0; o < size; ++o) pick[o] = at[o].empty() ? o : size + at[o].back();
        return gather_flat(source, pick, data.shape());
    }
    Tensor y = data;
    for (std::size_t k = 0; k < rounds; ++k) {
        Ints pick(static_cast<std::size_t>(size));
        for (std::int64_t o = 0; o < size; ++o)  // max and min meet the element itself where no update is left
            pick[o] = k < at[o].size() ? size + at[o][k] : neutral ? identity : o;
        const Tensor part = gather_flat(source, pick, data.shape());
        y = reduction == "add"   ? y + part
            : reduction == "mul" ? y * part
            : reduction == "max" ? maximum(y, part)
                                 : minimum(y, part);
    }
    return y;
}

Ts gather_elements(const Node& n, const Ts& in) {
    const int axis = axis_of(n.i("axis", 0), in[0].ndim(), n);
    return {gather_flat(in[0], along_axis(n, in[0].shape(), in[1], axis), in[1].shape())};
}

Ts scatter_elements(const Node& n, const Ts& in) {
    const int axis = axis_of(n.i("axis", 0), in[0].ndim(), n);
    if (in[2].shape() != in[1].shape())
        throw ShapeError("fx::onnx: " + n.label() + ": updates " + to_string(in[2].shape()) + " and indices " +
                         to_string(in[1].shape()) + " differ");
    return {scatter(n, in[0], in[2], along_axis(n, in[0].shape(), in[1], axis), n.s("reduction", "none"))};
}

// The flat offsets of the slices that the last axis of `indices` names in `data` (k coordinates
// from axis `batch` on), each followed by the offsets within its slice; per batch of `batch` axes.
Ints slices_named(const Node& n, const Shape& data, const Tensor& indices, std::size_t batch) {
    const Shape& is = indices.shape();
    if (is.empty()) throw ShapeError("fx::onnx: " + n.label() + ": indices are a scalar");
    const auto k = std::size_t(is.back());
    if (batch + k > data.size() || batch >= is.size())
        throw ShapeError("fx::onnx: " + n.label() + ": indices " + to_string(is) + " do not fit data " +
                         to_string(data) + " with batch_dims " + std::to_string(batch));
    for (std::size_t a = 0; a < batch; ++a)
        if (is[a] != data[a])
            throw ShapeError("fx::onnx: " + n.label() + ": indices " + to_string(is) + " and data " + to_string(data) +
                             " differ in their batch axes");
    values_read_on_host(n, "its indices");
    const Ints idx = host_ints(indices), st = strides_of(data);
    const std::int64_t slice = count(data, batch + k), tuples = count(is, batch, is.size() - 1);
    const std::int64_t batch_stride = count(data, batch);
    Ints flat;
    for (std::int64_t q = 0; q < count(is, 0, is.size() - 1); ++q) {
        std::int64_t base = q / std::max<std::int64_t>(tuples, 1) * batch_stride;
        for (std::size_t j = 0; j < k; ++j)
            base += checked(n, idx[std::size_t(q) * k + j], data[batch + j], batch + j) * st[batch + j];
        for (std::int64_t e = 0; e < slice; ++e) flat.push_back(base + e);
    }
    return flat;
}

Ts gather_nd(const Node& n, const Ts& in) {
    const auto batch = std::size_t(n.i("batch_dims", 0));
    const Shape &ds = in[0].shape(), &is = in[1].shape();
    const Ints flat = slices_named(n, ds, in[1], batch);
    Shape shape(is.begin(), is.end() - 1);
    shape.insert(shape.end(), ds.begin() + std::ptrdiff_t(batch + std::size_t(is.back())), ds.end());
    return {gather_flat(in[0], flat, shape)};
}

Ts scatter_nd(const Node& n, const Ts& in) {
    return {scatter(n, in[0], in[2], slices_named(n, in[0].shape(), in[1], 0), n.s("reduction", "none"))};
}

// OneHot: `on` where an index names the class, `off` elsewhere (values = [off, on]); the class axis
// is inserted at `axis`. Negative indices count from depth; indices out of range give no `on`.
Ts one_hot(const Node& n, const Ts& in) {
    const Shape& is = in[0].shape();
    const auto depth = std::int64_t(in[1].to(DType::f64).item());
    const int rank = int(is.size()) + 1;
    const std::int64_t axis = n.i("axis", -1);
    if (axis < -rank || axis >= rank)
        throw ValueError("fx::onnx: " + n.label() + ": axis " + std::to_string(axis) + " is out of range for rank " +
                         std::to_string(rank));
    const auto a = std::size_t(axis < 0 ? axis + rank : axis);
    const std::int64_t inner = count(is, a);
    values_read_on_host(n, "its indices");
    const Ints idx = in[0].to(DType::f64).to_vector<std::int64_t>();  // ONNX truncates real indices
    Ints hot(std::size_t(count(is) * depth), 0);
    for (std::size_t p = 0; p < idx.size(); ++p) {
        const std::int64_t c = idx[p] < 0 ? idx[p] + depth : idx[p];
        if (c < 0 || c >= depth) continue;
        const std::int64_t outer = std::int64_t(p) / inner, at = std::int64_t(p) % inner;
        hot[std::size_t((outer * depth + c) * inner + at)] = 1;
    }
    Shape shape = is;
    shape.insert(shape.begin() + std::ptrdiff_t(a), depth);
    const Tensor& values = in[2];
    return {where(host_tensor(hot, shape, DType::boolean, values.device()), values.reshape({2}).select(0, 1),
                  values.reshape({2}).select(0, 0))};
}

Ts compress(const Node& n, const Ts& in) {
    Tensor x = in[0];
    int axis = 0;
    if (n.has("axis")) axis = axis_of(n.i("axis", 0), x.ndim(), n);
    else x = x.reshape({x.numel()});
    values_read_on_host(n, "its condition");
    const Ints condition = host_ints(in[1]);
    if (std::int64_t(condition.size()) > x.shape(axis))
        throw ShapeError("fx::onnx: " + n.label() + ": a condition of " + std::to_string(condition.size()) +
                         " entries for an axis of " + std::to_string(x.shape(axis)));
    Ints kept;
    for (std::size_t i = 0; i < condition.size(); ++i)
        if (condition[i]) kept.push_back(std::int64_t(i));
    return {index_select(x, axis, tensor(kept, {std::int64_t(kept.size())}).to(x.device()))};
}

// TopK: the k largest (or smallest) along the axis, sorted, ties in index order; the values are
// picked from x (differentiable), the order found on the host.
Ts top_k(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const int axis = axis_of(n.i("axis", -1), x.ndim(), n);
    const std::int64_t k = n.opset() < 10 ? n.i("k", 1) : host_ints(in[1]).at(0), dim = x.shape(axis);
    if (k < 0 || k > dim)
        throw ValueError("fx::onnx: " + n.label() + ": k = " + std::to_string(k) + " for an axis of " +
                         std::to_string(dim));
    const bool largest = n.i("largest", 1) != 0;
    values_read_on_host(n, "its input and k (to order them)");
    const std::vector<double> v = x.to_vector<double>();
    const std::int64_t inner = count(x.shape(), std::size_t(axis) + 1),
                       outer = x.numel() / std::max<std::int64_t>(dim * inner, 1);
    Ints flat, picked;
    Ints order(static_cast<std::size_t>(dim));
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < inner; ++i) {
            auto at = [&](std::int64_t j) { return v[std::size_t((o * dim + j) * inner + i)]; };
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(),
                             [&](std::int64_t p, std::int64_t q) { return largest ? at(p) > at(q) : at(p) < at(q); });
            for (std::int64_t j = 0; j < k; ++j) picked.push_back(order[std::size_t(j)]);
        }
    // picked is in {outer, inner, k} order; the outputs are {outer, k, inner}.
    Ints indices(picked.size());
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j = 0; j < k; ++j)
            for (std::int64_t i = 0; i < inner; ++i) {
                const std::int64_t c = picked[std::size_t((o * inner + i) * k + j)];
                indices[std::size_t((o * k + j) * inner + i)] = c;
                flat.push_back((o * dim + c) * inner + i);
            }
    Shape shape = x.shape();
    shape[std::size_t(axis)] = k;
    return {gather_flat(x, flat, shape), tensor(indices, shape).to(x.device())};
}

// Hardmax: 1 at the first largest element along the axis, 0 elsewhere (before opset 13, along the
// flattened axes from `axis` on).
Ts hardmax(const Node& n, const Ts& in) {
    Tensor x = in[0];
    const int axis = axis_of(n.i("axis", n.opset() < 13 ? 1 : -1), x.ndim(), n);
    const Shape shape = x.shape();
    int along = axis;
    if (n.opset() < 13) x = x.reshape({count(shape, 0, std::size_t(axis)), count(shape, std::size_t(axis))}), along = 1;
    Shape at(std::size_t(x.ndim()), 1);
    at[std::size_t(along)] = x.shape(along);
    const Tensor classes = arange(x.shape(along), {.dtype = DType::i64, .device = x.device()}).reshape(at);
    return {eq(classes, argmax(x, along, true)).to(in[0].dtype()).reshape(shape)};
}

// Trilu: the elements on and above (upper) or below (lower) the k-th diagonal of the last two axes.
Ts trilu(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    if (x.ndim() < 2)
        throw ShapeError("fx::onnx: " + n.label() + ": input " + to_string(x.shape()) + " is not a matrix");
    if (in.size() > 1 && in[1].defined()) values_read_on_host(n, "k");
    const std::int64_t k = in.size() > 1 && in[1].defined() ? host_ints(in[1]).at(0) : 0;
    const bool upper = n.i("upper", 1) != 0;
    const std::int64_t rows = x.shape(-2), cols = x.shape(-1);
    Ints keep(std::size_t(rows * cols));
    for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j) keep[std::size_t(i * cols + j)] = upper ? j - i >= k : j - i <= k;
    return {where(host_tensor(keep, {rows, cols}, DType::boolean, x.device()), x, zeros_like(x))};
}

Ts eye_like(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    if (x.ndim() != 2)
        throw ShapeError("fx::onnx: " + n.label() + ": input " + to_string(x.shape()) + " is not a matrix");
    const DType dtype = n.has("dtype") ? dtype_of_onnx(int(n.i("dtype", 0)), n.label() + "'s dtype") : x.dtype();
    const std::int64_t k = n.i("k", 0), rows = x.shape(0), cols = x.shape(1);
    Ints eye(std::size_t(rows * cols));
    for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j) eye[std::size_t(i * cols + j)] = j - i == k;
    return {host_tensor(eye, {rows, cols}, dtype, x.device())};
}

// ReverseSequence: the first sequence_lens[b] steps of each batch entry b in reverse order.
Ts reverse_sequence(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const int batch = axis_of(n.i("batch_axis", 1), x.ndim(), n), time = axis_of(n.i("time_axis", 0), x.ndim(), n);
    values_read_on_host(n, "its sequence lengths");
    const Ints lens = host_ints(in[1]), st = strides_of(x.shape());
    if (std::int64_t(lens.size()) != x.shape(batch))
        throw ShapeError("fx::onnx: " + n.label() + ": " + std::to_string(lens.size()) +
                         " sequence lengths for a batch of " + std::to_string(x.shape(batch)));
    Ints flat(std::size_t(x.numel()));
    for (std::int64_t p = 0; p < x.numel(); ++p) {
        const std::int64_t b = p / st[std::size_t(batch)] % x.shape(batch),
                           t = p / st[std::size_t(time)] % x.shape(time);
        const std::int64_t len = std::clamp<std::int64_t>(lens[std::size_t(b)], 0, x.shape(time));
        flat[std::size_t(p)] = t < len ? p + (len - 1 - 2 * t) * st[std::size_t(time)] : p;
    }
    return {gather_flat(x, flat, x.shape())};
}

// DepthToSpace and SpaceToDepth: {N, C, H, W} regrouped by blocks, as reshapes and a permutation.
// DCR takes the block from the outer part of the channels, CRD from the inner part.
Ts depth_to_space(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const std::int64_t b = n.i("blocksize", 0);
    const std::string mode = n.s("mode", "DCR");
    if (x.ndim() != 4 || b <= 0 || x.shape(1) % (b * b))
        throw ShapeError("fx::onnx: " + n.label() + ": input " + to_string(x.shape()) +
                         " is not {N, C, H, W} with C a multiple of " + std::to_string(b) + "²");
    const std::int64_t N = x.shape(0), C = x.shape(1) / (b * b), H = x.shape(2), W = x.shape(3);
    Tensor y;
    if (mode == "DCR") y = x.reshape({N, b, b, C, H, W}).permute({0, 3, 4, 1, 5, 2});
    else if (mode == "CRD") y = x.reshape({N, C, b, b, H, W}).permute({0, 1, 4, 2, 5, 3});
    else n.unsupported("mode='" + mode + "'");
    return {y.reshape({N, C, H * b, W * b})};
}
Ts space_to_depth(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const std::int64_t b = n.i("blocksize", 0);
    const std::string mode = n.s("mode", "DCR");
    if (x.ndim() != 4 || b <= 0 || x.shape(2) % b || x.shape(3) % b)
        throw ShapeError("fx::onnx: " + n.label() + ": input " + to_string(x.shape()) +
                         " is not {N, C, H, W} with H and W multiples of " + std::to_string(b));
    const std::int64_t N = x.shape(0), C = x.shape(1), H = x.shape(2) / b, W = x.shape(3) / b;
    const Tensor blocks = x.reshape({N, C, H, b, W, b});
    Tensor y;
    if (mode == "DCR") y = blocks.permute({0, 3, 5, 1, 2, 4});
    else if (mode == "CRD") y = blocks.permute({0, 1, 3, 5, 2, 4});
    else n.unsupported("mode='" + mode + "'");
    return {y.reshape({N, C * b * b, H, W})};
}

// CenterCropPad: each named axis cropped or zero-padded about its centre to the given size (the
// extra element of an odd difference goes to the end).
Ts center_crop_pad(const Node& n, const Ts& in) {
    Tensor y = in[0];
    values_read_on_host(n, "its sizes");
    const Ints sizes = host_ints(in[1]);
    Ints axes = n.ints("axes");
    if (axes.empty()) {
        axes.resize(std::size_t(y.ndim()));
        std::iota(axes.begin(), axes.end(), 0);
    }
    if (axes.size() != sizes.size())
        throw ShapeError("fx::onnx: " + n.label() + ": " + std::to_string(sizes.size()) + " sizes for " +
                         std::to_string(axes.size()) + " axes");
    for (std::size_t i = 0; i < axes.size(); ++i) {
        const int axis = axis_of(axes[i], y.ndim(), n);
        const std::int64_t dim = y.shape(axis), want = sizes[i];
        if (want < dim) y = y.slice(axis, (dim - want) / 2, (dim - want) / 2 + want);
        else if (want > dim) y = pad_axis(y, axis, (want - dim) / 2, want - dim - (want - dim) / 2, 0);
    }
    return {y};
}

}  // namespace

void add_indexing_operators(std::map<std::string, Operator>& t) {
    t["GatherElements"] = gather_elements;
    t["GatherND"] = gather_nd;
    t["ScatterElements"] = scatter_elements;
    t["Scatter"] = scatter_elements;  // ScatterElements' name before opset 11
    t["ScatterND"] = scatter_nd;
    t["OneHot"] = one_hot;
    t["Compress"] = compress;
    t["TopK"] = top_k;
    t["Hardmax"] = hardmax;
    t["Trilu"] = trilu;
    t["EyeLike"] = eye_like;
    t["ReverseSequence"] = reverse_sequence;
    t["DepthToSpace"] = depth_to_space;
    t["SpaceToDepth"] = space_to_depth;
    t["CenterCropPad"] = center_crop_pad;
}

}  // namespace fluxion::onnx::detail
