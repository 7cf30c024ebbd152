// shape.cpp — joining tensors, indexing by integer tensors, one-hot encoding.
#include "core/op_arguments.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

using detail::record;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

Tensor concat(const std::vector<Tensor>& xs, int axis) {
    if (xs.empty()) throw ValueError("concat: needs at least one tensor");
    Device dev = detail::common_device("concat", xs);
    const Tensor& first = xs[0];
    int a = detail::normalize_axis("concat", axis, first.ndim());
    Shape shape = first.shape();
    shape[a] = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
        const auto& x = xs[i];
        bool same = x.ndim() == first.ndim();
        for (int d = 0; same && d < x.ndim(); ++d) same = d == a || x.shape()[d] == first.shape()[d];
        if (!same)
            throw ShapeError("concat: tensor " + std::to_string(i) + " has shape " + to_string(x.shape()) +
                             ", which does not match " + to_string(first.shape()) + " outside axis " + std::to_string(a));
        if (x.dtype() != first.dtype())
            throw DTypeError("concat: tensor " + std::to_string(i) + " is " + name(x.dtype()) + ", the first is " +
                             name(first.dtype()) + "; cast them to one type");
        shape[a] += x.shape()[a];
    }
    Tensor out = detail::make_tensor(shape, first.dtype(), dev);
    std::vector<std::int64_t> starts;
    {
        NoGrad no_grad;
        std::int64_t at = 0;
        for (const auto& x : xs) {
            starts.push_back(at);
            if (x.numel() > 0) out.slice(a, at, at + x.shape()[a]).copy_(x);
            at += x.shape()[a];
        }
    }
    std::vector<std::int64_t> sizes;
    for (const auto& x : xs) sizes.push_back(x.shape()[a]);
    return record("concat", xs, out, [a, starts, sizes](const Tensor& g, const Needs& n) {
        Grads gs;
        for (std::size_t i = 0; i < starts.size(); ++i)
            gs.push_back(n[i] ? g.slice(a, starts[i], starts[i] + sizes[i]).contiguous() : Tensor());
        return gs;
    });
}

Tensor stack(const std::vector<Tensor>& xs, int axis) {
    if (xs.empty()) throw ValueError("stack: needs at least one tensor");
    int a = detail::normalize_axis("stack", axis, xs[0].ndim() + 1);
    for (std::size_t i = 1; i < xs.size(); ++i)
        if (xs[i].shape() != xs[0].shape())
            throw ShapeError("stack: tensor " + std::to_string(i) + " has shape " + to_string(xs[i].shape()) +
                             " but tensor 0 has " + to_string(xs[0].shape()) + "; stacked tensors must share a shape");
    std::vector<Tensor> us;
    for (const auto& x : xs) us.push_back(x.unsqueeze(a));
    return concat(us, a);
}

Tensor index_select(const Tensor& x, int axis, const Tensor& index) {
    Device dev = detail::common_device("index_select", {x, index});
    if (is_floating(index.dtype()))
        throw DTypeError(std::string("index_select: indices must be integers, got ") + name(index.dtype()));
    int a = detail::normalize_axis("index_select", axis, x.ndim());
    Tensor idx = detail::dense(cast(index, DType::i64));
    std::int64_t n_src = x.shape()[a];
    if (dev.is_cpu()) {  // device backends check the indices they are given themselves
        const auto* p = idx.data<std::int64_t>();
        for (std::int64_t i = 0; i < idx.numel(); ++i)
            if (p[i] < 0 || p[i] >= n_src)
                throw ValueError("index_select: index " + std::to_string(p[i]) + " is out of range for axis " +
                                 std::to_string(a) + " of size " + std::to_string(n_src) + " (shape " + to_string(x.shape()) + ")");
    }
    std::int64_t outer = 1, inner = 1;
    for (int i = 0; i < a; ++i) outer *= x.shape()[i];
    for (int i = a + 1; i < x.ndim(); ++i) inner *= x.shape()[i];
    Shape shape(x.shape().begin(), x.shape().begin() + a);
    shape.insert(shape.end(), index.shape().begin(), index.shape().end());
    shape.insert(shape.end(), x.shape().begin() + a + 1, x.shape().end());
    Tensor xc = detail::dense(x);
    Tensor out = detail::make_tensor(shape, x.dtype(), dev);
    if (out.numel() > 0)
        detail::backend_for(dev).index_select(dev.index, x.dtype(), outer, n_src, inner, xc.data_ptr(),
                                              idx.data<std::int64_t>(), idx.numel(), out.data_ptr());
    if (!detail::any_tracked({x})) return out;
    return record("index_select", {x}, out, [xs = x.shape(), outer, n_src, inner, idx](const Tensor& g, const Needs&) {
        Tensor gx = zeros(xs, {.dtype = g.dtype(), .device = g.device()});
        Tensor gc = detail::dense(g);
        if (gc.numel() > 0)
            detail::backend_of(gx).index_add(gx.device().index, gx.dtype(), outer, n_src, inner, gc.data_ptr(),
                                             idx.data<std::int64_t>(), idx.numel(), gx.data_ptr());
        return Grads{gx};
    });
}

Tensor gather(const Tensor& x, const Tensor& index) { return index_select(x, 0, index); }

Tensor onecold(const Tensor& scores) {
    if (scores.ndim() == 0) throw ShapeError("onecold: scores need a class axis (the last), got a scalar");
    return argmax(scores, -1);
}

Tensor onehot(const Tensor& labels, std::int64_t classes, DType dtype) {
    detail::require_defined("onehot", labels);
    if (is_floating(labels.dtype()))
        throw DTypeError(std::string("onehot: labels must be integers, got ") + name(labels.dtype()));
    if (classes < 1) throw ValueError("onehot: the number of classes must be positive, got " + std::to_string(classes));
    // Checked on every device (a copy to the host on a GPU): an out-of-range label would
    // otherwise give a row of zeros there, silently, instead of raising as on the CPU.
    if (labels.numel() > 0) {
        auto v = labels.to_vector<std::int64_t>();
        for (auto l : v)
            if (l < 0 || l >= classes)
                throw ValueError("onehot: label " + std::to_string(l) + " is outside 0.." + std::to_string(classes - 1));
    }
    Tensor range = arange(classes, {.dtype = labels.dtype(), .device = labels.device()});
    return cast(eq(labels.unsqueeze(-1), range), dtype);
}

}  // namespace fluxion
