// linalg.cpp — matmul in all its forms, on the backend's (batched) GEMM. Transposed views are
// passed to the GEMM as transposes instead of being copied.
#include "core/op_arguments.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

using detail::record;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

namespace {

// How a {batch..., rows, cols} operand reaches the GEMM: a pointer, a transpose flag and a
// leading dimension; copied only when its last two axes are not a (transposed) dense matrix.
struct Operand {
    Tensor t;
    bool trans;
    std::int64_t ld;
};

Operand as_operand(const Tensor& x) {
    std::int64_t rows = x.shape(-2), cols = x.shape(-1);
    std::int64_t sr = x.strides()[x.ndim() - 2], sc = x.strides()[x.ndim() - 1];
    bool batch_dense = x.ndim() == 2 || x.strides()[x.ndim() - 3] == rows * cols;
    if (batch_dense && (sc == 1 || cols == 1) && (sr == cols || rows == 1)) return {x, false, std::max<std::int64_t>(cols, 1)};
    if (batch_dense && (sr == 1 || rows == 1) && (sc == rows || cols == 1)) return {x, true, std::max<std::int64_t>(rows, 1)};
    Tensor c = x.contiguous();
    return {c, false, std::max<std::int64_t>(cols, 1)};
}

// {B..., m, k} x {B..., k, n} with broadcast batch axes; both at least 2-D.
Tensor matmul_nd(const Tensor& a0, const Tensor& b0) {
    Device dev = detail::common_device("matmul", {a0, b0});
    DType t = promote(a0.dtype(), b0.dtype());
    if (!is_floating(t))
        throw DTypeError(std::string("matmul: needs floating-point tensors, got ") + name(a0.dtype()) + " and " +
                         name(b0.dtype()));
    Tensor a = cast(a0, t), b = cast(b0, t);
    std::int64_t m = a.shape(-2), k = a.shape(-1), k2 = b.shape(-2), n = b.shape(-1);
    if (k != k2)
        throw ShapeError("matmul: shapes " + to_string(a.shape()) + " and " + to_string(b.shape()) +
                         " are not aligned: " + std::to_string(k) + " (last axis of the first) != " + std::to_string(k2) +
                         " (second-to-last axis of the second)");
    Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
    Shape batch = detail::broadcast_shapes("matmul", ba, bb);
    std::int64_t nbatch = numel(batch);
    // Each operand: a batch stride of 0 when it has no batch axes, else a dense {nbatch, r, c} copy.
    auto batched = [&](const Tensor& x, const Shape& xb) -> std::pair<Operand, std::int64_t> {
        if (xb.empty() || numel(xb) == 1) {
            // Dropping the leading 1s by select keeps a transposed view a view (reshape would copy
            // it): as_operand hands the GEMM its transpose flag instead.
            Tensor x2 = x;
            while (x2.ndim() > 2) x2 = x2.select(0, 0);
            return {as_operand(x2), 0};
        }
        Shape full = batch;
        full.push_back(x.shape(-2));
        full.push_back(x.shape(-1));
        Tensor xe = x.shape() == full ? x : x.expand(full);
        Tensor x3 = xe.reshape({nbatch, x.shape(-2), x.shape(-1)});
        Operand op = as_operand(x3);
        return {op, x.shape(-2) * x.shape(-1)};
    };
    auto [oa, stride_a] = batched(a, ba);
    auto [ob, stride_b] = batched(b, bb);
    Shape out_shape = batch;
    out_shape.push_back(m);
    out_shape.push_back(n);
    Tensor out = detail::make_tensor(out_shape, t, dev);
    if (out.numel() > 0) {
        if (k == 0) {
            out.fill_(0);
        } else {
            detail::backend_for(dev).gemm(dev.index, t, oa.trans, ob.trans, m, n, k, 1.0, oa.t.data_ptr(), oa.ld, stride_a,
                                          ob.t.data_ptr(), ob.ld, stride_b, 0.0, out.data_ptr(), n, m * n, nbatch);
        }
    }
    if (!detail::any_tracked({a, b})) return out;
    return record("matmul", {a, b}, out, [a, b](const Tensor& g, const Needs& need) {
        return Grads{need[0] ? sum_to(matmul(g, b.transpose(-2, -1)), a.shape()) : Tensor(),
                     need[1] ? sum_to(matmul(a.transpose(-2, -1), g), b.shape()) : Tensor()};
    });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
    detail::require_defined("matmul", a);
    detail::require_defined("matmul", b);
    if (a.ndim() == 0 || b.ndim() == 0)
        throw ShapeError("matmul: arguments must have at least one dimension, got " + to_string(a.shape()) + " and " +
                         to_string(b.shape()) + "; use * for scaling");
    if (a.ndim() == 1 && b.ndim() == 1) return matmul_nd(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
    if (a.ndim() == 1) return matmul_nd(a.unsqueeze(0), b).squeeze(-2);
    if (b.ndim() == 1) return matmul_nd(a, b.unsqueeze(1)).squeeze(-1);
    return matmul_nd(a, b);
}

// The bias is written into the output first and the GEMM adds the product to it (beta = 1): one
// pass over the output fewer than matmul followed by +, and no second output tensor.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
    detail::require_defined("linear", x);
    detail::require_defined("linear", weight);
    if (!bias.defined()) return matmul(x, weight.transpose());
    const Device dev = detail::common_device("linear", {x, weight, bias});
    if (x.ndim() == 0 || weight.ndim() != 2 || bias.ndim() != 1 || x.shape(-1) != weight.shape(1) ||
        bias.shape(0) != weight.shape(0))
        throw ShapeError("linear: input " + to_string(x.shape()) + ", weight " + to_string(weight.shape()) +
                         " and bias " + to_string(bias.shape()) +
                         " do not fit; expected {..., in}, {out, in} and {out}");
    const DType t = promote(promote(x.dtype(), weight.dtype()), bias.dtype());
    if (!is_floating(t))
        throw DTypeError(std::string("linear: needs floating-point tensors, got ") + name(x.dtype()) + ", " +
                         name(weight.dtype()) + " and " + name(bias.dtype()));
    const Tensor xt = cast(x, t), w = cast(weight, t), b = cast(bias, t);
    const std::int64_t in = w.shape(1), out_features = w.shape(0);
    const Tensor x2 = xt.reshape({-1, in});
    const std::int64_t rows = x2.shape(0);
    Tensor out = detail::make_tensor({rows, out_features}, t, dev);
    if (out.numel() > 0) {
        const auto& table = detail::backend_for(dev);
        const backend::Strided rows_of_bias = detail::broadcast_view(b, out.shape());
        table.copy_strided(dev.index, t, &rows_of_bias, b.data_ptr(), out.strides().data(), out.data_ptr());
        if (in > 0) {
            const Operand oa = as_operand(x2), ow = as_operand(w.transpose());
            table.gemm(dev.index, t, oa.trans, ow.trans, rows, out_features, in, 1.0, oa.t.data_ptr(), oa.ld, 0,
                       ow.t.data_ptr(), ow.ld, 0, 1.0, out.data_ptr(), out_features, 0, 1);
        }
    }
    Shape shape = xt.shape();
    shape.back() = out_features;
    Tensor y = out.reshape(shape);
    if (!detail::any_tracked({xt, w, b})) return y;
    return record("linear", {xt, w, b}, y, [x2, w, shape = xt.shape()](const Tensor& g, const Needs& need) {
        const Tensor g2 = g.reshape({-1, w.shape(0)});
        return Grads{need[0] ? matmul(g2, w).reshape(shape) : Tensor(), need[1] ? matmul(g2.transpose(), x2) : Tensor(),
                     need[2] ? sum(g2, 0) : Tensor()};
    });
}

Tensor transpose(const Tensor& x, int a, int b) { return x.transpose(a, b); }

}  // namespace fluxion
