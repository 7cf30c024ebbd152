// operators_indexing.cpp — ONNX's operators that pick, place and mask elements by index:
// GatherElements.
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

Ts gather_elements(const Node& n, const Ts& in) {
    const int axis = axis_of(n.i("axis", 0), in[0].ndim(), n);
    return {gather_flat(in[0], along_axis(n, in[0].shape(), in[1], axis), in[1].shape())};
}

}  // namespace

void add_indexing_operators(std::map<std::string, Operator>& t) {
    t["GatherElements"] = gather_elements;
}

}  // namespace fluxion::onnx::detail
