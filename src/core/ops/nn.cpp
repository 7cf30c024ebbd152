// nn.cpp — convolution, pooling and softmax on NCHW tensors through the backend's kernels.
#include "core/op_arguments.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

using detail::record;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

namespace {

std::pair<std::int64_t, std::int64_t> pair_of(const char* op, const char* what, const std::vector<std::int64_t>& v) {
    if (v.size() == 1) return {v[0], v[0]};
    if (v.size() == 2) return {v[0], v[1]};
    throw ValueError(std::string(op) + ": " + what + " needs 1 or 2 values, got " + std::to_string(v.size()));
}

void require_4d(const char* op, const Tensor& x, const char* layout) {
    if (x.ndim() != 4)
        throw ShapeError(std::string(op) + ": input has shape " + to_string(x.shape()) + "; expected 4 dimensions " +
                         layout + " (add a batch axis with x.unsqueeze(0))");
}

// The shape of a convolution of x {n,c,h,w} with w {k, c/groups, r, s}.
backend::Conv2dShape conv_shape(const char* op, const Shape& x, const Shape& w, const Conv2dOptions& o) {
    auto [sh, sw] = pair_of(op, "stride", o.stride);
    auto [ph, pw] = pair_of(op, "padding", o.padding);
    auto [dh, dw] = pair_of(op, "dilation", o.dilation);
    backend::Conv2dShape s{};
    s.n = x[0], s.c = x[1], s.h = x[2], s.w = x[3];
    s.k = w[0], s.r = w[2], s.s = w[3];
    s.stride_h = sh, s.stride_w = sw, s.pad_h = ph, s.pad_w = pw, s.dil_h = dh, s.dil_w = dw, s.groups = o.groups;
    if (sh < 1 || sw < 1 || dh < 1 || dw < 1 || ph < 0 || pw < 0 || o.groups < 1)
        throw ValueError(std::string(op) + ": stride and dilation must be >= 1, padding >= 0 and groups >= 1");
    if (s.c % s.groups || s.k % s.groups || w[1] * s.groups != s.c)
        throw ShapeError(std::string(op) + ": input has " + std::to_string(s.c) + " channels but the weight " +
                         to_string(w) + " with groups = " + std::to_string(s.groups) + " expects " +
                         std::to_string(w[1] * s.groups) + " (and output channels divisible by groups)");
    s.oh = (s.h + 2 * ph - dh * (s.r - 1) - 1) / sh + 1;
    s.ow = (s.w + 2 * pw - dw * (s.s - 1) - 1) / sw + 1;
    if (s.oh < 1 || s.ow < 1 || s.h + 2 * ph < dh * (s.r - 1) + 1 || s.w + 2 * pw < dw * (s.s - 1) + 1)
        throw ShapeError(std::string(op) + ": the kernel " + std::to_string(s.r) + "×" + std::to_string(s.s) +
                         " (dilated) is larger than the padded input " + std::to_string(s.h + 2 * ph) + "×" +
                         std::to_string(s.w + 2 * pw));
    return s;
}

Tensor conv_forward(const backend::Conv2dShape& s, const Tensor& x, const Tensor& w) {
    Tensor y = detail::make_tensor({s.n, s.k, s.oh, s.ow}, x.dtype(), x.device());
    Tensor xc = detail::dense(x), wc = detail::dense(w);
    if (y.numel() > 0) detail::backend_of(x).conv2d(x.device().index, x.dtype(), &s, xc.data_ptr(), wc.data_ptr(), y.data_ptr());
    return y;
}

Tensor conv_input_grad(const backend::Conv2dShape& s, const Tensor& gy, const Tensor& w) {
    Tensor gx = detail::make_tensor({s.n, s.c, s.h, s.w}, gy.dtype(), gy.device());
    Tensor gc = detail::dense(gy), wc = detail::dense(w);
    if (gx.numel() > 0)
        detail::backend_of(gy).conv2d_backward_input(gy.device().index, gy.dtype(), &s, gc.data_ptr(), wc.data_ptr(), gx.data_ptr());
    return gx;
}

Tensor conv_weight_grad(const backend::Conv2dShape& s, const Tensor& x, const Tensor& gy) {
    Tensor gw = detail::make_tensor({s.k, s.c / s.groups, s.r, s.s}, x.dtype(), x.device());
    Tensor xc = detail::dense(x), gc = detail::dense(gy);
    if (gw.numel() > 0)
        detail::backend_of(x).conv2d_backward_weight(x.device().index, x.dtype(), &s, xc.data_ptr(), gc.data_ptr(), gw.data_ptr());
    return gw;
}

void check_conv_args(const char* op, const Tensor& x, const Tensor& w) {
    detail::common_device(op, {x, w});
    require_4d(op, x, "{N, C, H, W}");
    if (w.ndim() != 4) throw ShapeError(std::string(op) + ": weight has shape " + to_string(w.shape()) + "; expected 4 dimensions");
    detail::require_floating(op, x);
    if (x.dtype() != w.dtype())
        throw DTypeError(std::string(op) + ": input is " + name(x.dtype()) + " but weight is " + name(w.dtype()));
}

Tensor pool(const char* op, backend::Pool kind, const Tensor& x, const Pool2dOptions& o) {
    detail::require_defined(op, x);
    require_4d(op, x, "{N, C, H, W}");
    detail::require_floating(op, x);
    if (o.window.empty()) throw ValueError(std::string(op) + ": the window size is missing");
    auto [kh, kw] = pair_of(op, "window", o.window);
    auto [sh, sw] = o.stride.empty() ? std::pair{kh, kw} : pair_of(op, "stride", o.stride);
    auto [ph, pw] = pair_of(op, "padding", o.padding);
    backend::Pool2dShape s{x.shape(0), x.shape(1), x.shape(2), x.shape(3), 0, 0, kh, kw, sh, sw, ph, pw};
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || ph < 0 || pw < 0)
        throw ValueError(std::string(op) + ": window and stride must be >= 1 and padding >= 0");
    // As PyTorch: more padding would let a window lie wholly in the padding (max of nothing: -inf).
    if (ph > kh / 2 || pw > kw / 2)
        throw ValueError(std::string(op) + ": padding {" + std::to_string(ph) + ", " + std::to_string(pw) +
                         "} must be at most half the window {" + std::to_string(kh) + ", " + std::to_string(kw) +
                         "}; use a larger window or pad the input with zeros first");
    s.oh = (s.h + 2 * ph - kh) / sh + 1;
    s.ow = (s.w + 2 * pw - kw) / sw + 1;
    if (s.h + 2 * ph < kh || s.w + 2 * pw < kw)
        throw ShapeError(std::string(op) + ": window " + std::to_string(kh) + "×" + std::to_string(kw) +
                         " is larger than the padded input " + std::to_string(s.h + 2 * ph) + "×" + std::to_string(s.w + 2 * pw));
    Tensor xc = detail::dense(x);
    Tensor y = detail::make_tensor({s.n, s.c, s.oh, s.ow}, x.dtype(), x.device());
    if (y.numel() > 0) detail::backend_of(x).pool2d(x.device().index, kind, x.dtype(), &s, xc.data_ptr(), y.data_ptr());
    if (!detail::any_tracked({x})) return y;
    return record(op, {x}, y, [kind, s, xc, y](const Tensor& g, const Needs&) {
        Tensor gc = detail::dense(g), gx = detail::make_tensor(xc.shape(), xc.dtype(), xc.device());
        if (gx.numel() > 0)
            detail::backend_of(xc).pool2d_backward(xc.device().index, kind, xc.dtype(), &s, xc.data_ptr(), y.data_ptr(),
                                                   gc.data_ptr(), gx.data_ptr());
        return Grads{gx};
    });
}

Tensor softmax_op(const char* op, bool log, const Tensor& x, int axis) {
    detail::require_defined(op, x);
    detail::require_floating(op, x);
    int a = detail::normalize_scalar_axis(op, axis, x.ndim());
    std::int64_t outer = 1, n = x.ndim() ? x.shape()[a] : 1, inner = 1;
    for (int i = 0; i < a; ++i) outer *= x.shape()[i];
    for (int i = a + 1; i < x.ndim(); ++i) inner *= x.shape()[i];
    Tensor xc = detail::dense(x);
    Tensor y = detail::make_tensor(x.shape(), x.dtype(), x.device());
    if (y.numel() > 0) detail::backend_of(x).softmax(x.device().index, log, x.dtype(), outer, n, inner, xc.data_ptr(), y.data_ptr());
    if (!detail::any_tracked({x})) return y;
    return record(op, {x}, y, [log, outer, n, inner, y](const Tensor& g, const Needs&) {
        Tensor gc = detail::dense(g), gx = detail::make_tensor(y.shape(), y.dtype(), y.device());
        if (gx.numel() > 0)
            detail::backend_of(y).softmax_backward(y.device().index, log, y.dtype(), outer, n, inner, y.data_ptr(),
                                                   gc.data_ptr(), gx.data_ptr());
        return Grads{gx};
    });
}

// x with `extra` zeros appended along `axis`.
Tensor append_zeros(const Tensor& x, int axis, std::int64_t extra) {
    if (extra <= 0) return x;
    Shape sh = x.shape();
    sh[axis] = extra;
    return concat({x, zeros(sh, {.dtype = x.dtype(), .device = x.device()})}, axis);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Conv2dOptions& options) {
    check_conv_args("conv2d", x, w);
    auto s = conv_shape("conv2d", x.shape(), w.shape(), options);
    Tensor y = conv_forward(s, x, w);
    if (!detail::any_tracked({x, w})) return y;
    return record("conv2d", {x, w}, y, [s, x, w](const Tensor& g, const Needs& n) {
        return Grads{n[0] ? conv_input_grad(s, g, w) : Tensor(), n[1] ? conv_weight_grad(s, x, g) : Tensor()};
    });
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Conv2dOptions& o, std::vector<std::int64_t> output_padding) {
    check_conv_args("conv_transpose2d", x, w);
    auto [sh, sw] = pair_of("conv_transpose2d", "stride", o.stride);
    auto [ph, pw] = pair_of("conv_transpose2d", "padding", o.padding);
    auto [dh, dw] = pair_of("conv_transpose2d", "dilation", o.dilation);
    auto [oph, opw] = pair_of("conv_transpose2d", "output_padding", output_padding);
    if (x.shape(1) != w.shape(0))
        throw ShapeError("conv_transpose2d: input has " + std::to_string(x.shape(1)) + " channels but the weight " +
                         to_string(w.shape()) + " expects " + std::to_string(w.shape(0)));
    if (oph < 0 || opw < 0 || oph >= std::max(sh, dh) || opw >= std::max(sw, dw))
        throw ValueError("conv_transpose2d: output_padding {" + std::to_string(oph) + ", " + std::to_string(opw) +
                         "} must be >= 0 and smaller than the stride or the dilation (stride {" + std::to_string(sh) +
                         ", " + std::to_string(sw) + "}, dilation {" + std::to_string(dh) + ", " + std::to_string(dw) +
                         "})");
    std::int64_t oh = (x.shape(2) - 1) * sh - 2 * ph + dh * (w.shape(2) - 1) + oph + 1;
    std::int64_t ow = (x.shape(3) - 1) * sw - 2 * pw + dw * (w.shape(3) - 1) + opw + 1;
    if (oh < 1 || ow < 1) throw ShapeError("conv_transpose2d: the output would be empty for input " + to_string(x.shape()));
    if (oph >= sh || opw >= sw) {
        // Output padding at or beyond the stride (allowed below the dilation) makes an output that no
        // convolution maps back onto x's shape. Compute the full, unpadded result instead, then keep
        // rows [padding, padding + oh) of it: the far ones beyond it are zeros.
        Tensor full = conv_transpose2d(x, w, {.stride = o.stride, .dilation = o.dilation, .groups = o.groups}, {0, 0});
        full = append_zeros(append_zeros(full, 2, ph + oh - full.shape(2)), 3, pw + ow - full.shape(3));
        return full.slice(2, ph, ph + oh).slice(3, pw, pw + ow);
    }
    // The transpose of the convolution taking y {n, out, oh, ow} to x {n, in, h, w} with weight w.
    Shape y_shape{x.shape(0), w.shape(1) * o.groups, oh, ow};
    auto s = conv_shape("conv_transpose2d", y_shape, w.shape(), o);
    Tensor y = conv_input_grad(s, x, w);
    if (!detail::any_tracked({x, w})) return y;
    return record("conv_transpose2d", {x, w}, y, [s, x, w](const Tensor& g, const Needs& n) {
        return Grads{n[0] ? conv_forward(s, g, w) : Tensor(), n[1] ? conv_weight_grad(s, g, x) : Tensor()};
    });
}

Tensor maxpool2d(const Tensor& x, const Pool2dOptions& options) { return pool("maxpool2d", backend::Pool::max, x, options); }
Tensor meanpool2d(const Tensor& x, const Pool2dOptions& options) { return pool("meanpool2d", backend::Pool::mean, x, options); }
Tensor softmax(const Tensor& x, int axis) { return softmax_op("softmax", false, x, axis); }
Tensor logsoftmax(const Tensor& x, int axis) { return softmax_op("logsoftmax", true, x, axis); }

}  // namespace fluxion
