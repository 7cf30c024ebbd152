// operators_scan.cpp — ONNX's CumSum, CumProd and ReduceProd as fluxion's ops: a prefix scan in
// log₂(n) steps (Hillis and Steele's), each adding or multiplying the running result shifted by a
// power of two, so that it differentiates, keeps integer types and runs on every device.
#include <algorithm>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;

// The running sums (or products) of x along `axis`.
Tensor scan(const Tensor& x, int axis, bool product) {
    const double identity = product ? 1 : 0;
    Tensor y = x;
    for (std::int64_t shift = 1; shift < x.shape(axis); shift *= 2) {
        const Tensor shifted = pad_axis(y, axis, shift, -shift, identity);
        y = product ? y * shifted : y + shifted;
    }
    return y;
}

Tensor reversed(const Tensor& x, int axis) {
    return index_select(x, axis, arange(x.shape(axis) - 1, -1, -1, {.dtype = DType::i64, .device = x.device()}));
}

// CumSum and CumProd: the axis is an input; exclusive leaves each element out of its own result,
// reverse runs from the end.
Ts cumulative(const Node& n, const Ts& in) {
    const bool product = n.op() == "CumProd";
    const int axis = axis_of(host_ints(in[1]).at(0), in[0].ndim(), n);
    const bool exclusive = n.i("exclusive", 0) != 0, reverse = n.i("reverse", 0) != 0;
    Tensor x = reverse ? reversed(in[0], axis) : in[0];
    if (exclusive && x.shape(axis) > 0) x = pad_axis(x, axis, 1, -1, product ? 1 : 0);
    const Tensor y = scan(x, axis, product);
    return {reverse ? reversed(y, axis) : y};
}

// ReduceProd: the last running product along each reduced axis (1 over an empty axis).
Tensor prod_axis(const Tensor& x, int axis, bool keep) {
    const std::int64_t dim = x.shape(axis);
    Tensor y;
    if (dim == 0) {
        Shape s = x.shape();
        s[std::size_t(axis)] = 1;
        y = full(s, 1, {.dtype = x.dtype(), .device = x.device()});
    } else {
        y = scan(x, axis, true).slice(axis, dim - 1, dim);
    }
    return keep ? y : y.squeeze(axis);
}

Ts reduce_prod(const Node& n, const Ts& in) {
    const int rank = in[0].ndim();
    const std::vector<std::int64_t> given =
        n.opset() >= 18 ? (in.size() > 1 && in[1].defined() ? host_ints(in[1]) : std::vector<std::int64_t>{})
                        : n.ints("axes");
    std::vector<int> axes;
    for (auto a : given) axes.push_back(axis_of(a, rank, n));
    if (given.empty() && !n.i("noop_with_empty_axes", 0))
        for (int a = 0; a < rank; ++a) axes.push_back(a);
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    const bool keep = n.i("keepdims", 1) != 0;
    Tensor y = in[0];
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) y = prod_axis(y, *it, keep);
    return {y};
}

}  // namespace

void add_scan_operators(std::map<std::string, Operator>& t) {
    t["CumSum"] = cumulative;
    t["CumProd"] = cumulative;
    t["ReduceProd"] = reduce_prod;
}

}  // namespace fluxion::onnx::detail
