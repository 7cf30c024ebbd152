// reduce.cpp — sums, means, extrema and arg-extrema over everything or one axis; sum_to and
// logsumexp built on them.
#include <cmath>

#include "core/op_arguments.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

using backend::Reduce;
using detail::record;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

namespace {

const char* reduce_name(Reduce op) {
    switch (op) {
        case Reduce::sum: return "sum";
        case Reduce::mean: return "mean";
        case Reduce::max: return "max";
        case Reduce::min: return "min";
        case Reduce::argmax: return "argmax";
        case Reduce::argmin: return "argmin";
    }
    return "reduce";
}

// Runs the kernel over {outer, n, inner} views of x; `axis` < 0 reduces everything.
Tensor reduce_raw(Reduce op, const Tensor& x, int axis, bool keepdims) {
    const char* nm = reduce_name(op);
    detail::require_defined(nm, x);
    Tensor xc = detail::dense(x);
    std::int64_t outer = 1, n = x.numel(), inner = 1;
    Shape out_shape;
    if (axis >= 0) {
        for (int i = 0; i < axis; ++i) outer *= x.shape()[i];
        n = x.shape()[axis];
        for (int i = axis + 1; i < x.ndim(); ++i) inner *= x.shape()[i];
        out_shape = x.shape();
        if (keepdims) out_shape[axis] = 1;
        else out_shape.erase(out_shape.begin() + axis);
    } else if (keepdims) {
        out_shape.assign(x.ndim(), 1);
    }
    bool extreme = op == Reduce::max || op == Reduce::min || op == Reduce::argmax || op == Reduce::argmin;
    if (extreme && n == 0)
        throw ShapeError(std::string(nm) + ": cannot reduce an empty axis (shape " + to_string(x.shape()) + ")");
    bool index = op == Reduce::argmax || op == Reduce::argmin;
    DType in_t = x.dtype();
    if (op == Reduce::mean && !is_floating(in_t))
        throw DTypeError("mean: needs a floating-point tensor, got " + std::string(name(in_t)) +
                         "; convert it with fx::cast(x, fx::DType::f32)");
    DType out_t = index ? DType::i64 : (op == Reduce::sum && in_t == DType::boolean ? DType::i64 : in_t);
    if (out_t != in_t && !index) {
        xc = cast(xc, out_t);
        in_t = out_t;
    }
    Tensor out = detail::make_tensor(out_shape, out_t, x.device());
    if (out.numel() > 0)
        detail::backend_of(x).reduce(x.device().index, op, in_t, outer, n, inner, xc.data_ptr(), out.data_ptr());
    return out;
}

// The axis a reduction runs along, or -1 for all: a 0-d tensor's axis 0 (or -1) is its one element.
int reduce_axis(const char* op, int axis, const Tensor& x) {
    int a = detail::normalize_scalar_axis(op, axis, x.ndim());
    return x.ndim() == 0 ? -1 : a;
}

// The gradient of a reduction, broadcast back to x's shape.
Tensor expand_back(const Tensor& g, const Shape& x_shape, int axis, bool keepdims) {
    Tensor gk = g;
    if (axis >= 0 && !keepdims) gk = g.unsqueeze(axis);
    if (axis < 0) gk = g.reshape(Shape(x_shape.size(), 1));
    return gk.expand(x_shape);
}

Tensor reduce_sum_mean(Reduce op, const Tensor& x, int axis, bool keepdims) {
    Tensor out = reduce_raw(op, x, axis, keepdims);
    std::int64_t count = axis >= 0 ? x.shape()[axis] : x.numel();
    return record(reduce_name(op), {x}, out, [op, xs = x.shape(), axis, keepdims, count](const Tensor& g, const Needs&) {
        Tensor gx = expand_back(g, xs, axis, keepdims);
        return Grads{op == Reduce::mean ? gx / static_cast<double>(std::max<std::int64_t>(count, 1)) : gx};
    });
}

Tensor reduce_extreme(Reduce op, const Tensor& x, int axis, bool keepdims) {
    Tensor out = reduce_raw(op, x, axis, keepdims);
    if (!detail::any_tracked({x})) return out;
    if (axis < 0) {
        // Over everything, ties share the gradient equally (as PyTorch's max() and amax do); when
        // the result is NaN, the NaN elements are the ties (ne(v, v) is true for NaN only).
        return record(reduce_name(op), {x}, out, [x, out](const Tensor& g, const Needs&) {
            Tensor o = expand_back(out, x.shape(), -1, false);
            Tensor hit = cast(eq(x, o), g.dtype()) + cast(ne(x, x), g.dtype()) * cast(ne(o, o), g.dtype());
            return Grads{hit * expand_back(g, x.shape(), -1, false) / sum(hit).reshape(Shape(x.ndim(), 1))};
        });
    }
    // Along an axis, the gradient goes to the one index that argmax / argmin returns, as PyTorch's
    // max(x, dim) does.
    Tensor index = reduce_raw(op == Reduce::max ? Reduce::argmax : Reduce::argmin, x, axis, true);
    return record(reduce_name(op), {x}, out, [xs = x.shape(), index, axis, keepdims](const Tensor& g, const Needs&) {
        Shape along(xs.size(), 1);
        along[axis] = xs[axis];
        Tensor positions = arange(xs[axis], {.dtype = DType::i64, .device = index.device()}).reshape(along);
        return Grads{cast(eq(positions, index), g.dtype()) * expand_back(g, xs, axis, keepdims)};
    });
}

}  // namespace

Tensor sum(const Tensor& x) { return reduce_sum_mean(Reduce::sum, x, -1, false); }
Tensor sum(const Tensor& x, int axis, bool keepdims) {
    return reduce_sum_mean(Reduce::sum, x, reduce_axis("sum", axis, x), keepdims);
}
Tensor mean(const Tensor& x) { return reduce_sum_mean(Reduce::mean, x, -1, false); }
Tensor mean(const Tensor& x, int axis, bool keepdims) {
    return reduce_sum_mean(Reduce::mean, x, reduce_axis("mean", axis, x), keepdims);
}
Tensor max(const Tensor& x) { return reduce_extreme(Reduce::max, x, -1, false); }
Tensor max(const Tensor& x, int axis, bool keepdims) {
    return reduce_extreme(Reduce::max, x, reduce_axis("max", axis, x), keepdims);
}
Tensor min(const Tensor& x) { return reduce_extreme(Reduce::min, x, -1, false); }
Tensor min(const Tensor& x, int axis, bool keepdims) {
    return reduce_extreme(Reduce::min, x, reduce_axis("min", axis, x), keepdims);
}
Tensor argmax(const Tensor& x) { return reduce_raw(Reduce::argmax, x, -1, false); }
Tensor argmax(const Tensor& x, int axis, bool keepdims) {
    return reduce_raw(Reduce::argmax, x, reduce_axis("argmax", axis, x), keepdims);
}
Tensor argmin(const Tensor& x, int axis, bool keepdims) {
    return reduce_raw(Reduce::argmin, x, reduce_axis("argmin", axis, x), keepdims);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
    if (x.shape() == shape) return x;
    if (shape.size() > x.shape().size() || detail::broadcast_shapes("sum_to", shape, x.shape()) != x.shape())
        throw ShapeError("sum_to: shape " + to_string(x.shape()) + " does not broadcast from " + to_string(shape));
    Tensor r = x;
    for (std::size_t lead = x.shape().size() - shape.size(); lead > 0; --lead) r = sum(r, 0, false);
    for (std::size_t i = 0; i < shape.size(); ++i)
        if (shape[i] == 1 && r.shape()[i] != 1) r = sum(r, static_cast<int>(i), true);
    return r;
}

Tensor logsumexp(const Tensor& x, int axis, bool keepdims) {
    int a = detail::normalize_scalar_axis("logsumexp", axis, x.ndim());
    Tensor m = max(x.detach(), a, true);
    // A row whose max is ±inf is shifted by 0, not by the max, so that it gives ±inf (as PyTorch
    // does), not inf - inf = NaN.
    m = where(eq(abs(m), full({}, INFINITY, {.dtype = m.dtype(), .device = m.device()})), zeros_like(m), m);
    Tensor r = log(sum(exp(x - m), a, true)) + m;
    return keepdims || x.ndim() == 0 ? r : r.squeeze(a);
}

}  // namespace fluxion
