// operators_signal.cpp — ONNX's DFT and STFT, and the Hann, Hamming and Blackman windows. A DFT is
// a matrix product with the cosines and sines of its angles (computed once per call on the host),
// so that it runs on every device and differentiates; signals are short in the models that use
// these (an audio front end's frames), where the product's O(n²) costs little.
#include <cmath>
#include <numbers>

#include "core/onnx/import.hpp"
#include "fluxion/device.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;
using I = std::int64_t;

// cos and sin of 2π·k·j/n for j < rows, k < cols, as {rows, cols} tensors like `like`.
std::pair<Tensor, Tensor> twiddles(I rows, I cols, I n, const Tensor& like) {
    std::vector<double> c(std::size_t(rows * cols)), s(c.size());
    for (I j = 0; j < rows; ++j)
        for (I k = 0; k < cols; ++k) {
            const double angle = 2 * std::numbers::pi * double((j * k) % n) / double(n);  // reduced: exact for long signals
            c[std::size_t(j * cols + k)] = std::cos(angle), s[std::size_t(j * cols + k)] = std::sin(angle);
        }
    auto make = [&](const std::vector<double>& v) { return tensor(v, {rows, cols}).to(like.dtype()).to(like.device()); };
    return {make(c), make(s)};
}

// x {M, L} cut or padded with zeros to {M, n}.
Tensor to_length(const Tensor& x, I n) {
    if (x.shape(1) == n) return x;
    if (x.shape(1) > n) return x.slice(1, 0, n);
    return pad_axis(x, 1, 0, n - x.shape(1), 0.0);
}

// The transform of {M, L, 1 or 2} (real, or real and imaginary parts) along L: {M, K, 2}, or {M, n, 1}
// for the inverse of a one-sided spectrum.
Tensor transform(const Tensor& x, I n, bool inverse, bool onesided) {
    const bool complex = x.shape(2) == 2;
    const I m = x.shape(0);
    if (!inverse) {
        const I bins = onesided ? n / 2 + 1 : n;
        const auto [c, s] = twiddles(n, bins, n, x);
        const Tensor re = to_length(x.select(2, 0), n);
        Tensor yr = matmul(re, c), yi = -matmul(re, s);
        if (complex) {
            const Tensor im = to_length(x.select(2, 1), n);
            yr = yr + matmul(im, s), yi = yi + matmul(im, c);
        }
        return stack({yr, yi}, 2);
    }
    if (!onesided) {  // x_j = (1/n) Σ_k X_k e^{+2πi jk/n}
        const auto [c, s] = twiddles(n, n, n, x);
        const Tensor re = to_length(x.select(2, 0), n);
        Tensor yr = matmul(re, c), yi = matmul(re, s);
        if (complex) {
            const Tensor im = to_length(x.select(2, 1), n);
            yr = yr - matmul(im, s), yi = yi + matmul(im, c);
        }
        return stack({yr, yi}, 2) / double(n);
    }
    // The inverse of a one-sided spectrum X_0 .. X_{n/2}: the missing half is its conjugate mirror, so
    // each bin but the first (and the middle one of an even n) counts twice; imaginary parts of those
    // two cancel (numpy's irfft).
    const I bins = n / 2 + 1;
    auto [c, s] = twiddles(bins, n, n, x);
    std::vector<double> twice(static_cast<std::size_t>(bins), 2.0);
    twice[0] = 1.0;
    if (n % 2 == 0) twice[std::size_t(bins - 1)] = 1.0;
    const Tensor counts = tensor(twice, {bins, 1}).to(x.dtype()).to(x.device());
    c = c * counts, s = s * counts;
    Tensor y = matmul(to_length(x.select(2, 0), bins), c);
    if (complex) y = y - matmul(to_length(x.select(2, 1), bins), s);
    return (y / double(n)).reshape({m, n, 1});
}

// transform() in f64 where the device multiplies f64 matrices, rounded once to x's type: sums of
// many terms that cancel (an inverse transform's zeros) keep ONNX's 1e-7 absolute tolerance.
Tensor transform_in_f64(const Tensor& x, I n, bool inverse, bool onesided) {
    if (x.dtype() == DType::f64 || !supports(x.device(), Op::gemm, DType::f64)) return transform(x, n, inverse, onesided);
    return cast(transform(cast(x, DType::f64), n, inverse, onesided), x.dtype());
}

I scalar(const Tensor& t, const Node& n, const char* what) {
    const auto v = host_ints(t);
    if (v.size() != 1) n.unsupported(std::string(what) + " of " + std::to_string(v.size()) + " values (one expected)");
    return v[0];
}

Ts dft(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    const int rank = x.ndim();
    if (rank < 2 || (x.shape(-1) != 1 && x.shape(-1) != 2))
        throw ShapeError("fx::onnx: " + n.label() + ": the input's last axis holds a real part, or a real and an "
                         "imaginary part; got " + to_string(x.shape()));
    I axis = n.opset() < 20 ? n.i("axis", 1) : (in.size() > 2 && in[2].defined() ? scalar(in[2], n, "axis") : -2);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank - 1) n.unsupported("axis " + std::to_string(axis) + " (the last axis holds the parts)");
    const bool inverse = n.i("inverse", 0) != 0, onesided = n.i("onesided", 0) != 0;
    if (onesided && !inverse && x.shape(-1) == 2) n.unsupported("onesided=1 on a complex input");
    const I length = x.shape(int(axis));
    const I size = in.size() > 1 && in[1].defined() ? scalar(in[1], n, "dft_length")
                   : inverse && onesided             ? 2 * (length - 1)
                                                     : length;
    if (size < 1) throw ValueError("fx::onnx: " + n.label() + ": dft_length " + std::to_string(size) + " (1 or more)");
    // The transformed axis next to the parts' axis, the others folded into one.
    std::vector<int> order;
    for (int a = 0; a < rank - 1; ++a)
        if (a != axis) order.push_back(a);
    order.push_back(int(axis));
    order.push_back(rank - 1);
    Shape kept;
    for (int a = 0; a + 2 < rank; ++a) kept.push_back(x.shape(order[std::size_t(a)]));
    const Tensor y = transform_in_f64(x.permute(order).reshape({numel(kept), length, x.shape(-1)}), size, inverse, onesided);
    Shape shape = kept;
    shape.push_back(y.shape(1));
    shape.push_back(y.shape(2));
    std::vector<int> back(static_cast<std::size_t>(rank));
    for (int a = 0; a < rank; ++a) back[std::size_t(order[std::size_t(a)])] = a;
    return {y.reshape(shape).permute(back)};
}

// Frames of `frame_length` every `frame_step` samples of {B, L, 1 or 2}, each times the window, each
// transformed: {B, frames, bins, 2}.
Ts stft(const Node& n, const Ts& in) {
    const Tensor& x = in[0];
    if (x.ndim() != 3 || (x.shape(2) != 1 && x.shape(2) != 2))
        throw ShapeError("fx::onnx: " + n.label() + ": the signal is {batch, length, 1 or 2}; got " + to_string(x.shape()));
    const I step = scalar(in[1], n, "frame_step");
    const Tensor window = in.size() > 2 ? in[2] : Tensor();
    I length = in.size() > 3 && in[3].defined() ? scalar(in[3], n, "frame_length")
               : window.defined()                ? window.shape(0)
                                                 : x.shape(1);
    if (window.defined() && (window.ndim() != 1 || window.shape(0) != length))
        throw ShapeError("fx::onnx: " + n.label() + ": a window of shape " + to_string(window.shape()) +
                         " for frames of " + std::to_string(length));
    if (step < 1 || length < 1 || length > x.shape(1))
        throw ValueError("fx::onnx: " + n.label() + ": frames of " + std::to_string(length) + " every " +
                         std::to_string(step) + " samples of a signal of " + std::to_string(x.shape(1)));
    const bool onesided = n.i("onesided", 1) != 0;
    if (onesided && x.shape(2) == 2) n.unsupported("onesided=1 on a complex signal");
    const I frames = (x.shape(1) - length) / step + 1, batch = x.shape(0);
    std::vector<std::int64_t> index;
    for (I f = 0; f < frames; ++f)
        for (I j = 0; j < length; ++j) index.push_back(f * step + j);
    Tensor framed = index_select(x, 1, tensor(index, {frames * length}).to(x.device()))
                        .reshape({batch * frames, length, x.shape(2)});
    if (window.defined()) framed = framed * cast(window, x.dtype()).to(x.device()).reshape({1, length, 1});
    const Tensor y = transform_in_f64(framed, length, false, onesided);
    return {y.reshape({batch, frames, y.shape(1), 2})};
}

// A window of `size` points: w(2π·j / N) with N = size (periodic) or size - 1 (symmetric).
template <double (*F)(double)> Ts window(const Node& n, const Ts& in) {
    const I size = scalar(in[0], n, "size");
    if (size < 0) throw ValueError("fx::onnx: " + n.label() + ": a window of " + std::to_string(size) + " points");
    using P = ::onnx::TensorProto;
    DType to = DType::f32;
    switch (n.i("output_datatype", P::FLOAT)) {
        case P::FLOAT: break;
        case P::DOUBLE: to = DType::f64; break;
        case P::FLOAT16: to = DType::f16; break;
        case P::BFLOAT16: to = DType::bf16; break;
        default: n.unsupported("output_datatype " + std::to_string(n.i("output_datatype", 0)));
    }
    const double period = double(n.i("periodic", 1) != 0 ? size : size - 1);
    std::vector<double> w(static_cast<std::size_t>(size));
    for (I j = 0; j < size; ++j) w[std::size_t(j)] = F(2 * std::numbers::pi * double(j) / period);
    return {tensor(w, {size}).to(to)};
}
double hann(double a) { return 0.5 - 0.5 * std::cos(a); }  // sin²(a / 2)
double hamming(double a) { return 25.0 / 46.0 - 21.0 / 46.0 * std::cos(a); }
double blackman(double a) { return 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a); }

}  // namespace

void add_signal_operators(std::map<std::string, Operator>& t) {
    t["DFT"] = dft;
    t["STFT"] = stft;
    t["HannWindow"] = window<hann>;
    t["HammingWindow"] = window<hamming>;
    t["BlackmanWindow"] = window<blackman>;
}

}  // namespace fluxion::onnx::detail
