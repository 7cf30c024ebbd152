// operators_quantization.cpp — ONNX's linear quantization: QuantizeLinear and DequantizeLinear
// (per tensor, per axis and blocked), DynamicQuantizeLinear, and the integer products MatMulInteger,
// ConvInteger, QLinearMatMul and QLinearConv.
//
// Integer products run as fluxion's matmul and convolution on the widened values: in f64 where the
// device has it (exact for any sum of 8-bit products below 2^53 / 255^2 terms), else in f32, exact
// up to 258 terms and refused past them. Rounding to an integer type (half to even, then saturated) runs on the host:
// fluxion has no rounding op; those operators call values_read_on_host.
#include <cmath>

#include "core/onnx/import.hpp"
#include "fluxion/device.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using P = ::onnx::TensorProto;

struct Range {
    double low, high;
};

// The values an 8- or 16-bit integer type holds; DTypeError (from dtype_of_onnx) for the types
// fluxion has none for (int4, float8, ...), and a refusal for the others.
Range range_of(const Node& n, int type) {
    dtype_of_onnx(type, n.label() + "'s quantized output");
    switch (type) {
        case P::UINT8: return {0, 255};
        case P::INT8: return {-128, 127};
        case P::UINT16: return {0, 65535};
        case P::INT16: return {-32768, 32767};
        default: n.unsupported("a quantized output of ONNX element type " + P::DataType_Name(P::DataType(type)));
    }
}

// The quantized type of a zero point at input `i`: its declared type, else its own dtype where
// that says it (u8). int8, int16 and uint16 are all held as i32, so an undeclared i32 is refused.
int zero_point_type(const Node& n, const Tensor& zp, std::size_t i) {
    if (const int t = n.declared_type(i); t != 0) return t;
    if (zp.dtype() == DType::u8) return P::UINT8;
    n.unsupported("a zero point whose ONNX element type the graph does not declare");
}

// `s` (a quantization parameter: a scalar, one value per slice along `axis`, or one per block of
// `block` along `axis` in x's rank) spread to x's shape, so that it pairs with x element by element.
Tensor spread(const Node& n, const Tensor& s, const Shape& x, int axis, std::int64_t block) {
    if (s.numel() == 1 && s.ndim() <= 1) return s.reshape({}).expand(x);
    if (s.ndim() == 1 && block == 0) {
        if (s.shape(0) != x[std::size_t(axis)])
            n.unsupported("a per-axis parameter of " + std::to_string(s.shape(0)) + " values for an axis of size " +
                          std::to_string(x[std::size_t(axis)]));
        Shape b(x.size(), 1);
        b[std::size_t(axis)] = s.shape(0);
        return s.reshape(b).expand(x);
    }
    if (block <= 0 || s.ndim() != std::int64_t(x.size()))
        n.unsupported("a parameter of shape " + to_string(s.shape()) + " without block_size for an input of shape " +
                      to_string(x));
    Shape blocks = s.shape(), wide = s.shape();
    blocks.insert(blocks.begin() + axis + 1, block);
    wide[std::size_t(axis)] *= block;
    Tensor t = s.unsqueeze(axis + 1).expand(blocks).contiguous().reshape(wide);
    return t.slice(axis, 0, x[std::size_t(axis)]).expand(x);
}

// round(v) half to even, plus the zero point, saturated to `r`; in the dtype fluxion holds the
// type in, on `device`.
Tensor round_to(const std::vector<double>& v, const std::vector<double>& zp, const Shape& shape, Range r, int type,
                const Device& device) {
    std::vector<std::int64_t> q(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
        q[i] = std::int64_t(std::clamp(std::nearbyint(v[i]) + (zp.empty() ? 0.0 : zp[i]), r.low, r.high));
    return tensor(q, shape).to(dtype_of_onnx(type, "")).to(device);
}

// The axis of per-axis and blocked parameters (unread for a scalar scale, which has none).
int axis_attribute(const Node& n, const Tensor& x, const Tensor& scale) {
    if (scale.numel() == 1 && scale.ndim() <= 1) return 0;
    return axis_of(n.i("axis", 1), int(x.ndim()), n);
}

// y = saturate(round(x / y_scale) + y_zero_point), the division in x's precision (f32 for f16).
Ts quantize_linear(const Node& n, const Ts& in) {
    const Tensor& x = in.at(0);
    values_read_on_host(n, "its input (to round it to integers)");
    if (n.i("saturate", 1) != 1) n.unsupported("saturate=0 (it applies to float8 outputs only)");
    if (n.has("precision")) n.unsupported("the precision attribute");
    const int axis = axis_attribute(n, x, in.at(1));
    const std::int64_t block = n.i("block_size", 0);
    const bool has_zp = in.size() > 2 && in[2].defined();
    const int type = has_zp ? zero_point_type(n, in[2], 2) : int(n.i("output_dtype", P::UINT8));
    const Range r = range_of(n, type);
    const Tensor scale = spread(n, in.at(1), x.shape(), axis, block).contiguous();
    const auto xs = x.contiguous().to_vector<double>(), ss = scale.to_vector<double>();
    const bool wide = x.dtype() == DType::f64;
    std::vector<double> v(xs.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = wide ? xs[i] / ss[i] : double(float(xs[i]) / float(ss[i]));
    std::vector<double> zp;
    if (has_zp) zp = spread(n, in[2], x.shape(), axis, block).contiguous().to_vector<double>();
    return {round_to(v, zp, x.shape(), r, type, x.device())};
}

// y = (x - x_zero_point) * x_scale, in the scale's type; device ops throughout.
Ts dequantize_linear(const Node& n, const Ts& in) {
    const Tensor& x = in.at(0);
    const int axis = axis_attribute(n, x, in.at(1));
    const std::int64_t block = n.i("block_size", 0);
    if (n.has("output_dtype") && n.i("output_dtype", 0) != 0 &&
        dtype_of_onnx(int(n.i("output_dtype", 0)), n.label() + "'s output") != in.at(1).dtype())
        n.unsupported("an output_dtype other than the scale's");
    Tensor y = x.to(DType::f32);
    if (in.size() > 2 && in[2].defined()) y = y - spread(n, in[2], x.shape(), axis, block).to(DType::f32);
    y = y * spread(n, in.at(1), x.shape(), axis, block).to(DType::f32);
    return {y.to(in.at(1).dtype())};
}

// The scale and zero point that map [min(x, 0), max(x, 0)] onto uint8's [0, 255], and x quantized
// with them.
Ts dynamic_quantize_linear(const Node& n, const Ts& in) {
    const Tensor& x = in.at(0);
    values_read_on_host(n, "its input (to find its range and round it)");
    const auto xs = x.contiguous().to_vector<float>();
    float low = 0, high = 0;
    for (const float v : xs) low = std::min(low, v), high = std::max(high, v);
    const float scale = (high - low) / 255.0f;
    const double zp = scale == 0 ? 0.0 : std::clamp(std::nearbyint(double(0.0f - low / scale)), 0.0, 255.0);
    std::vector<double> v(xs.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale == 0 ? 0.0 : double(xs[i] / scale);
    const Tensor y = round_to(v, std::vector<double>(v.size(), zp), x.shape(), {0, 255}, P::UINT8, x.device());
    return {y, full({}, scale).to(x.device()), full({}, zp).to(DType::u8).to(x.device())};
}

// The type in which `terms` products of centred 8-bit operands (each at most 255 * 255) sum exactly
// on a's device with `op`: f64 where the device has it, else f32 while the sum stays below 2^24.
DType product_type(const Node& n, const Tensor& a, Op op, std::int64_t terms) {
    if (supports(a.device(), op, DType::f64)) return DType::f64;
    if (terms * 255 * 255 > (std::int64_t(1) << 24))
        n.unsupported("a sum of " + std::to_string(terms) + " integer products on " + a.device().str() +
                      ", which has no f64 and whose f32 holds such sums exactly only up to 258 of them");
    return DType::f32;
}

// An operand minus its zero point, in `dtype`. A zero point of one value per row (for the left
// operand of a product) or per output channel (for a convolution's weights, `rows_rank` dimensions
// after the first) broadcasts along that dimension.
Tensor centred(const Tensor& a, const Ts& in, std::size_t zp_at, int rows_rank, DType dtype) {
    Tensor x = a.to(dtype);
    if (in.size() <= zp_at || !in[zp_at].defined()) return x;
    Tensor zp = in[zp_at].to(dtype);
    if (zp.numel() == 1) return x - zp.reshape({});
    if (rows_rank > 0) {
        Shape s(std::size_t(rows_rank) + 1, 1);
        s[0] = zp.numel();
        zp = zp.reshape(s);
    }
    return x - zp;
}

// A scale of one value, one per row (left: rows_rank 1) or one per column (right: as given), on the
// host in its own type (the factor that scales the products is rounded there, as the spec's).
Tensor as_factor(const Tensor& s, int rows_rank) {
    Tensor f = s.to(Device{});
    if (f.numel() == 1) return f.reshape({});
    if (rows_rank > 0) {
        Shape shape(std::size_t(rows_rank) + 1, 1);
        shape[0] = f.numel();
        return f.reshape(shape);
    }
    return f;
}

// a @ b of centred operands, exact (see product_type).
Tensor integer_matmul(const Node& n, const Tensor& a, const Ts& a_args, const Tensor& b, const Ts& b_args) {
    const DType t = product_type(n, a, Op::gemm, a.ndim() == 0 ? 1 : a.shape(int(a.ndim()) - 1));
    return matmul(centred(a, a_args, 2, 1, t), centred(b, b_args, 2, 0, t));
}

// The integer convolution through the Conv operator (same attributes) on centred operands, exact
// (see product_type); the bias, where given, is in the products' units.
Tensor integer_conv(const Node& n, const Tensor& x, const Ts& x_args, const Tensor& w, const Ts& w_args,
                    const Tensor& bias) {
    const DType t = product_type(n, x, Op::conv2d, w.shape(0) == 0 ? 0 : w.numel() / w.shape(0));
    Ts args = {centred(x, x_args, 2, 0, t), centred(w, w_args, 2, int(w.ndim()) - 1, t)};
    if (bias.defined()) args.push_back(bias.to(t));
    return find_operator("Conv")(n, args).at(0);
}

// Inputs a, b, a_zero_point, b_zero_point.
Ts matmul_integer(const Node& n, const Ts& in) {
    const Tensor none;
    const Ts a_args = {in.at(0), none, in.size() > 2 ? in[2] : none},
             b_args = {in.at(1), none, in.size() > 3 ? in[3] : none};
    return {integer_matmul(n, in[0], a_args, in[1], b_args).to(DType::i32)};
}

// Inputs x, w, x_zero_point, w_zero_point.
Ts conv_integer(const Node& n, const Ts& in) {
    const Tensor none;
    const Ts x_args = {in.at(0), none, in.size() > 2 ? in[2] : none},
             w_args = {in.at(1), none, in.size() > 3 ? in[3] : none};
    return {integer_conv(n, in[0], x_args, in[1], w_args, none).to(DType::i32)};
}

// acc * scales / y_scale (input ys), plus y's zero point (input ys + 1), rounded and saturated to
// its type (without one, to input 0's type); on acc's device. acc is exact (see product_type); the
// factor is the scales' product over y_scale in their own type, as the spec's.
Tensor requantize(const Node& n, const Tensor& acc, const Tensor& scales, const Ts& in, std::size_t ys) {
    values_read_on_host(n, "its accumulated products (to round them to integers)");
    if (in.at(ys).numel() != 1) n.unsupported("a y_scale of more than one value");
    const Shape shape = acc.shape();
    const auto a = acc.contiguous().to_vector<double>();
    const auto f = (scales / in[ys].to(Device{}).reshape({})).expand(shape).contiguous().to_vector<double>();
    std::vector<double> v(a.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = a[i] * f[i];
    std::vector<double> zp;
    int type = 0;
    if (in.size() > ys + 1 && in[ys + 1].defined()) {
        type = zero_point_type(n, in[ys + 1], ys + 1);
        if (in[ys + 1].numel() != 1) n.unsupported("a y_zero_point of more than one value");
        zp.assign(v.size(), in[ys + 1].to_vector<double>().at(0));
    } else {
        type = zero_point_type(n, in[0], 0);
    }
    return round_to(v, zp, shape, range_of(n, type), type, acc.device());
}

// a: 0..2, b: 3..5, y: 6..7.
Ts qlinear_matmul(const Node& n, const Ts& in) {
    const Ts a_args = {in.at(0), in.at(1), in.at(2)}, b_args = {in.at(3), in.at(4), in.at(5)};
    const Tensor acc = integer_matmul(n, in[0], a_args, in[3], b_args);
    return {requantize(n, acc, as_factor(in[1], 1) * as_factor(in[4], 0), in, 6)};
}

// x: 0..2, w: 3..5, y: 6..7, then an int32 bias (in units of x_scale * w_scale).
Ts qlinear_conv(const Node& n, const Ts& in) {
    const Ts x_args = {in.at(0), in.at(1), in.at(2)}, w_args = {in.at(3), in.at(4), in.at(5)};
    const Tensor acc = integer_conv(n, in[0], x_args, in[3], w_args, in.size() > 8 ? in[8] : Tensor());
    Tensor factor = as_factor(in[1], 0) * as_factor(in[4], 0);
    if (factor.numel() > 1) {  // one weight scale per output channel
        Shape s(std::size_t(acc.ndim()), 1);
        s[1] = factor.numel();
        factor = factor.reshape(s);
    }
    return {requantize(n, acc, factor, in, 6)};
}

}  // namespace

void add_quantization_operators(std::map<std::string, Operator>& t) {
    t["QuantizeLinear"] = quantize_linear;
    t["DequantizeLinear"] = dequantize_linear;
    t["DynamicQuantizeLinear"] = dynamic_quantize_linear;
    t["MatMulInteger"] = matmul_integer;
    t["ConvInteger"] = conv_integer;
    t["QLinearMatMul"] = qlinear_matmul;
    t["QLinearConv"] = qlinear_conv;
}

}  // namespace fluxion::onnx::detail
