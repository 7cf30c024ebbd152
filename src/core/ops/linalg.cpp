// linalg.cpp — matmul in all its forms, on the backend's (batched) GEMM. Transposed views are
// passed to the GEMM as transposes instead of being copied.
#include "core/dispatch.hpp"
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
            Tensor x2 = x.reshape({x.shape(-2), x.shape(-1)});
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

Tensor transpose(const Tensor& x, int a, int b) { return x.transpose(a, b); }

}  // namespace fluxion
