// fluxion/ops.hpp — differentiable operations on tensors. Every op runs on the device of its
// arguments (all must share one), records itself for autodiff when a gradient is being taken, and
// throws a fluxion::Error naming the op, the shapes or devices, and the fix when the input is bad.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "fluxion/tensor.hpp"

namespace fluxion {

// ---- elementwise arithmetic, NumPy broadcasting ----
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
// Equal arguments share the gradient half and half, and where either is NaN both get all of it,
// as in PyTorch.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor sign(const Tensor& x);  // gradient zero
Tensor clamp(const Tensor& x, double low, double high);

// ---- activations: functions, and values usable where an activation is expected (Dense(.., σ)) ----
Tensor relu(const Tensor& x);
Tensor leakyrelu(const Tensor& x, double slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor gelu(const Tensor& x);      // tanh approximation, as Flux's gelu and F.gelu(x, approximate='tanh')
Tensor gelu_erf(const Tensor& x);  // exact x Φ(x), as Flux's gelu_erf and PyTorch's default F.gelu(x)
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor softplus(const Tensor& x);
Tensor swish(const Tensor& x);
Tensor hardswish(const Tensor& x);  // x relu6(x + 3) / 6, as Flux's hardswish and F.hardswish
Tensor relu6(const Tensor& x);      // min(max(x, 0), 6)
// clamp(x, low, high) with PyTorch's gradient, zero at the bounds (clamp's passes there).
Tensor hardtanh(const Tensor& x, double low = -1, double high = 1);
// (x + 3) / 6 clamped to [0, 1], PyTorch's F.hardsigmoid; NNlib's hardσ is the same function (its
// older versions had Keras's slope, 0.2 x + 0.5).
Tensor hardsigmoid(const Tensor& x);
Tensor selu(const Tensor& x);                      // scale (x > 0 ? x : alpha (e^x - 1)), the SNN constants
Tensor celu(const Tensor& x, double alpha = 1.0);  // x > 0 ? x : alpha (e^(x / alpha) - 1); alpha != 0
Tensor softsign(const Tensor& x);                  // x / (1 + |x|)
Tensor logsigmoid(const Tensor& x);                // log σ(x) = -softplus(-x), exact for large |x|
Tensor mish(const Tensor& x);                      // x tanh(softplus(x))
Tensor tanhshrink(const Tensor& x);                // x - tanh(x)
// x - lambda above lambda, x + lambda below -lambda, else 0; lambda >= 0. NaN stays NaN (PyTorch
// 1.13's F.softshrink gives 0).
Tensor softshrink(const Tensor& x, double lambda = 0.5);
// x where x > threshold, else `value`: Flux's trelu (value 0) and PyTorch's F.threshold.
Tensor trelu(const Tensor& x, double threshold = 1, double value = 0);
Tensor gelu_sigmoid(const Tensor& x);  // NNlib's: gelu's tanh approximation written x σ(2k (x + c x^3))
Tensor quick_gelu(const Tensor& x);    // x σ(1.702 x), the sigmoid approximation of gelu (CLIP's QuickGELU)
Tensor logcosh(const Tensor& x);       // log(cosh(x)), exact for large |x|
Tensor lisht(const Tensor& x);         // x tanh(x)
// Randomised leaky relu: while training (as Dropout's automatic mode: while a gradient is being
// taken), each negative element gets its own slope drawn uniformly from [lo, hi] (fx::rand, so
// fx::seed repeats it); otherwise the mean slope (lo + hi) / 2, as PyTorch's F.rrelu. The layer
// RReLU (layers/rrelu.hpp) follows trainmode / testmode.
Tensor rrelu(const Tensor& x, double lo = 1.0 / 8, double hi = 1.0 / 3);
Tensor identity(const Tensor& x);
inline Tensor (*const σ)(const Tensor&) = sigmoid;  // Flux's spellings
inline Tensor (*const hardσ)(const Tensor&) = hardsigmoid;
inline Tensor (*const logσ)(const Tensor&) = logsigmoid;

// ---- comparisons (bool result, no gradient) and selection ----
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);  // differentiable in a and b

// ---- reductions: over everything, or along one axis ----
// As in PyTorch: axis 0 or -1 of a 0-d tensor is its one element; along an axis, the gradient of
// max / min goes to the one index argmax / argmin returns (the first of tied values), while over
// everything tied values share it equally (the NaN elements, when the result is NaN).
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, int axis, bool keepdims = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int axis, bool keepdims = false);
Tensor max(const Tensor& x);
Tensor max(const Tensor& x, int axis, bool keepdims = false);
Tensor min(const Tensor& x);
Tensor min(const Tensor& x, int axis, bool keepdims = false);
Tensor argmax(const Tensor& x);                                   // i64 index into the flattened tensor
Tensor argmax(const Tensor& x, int axis, bool keepdims = false);  // i64
Tensor argmin(const Tensor& x, int axis, bool keepdims = false);
// Reduces `x` by summation to `shape` (the reverse of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- linear algebra ----
// {m,k}x{k,n}, {m,k}x{k}, {k}x{k,n}, {k}x{k}, and batched {...,m,k}x{...,k,n} with broadcast batches.
Tensor matmul(const Tensor& a, const Tensor& b);
// x {..., in} times weight {out, in} transposed, plus bias {out} (PyTorch's F.linear; Dense's
// forward pass). Without a bias it is matmul(x, weight.transpose()).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
Tensor transpose(const Tensor& x, int a = -2, int b = -1);

// ---- neural-network ops (NCHW, weights {out, in/groups, kh, kw}) ----
struct Conv2dOptions {
    std::vector<std::int64_t> stride = {1, 1};
    std::vector<std::int64_t> padding = {0, 0};
    std::vector<std::int64_t> dilation = {1, 1};
    std::int64_t groups = 1;
};
// Unlike PyTorch's F.conv2d these take no bias: add it as y + bias.reshape({1, C, 1, 1}), as Conv does.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Conv2dOptions& options = {});
// The transpose of conv2d: weight {in, out/groups, kh, kw}; output_padding adds to the far side and
// must be smaller than the stride or the dilation (PyTorch's rule).
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Conv2dOptions& options = {},
                        std::vector<std::int64_t> output_padding = {0, 0});
struct Pool2dOptions {
    std::vector<std::int64_t> window;
    std::vector<std::int64_t> stride = {};  // defaults to the window
    std::vector<std::int64_t> padding = {0, 0};  // at most half the window on each axis, as in PyTorch
};
// Output sizes round down (PyTorch's ceil_mode=False; there is no ceil_mode). Mean pooling counts
// padded cells as zeros (count_include_pad=True).
Tensor maxpool2d(const Tensor& x, const Pool2dOptions& options);
Tensor meanpool2d(const Tensor& x, const Pool2dOptions& options);
Tensor softmax(const Tensor& x, int axis = -1);
Tensor logsoftmax(const Tensor& x, int axis = -1);
Tensor logsumexp(const Tensor& x, int axis, bool keepdims = false);
struct AttentionOptions {
    Tensor mask = {};         // bool, broadcastable to {..., L, S}: true where a query may not attend to a key
    double scale = 0;         // of the scores; 0 means 1 / √d
    std::int64_t block = 0;   // queries per block; 0 chooses blocks of about 8 MiB of scores
};
// softmax(q kᵀ · scale, masked scores → −∞) v for q {..., L, d}, k {..., S, d}, v {..., S, dv} with the
// same leading dimensions (PyTorch's F.scaled_dot_product_attention). Memory-efficient: queries are taken a block
// at a time; the backward pass reuses the weights of one block holding every query, else recomputes a block's, so
// no {..., L, S} matrix beyond a block's is kept. A query whose every key is masked gets NaN, as in PyTorch.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

// ---- joining, indexing, conversion ----
Tensor concat(const std::vector<Tensor>& xs, int axis = 0);
Tensor stack(const std::vector<Tensor>& xs, int axis = 0);
Tensor index_select(const Tensor& x, int axis, const Tensor& index);  // index: integer tensor, any shape
Tensor gather(const Tensor& x, const Tensor& index);                  // rows of x: index_select(x, 0, index)
Tensor onehot(const Tensor& labels, std::int64_t classes, DType dtype = DType::f32);  // {...} -> {..., classes}
Tensor onecold(const Tensor& scores);  // {..., classes} -> {...} i64: each largest score's class (Flux's onecold)
Tensor cast(const Tensor& x, DType dtype);  // differentiable between floating types
Tensor contiguous(const Tensor& x);

}  // namespace fluxion
