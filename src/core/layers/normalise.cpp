// normalise.cpp — BatchNorm, LayerNorm, GroupNorm and InstanceNorm written with differentiable ops;
// the normalisation by batch or by row statistics is one recorded op each, with a closed-form
// backward pass (one kernel call each way, BatchNorm's, where the device's table has those kernels);
// running statistics are updated in place outside the tape.
#include "fluxion/layers/normalise.hpp"

#include <sstream>

#include "core/op_arguments.hpp"
#include "core/layers/context.hpp"
#include "core/registry.hpp"
#include "core/tensor_impl.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

// Mean of x over every axis in `axes` (ascending), keeping them.
Tensor mean_over(Tensor x, const std::vector<int>& axes) {
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) x = mean(x, *it, true);
    return x;
}

// The normalisation by statistics over x viewed as {outer, c, inner}, per index of the middle axis
// over its outer·inner values, in one kernel call each way where the device's table has BatchNorm's
// kernels (core/backend.hpp) and x is f32 or f64: BatchNorm's training pass (the statistics per
// channel), and LayerNorm's, GroupNorm's and InstanceNorm's (outer 1: per row of `inner` values).
// Then the affine step with weight and bias {c} (or neither) and, with `relu`, the relu after it.
// Returns an undefined tensor, having done nothing, where the kernels cannot take the call; then
// the caller composes it. Sets `mu` and `var` {c} (untracked): the running statistics' inputs.
Tensor fused_batch_norm(const char* op, const Tensor& x, std::int64_t outer, std::int64_t c, std::int64_t inner,
                        const Tensor& weight, const Tensor& bias, double epsilon, bool relu, Tensor& mu, Tensor& var) {
    const DType t = x.dtype();
    const Device dev = x.device();
    if (t != DType::f32 && t != DType::f64) return {};
    if (weight.defined() &&
        (weight.dtype() != t || bias.dtype() != t || weight.device() != dev || bias.device() != dev))
        return {};
    const backend::Backend& table = detail::backend_for(dev);
    if (!table.batch_norm || !table.batch_norm_backward) return {};
    const bool affine = weight.defined();
    const std::vector<Tensor> inputs = affine ? std::vector<Tensor>{x, weight, bias} : std::vector<Tensor>{x};
    Tensor xc, w, b, y, rstd;
    {
        NoGrad no_grad;
        xc = x.contiguous();
        if (affine) w = weight.contiguous(), b = bias.contiguous();
        y = detail::make_tensor(x.shape(), t, dev);
        mu = detail::make_tensor({c}, t, dev), var = detail::make_tensor({c}, t, dev);
        rstd = detail::make_tensor({c}, t, dev);
        table.batch_norm(dev.index, t, outer, c, inner, xc.data_ptr(), affine ? w.data_ptr() : nullptr,
                         affine ? b.data_ptr() : nullptr, epsilon, relu, y.data_ptr(), mu.data_ptr(), var.data_ptr(),
                         rstd.data_ptr());
    }
    if (!detail::any_tracked(inputs)) return y;
    return detail::record(
        op, inputs, y,
        [xc, w, y = relu ? y : Tensor(), mean = mu, rstd, relu, outer, c, inner](const Tensor& g,
                                                                                const std::vector<bool>& needs) {
            const DType t = xc.dtype();
            const Device dev = xc.device();
            const Tensor gc = g.contiguous();
            std::vector<Tensor> grads(needs.size());
            if (needs[0]) grads[0] = detail::make_tensor(xc.shape(), t, dev);
            if (needs.size() == 3) {  // both or neither: one kernel pass gives both sums
                grads[1] = detail::make_tensor({c}, t, dev);
                grads[2] = detail::make_tensor({c}, t, dev);
            }
            auto ptr = [](const Tensor& v) { return v.defined() ? v.data_ptr() : nullptr; };
            detail::backend_for(dev).batch_norm_backward(
                dev.index, t, outer, c, inner, xc.data_ptr(), relu ? y.data_ptr() : nullptr, gc.data_ptr(),
                mean.data_ptr(), rstd.data_ptr(), ptr(w), ptr(grads[0]),
                needs.size() == 3 ? grads[1].data_ptr() : nullptr, needs.size() == 3 ? grads[2].data_ptr() : nullptr);
            return grads;
        });
}

// (x - mean) / sqrt(var + epsilon) over each run of `features` trailing elements of x, as one
// recorded op whose backward pass is the closed form
//   gx = (g - mean(g) - x̂ mean(g x̂)) / sqrt(var + epsilon)
// with the means over each run: BatchNorm's kernels where the device has them (each run a channel of
// one row), else 7 passes over x where the autodiff of the forward composition takes about 12, and
// none of them on a broadcast of a {..., 1} statistic back to x's shape.
Tensor normalised(const Tensor& x, std::int64_t features, double epsilon) {
    const Shape shape = x.shape();
    Tensor xhat, rstd, mu, var;
    if (x.numel() == 0) return x * 1.0;  // no rows, or rows of no values (an image of height 0)
    xhat = fused_batch_norm("layer_norm", x, 1, x.numel() / features, features, Tensor(), Tensor(), epsilon, false, mu,
                            var);
    if (xhat.defined()) return xhat;
    {
        NoGrad no_grad;
        const Tensor rows = x.reshape({-1, features});
        const Tensor centred = rows - mean(rows, 1, true);
        rstd = pow(mean(square(centred), 1, true) + epsilon, -0.5);
        xhat = centred * rstd;
    }
    if (!detail::any_tracked({x})) return xhat.reshape(shape);
    return detail::record("layer_norm", {x}, xhat.reshape(shape),
                          [xhat, rstd, shape, features](const Tensor& g, const std::vector<bool>&) {
                              const Tensor rows = g.reshape({-1, features});
                              const Tensor gx = (rows - mean(rows, 1, true) - xhat * mean(rows * xhat, 1, true)) * rstd;
                              return std::vector<Tensor>{gx.reshape(shape)};
                          });
}

// Sum of x over every axis in `axes` (ascending), keeping them.
Tensor sum_over(Tensor x, const std::vector<int>& axes) {
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) x = sum(x, *it, true);
    return x;
}

// BatchNorm's training pass, x̂ · weight + bias with x̂ = (x - mean) / sqrt(var + epsilon) and the
// statistics over `axes` (every axis but the channel axis), as one recorded op whose backward pass
// is the closed form, with sums and means per channel over `count` values:
//   gx = weight / sqrt(var + epsilon) · (g - mean(g) - x̂ mean(g x̂)),  gweight = Σ g x̂,  gbias = Σ g
// About 6 passes over x forward and 8 backward, where the autodiff of the composition took 7 and
// about 15, three of them divisions (PyTorch's kernels also multiply by 1 / sqrt(var + epsilon)).
// `weight` and `bias` are broadcast to x's rank, or both undefined. Sets `mu` and `var` (untracked)
// for the running statistics.
Tensor batch_normalised(const Tensor& x, const std::vector<int>& axes, const Tensor& weight, const Tensor& bias,
                        double epsilon, Tensor& mu, Tensor& var) {
    const bool affine = weight.defined();
    const std::vector<Tensor> inputs = affine ? std::vector<Tensor>{x, weight, bias} : std::vector<Tensor>{x};
    const bool tracked = detail::any_tracked(inputs);
    Tensor xhat, rstd, y;
    {
        NoGrad no_grad;
        mu = mean_over(x, axes);
        const Tensor centred = x - mu;
        var = mean_over(square(centred), axes);
        rstd = pow(var + epsilon, -0.5);
        if (tracked) {  // the backward pass reads x̂
            xhat = centred * rstd;
            y = affine ? xhat * weight + bias : xhat;
        } else {
            y = affine ? centred * (rstd * weight) + bias : centred * rstd;
        }
    }
    if (!tracked) return y;
    const double count = double(x.numel() / mu.numel());
    return detail::record("batch_norm", inputs, y,
                          [xhat, rstd, weight, axes, count](const Tensor& g, const std::vector<bool>& needs) {
                              const Tensor sg = sum_over(g, axes), sgx = sum_over(g * xhat, axes);
                              std::vector<Tensor> grads(needs.size());
                              if (needs[0]) {
                                  const Tensor scale = weight.defined() ? rstd * weight : rstd;
                                  grads[0] = (g - sg * (1 / count) - xhat * (sgx * (1 / count))) * scale;
                              }
                              if (needs.size() == 3) grads[1] = sgx, grads[2] = sg;
                              return grads;
                          });
}

// x normalised with running statistics as PyTorch's inference kernel does it: x · scale + shift, with
// scale = weight / sqrt(var + epsilon) and shift = bias - mean · scale per channel, two passes over x
// where (x - mean) / sqrt(var + epsilon) · weight + bias takes four, one of them a division. The
// statistics, weight and bias are broadcast to x's rank; weight and bias are both defined or both not.
Tensor running_normalised(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                          const Tensor& bias, double epsilon) {
    Tensor scale = pow(var + epsilon, -0.5);
    if (weight.defined()) scale = scale * weight;
    Tensor shift = -(mean * scale);
    if (bias.defined()) shift = shift + bias;
    return x * scale + shift;
}

// Checks x is {C}, {N, C}, {C, H, W} or {N, C, H, W} with `channels` channels and returns its
// channel axis.
int channel_axis(const std::string& layer, const Tensor& x, std::int64_t channels) {
    if (!x.defined()) throw ValueError(layer + ": the input is an empty tensor");
    std::string c = std::to_string(channels);
    std::string expected = "{" + c + "}, {N, " + c + "}, {" + c + ", H, W} or {N, " + c + ", H, W}";
    if (x.ndim() < 1 || x.ndim() > 4)
        throw ShapeError(layer + ": input has shape " + to_string(x.shape()) + "; expected " + expected);
    int axis = x.ndim() % 2 == 1 ? 0 : 1;  // {C}, {C, H, W} are one sample
    if (x.shape(axis) != channels)
        throw ShapeError(layer + ": input has " + std::to_string(x.shape(axis)) + " channels, expected " + c +
                         " (input shape " + to_string(x.shape()) + "; expected " + expected + ")");
    return axis;
}

// x normalised over each group of `groups` runs of channels (and their spatial values) of each
// sample: x viewed as {N·groups, rest} goes through `normalised`.
Tensor group_normalised(const Tensor& x, int axis, std::int64_t groups, double epsilon) {
    // Each sample's values, counted without dividing by the samples: a batch may be empty.
    const std::int64_t samples = axis == 0 ? 1 : x.shape(0);
    std::int64_t rest = 1;
    for (int a = axis; a < x.ndim(); ++a) rest *= x.shape(a);
    rest /= groups;
    return normalised(x.reshape({samples * groups, rest}), rest, epsilon).reshape(x.shape());
}

// The {C} weight or statistic broadcast along x's channel axis.
Tensor per_channel(const Tensor& t, const Tensor& x, int axis) {
    Shape shape(x.ndim(), 1);
    shape[axis] = t.numel();
    return t.reshape(shape);
}

std::string number(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
}

}  // namespace

// ---- BatchNorm ----

BatchNorm::BatchNorm(std::int64_t channels, const BatchNormOptions& o) : BatchNorm(channels, {}, o) {}

BatchNorm::BatchNorm(std::int64_t channels, Activation act, const BatchNormOptions& o)
    : activation(std::move(act)), momentum(o.momentum), epsilon(o.epsilon), channels_(channels) {
    if (channels < 1) throw ValueError("BatchNorm(" + std::to_string(channels) + "): channels must be positive");
    if (o.affine) weight = ones({channels}), bias = zeros({channels});
    if (o.track_stats) running_mean = zeros({channels}), running_var = ones({channels});
    if (o.momentum < 0 || o.momentum > 1 || o.epsilon < 0)
        throw ValueError(describe() + ": momentum must be in [0, 1] and epsilon >= 0");
}

std::string BatchNorm::describe() const {
    std::string s = "BatchNorm(" + std::to_string(channels_);
    if (!activation.is_identity()) s += ", " + activation.name();
    if (momentum != 0.1) s += ", momentum=" + number(momentum);
    if (epsilon != 1e-5) s += ", epsilon=" + number(epsilon);
    if (!weight.defined()) s += ", affine=false";
    if (!running_mean.defined()) s += ", track_stats=false";
    return s + ")";
}

Tensor BatchNorm::operator()(const Tensor& x) const {
    int axis = channel_axis(describe(), x, channels_);
    Shape stat_shape(x.ndim(), 1);
    stat_shape[axis] = channels_;
    std::vector<int> axes;
    for (int a = 0; a < x.ndim(); ++a)
        if (a != axis) axes.push_back(a);
    std::int64_t count = x.numel() / channels_;
    bool batch_stats = training(mode) || !running_mean.defined();
    if (batch_stats && count < 2)
        throw ShapeError(describe() + ": training needs more than one value per channel, got input " +
                         to_string(x.shape()) + "; use a batch, or testmode(model) for single samples");
    return detail::in_context(*this, [&] {
        const Tensor w = weight.defined() ? weight.reshape(stat_shape) : Tensor();
        const Tensor b = weight.defined() ? bias.reshape(stat_shape) : Tensor();
        Tensor y;
        bool activated = false;  // whether y has had the activation
        if (batch_stats) {
            Tensor mu, var;
            // relu joins the kernel where it can; any other activation follows it.
            const bool relu = activation.is(fluxion::relu);
            std::int64_t outer = 1, inner = 1;
            for (int a = 0; a < axis; ++a) outer *= x.shape(a);
            for (int a = axis + 1; a < x.ndim(); ++a) inner *= x.shape(a);
            y = fused_batch_norm("batch_norm", x, outer, channels_, inner, weight, bias, epsilon, relu, mu, var);
            if (y.defined()) activated = relu;
            else y = batch_normalised(x, axes, w, b, epsilon, mu, var);
            if (running_mean.defined() && training(mode)) {
                NoGrad no_grad;
                Tensor rm = running_mean, rv = running_var;  // handles on the layer's storage
                Tensor unbiased = var.reshape({channels_}) * (double(count) / double(count - 1));
                rm.copy_((rm * (1 - momentum) + mu.reshape({channels_}) * momentum).to(rm.dtype()));
                rv.copy_((rv * (1 - momentum) + unbiased * momentum).to(rv.dtype()));
            }
        } else {
            y = running_normalised(x, running_mean.reshape(stat_shape), running_var.reshape(stat_shape), w, b, epsilon);
        }
        return activated ? y : activation(y);
    });
}

// ---- LayerNorm ----

LayerNorm::LayerNorm(std::int64_t features, Activation act, const LayerNormOptions& o)
    : LayerNorm(Shape{features}, std::move(act), o) {}

LayerNorm::LayerNorm(Shape shape, Activation act, const LayerNormOptions& o)
    : activation(std::move(act)), epsilon(o.epsilon), shape_(std::move(shape)) {
    if (shape_.empty() || numel(shape_) < 1)
        throw ValueError("LayerNorm: the normalised shape must be non-empty and positive, got " + to_string(shape_));
    if (o.affine) weight = ones(shape_), bias = zeros(shape_);
}

std::string LayerNorm::describe() const {
    std::string s = "LayerNorm(";
    if (shape_.size() == 1) {
        s += std::to_string(shape_[0]);
    } else {
        s += "(";
        for (std::size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
        s += ")";
    }
    if (!activation.is_identity()) s += ", " + activation.name();
    if (epsilon != 1e-5) s += ", epsilon=" + number(epsilon);
    if (!weight.defined()) s += ", affine=false";
    return s + ")";
}

Tensor LayerNorm::operator()(const Tensor& x) const {
    if (!x.defined()) throw ValueError(describe() + ": the input is an empty tensor");
    int k = static_cast<int>(shape_.size());
    bool fits = x.ndim() >= k && Shape(x.shape().end() - k, x.shape().end()) == shape_;
    if (!fits)
        throw ShapeError(describe() + ": input has shape " + to_string(x.shape()) + "; expected it to end with " +
                         to_string(shape_));
    return detail::in_context(*this, [&] {
        Tensor y = normalised(x, numel(shape_), epsilon);
        if (weight.defined()) y = y * weight + bias;
        return activation(y);
    });
}

// ---- GroupNorm ----

GroupNorm::GroupNorm(std::int64_t channels, std::int64_t groups, const GroupNormOptions& o)
    : GroupNorm(channels, groups, {}, o) {}

GroupNorm::GroupNorm(std::int64_t channels, std::int64_t groups, Activation act, const GroupNormOptions& o)
    : activation(std::move(act)), epsilon(o.epsilon), channels_(channels), groups_(groups) {
    if (channels < 1 || groups < 1 || channels % groups != 0 || o.epsilon < 0)
        throw ValueError("GroupNorm(" + std::to_string(channels) + ", " + std::to_string(groups) +
                         "): channels and groups must be positive, channels divisible by groups, and epsilon >= 0");
    if (o.affine) weight = ones({channels}), bias = zeros({channels});
}

std::string GroupNorm::describe() const {
    std::string s = "GroupNorm(" + std::to_string(channels_) + ", " + std::to_string(groups_);
    if (!activation.is_identity()) s += ", " + activation.name();
    if (epsilon != 1e-5) s += ", epsilon=" + number(epsilon);
    if (!weight.defined()) s += ", affine=false";
    return s + ")";
}

Tensor GroupNorm::operator()(const Tensor& x) const {
    int axis = channel_axis(describe(), x, channels_);
    return detail::in_context(*this, [&] {
        Tensor y = group_normalised(x, axis, groups_, epsilon);
        if (weight.defined()) y = y * per_channel(weight, x, axis) + per_channel(bias, x, axis);
        return activation(y);
    });
}

// ---- InstanceNorm ----

InstanceNorm::InstanceNorm(std::int64_t channels, const InstanceNormOptions& o) : InstanceNorm(channels, {}, o) {}

InstanceNorm::InstanceNorm(std::int64_t channels, Activation act, const InstanceNormOptions& o)
    : activation(std::move(act)), momentum(o.momentum), epsilon(o.epsilon), channels_(channels) {
    if (channels < 1) throw ValueError("InstanceNorm(" + std::to_string(channels) + "): channels must be positive");
    if (o.momentum < 0 || o.momentum > 1 || o.epsilon < 0)
        throw ValueError("InstanceNorm(" + std::to_string(channels) + "): momentum must be in [0, 1] and epsilon >= 0");
    if (o.affine) weight = ones({channels}), bias = zeros({channels});
    if (o.track_stats) running_mean = zeros({channels}), running_var = ones({channels});
}

std::string InstanceNorm::describe() const {
    std::string s = "InstanceNorm(" + std::to_string(channels_);
    if (!activation.is_identity()) s += ", " + activation.name();
    if (momentum != 0.1) s += ", momentum=" + number(momentum);
    if (epsilon != 1e-5) s += ", epsilon=" + number(epsilon);
    if (weight.defined()) s += ", affine=true";
    if (running_mean.defined()) s += ", track_stats=true";
    return s + ")";
}

Tensor InstanceNorm::operator()(const Tensor& x) const {
    int axis = channel_axis(describe(), x, channels_);
    bool instance_stats = training(mode) || !running_mean.defined();
    const std::int64_t samples = axis == 0 ? 1 : x.shape(0);
    std::int64_t count = 1;  // spatial values per channel, counted without dividing: a batch may be empty
    for (int a = axis + 1; a < x.ndim(); ++a) count *= x.shape(a);
    if (instance_stats && count < 2)
        throw ShapeError(describe() + ": normalising needs more than one spatial value per channel, got input " +
                         to_string(x.shape()));
    return detail::in_context(*this, [&] {
        Tensor y;
        if (instance_stats) {
            y = group_normalised(x, axis, channels_, epsilon);
            if (running_mean.defined() && training(mode) && samples > 0) {
                // PyTorch's update: the batch's mean of each instance's mean and unbiased variance
                // (none from an empty batch, whose means would be NaN).
                NoGrad no_grad;
                Tensor rows = x.reshape({samples, channels_, count});
                Tensor mu = mean(rows, 2, true);
                Tensor unbiased = mean(square(rows - mu), 2) * (double(count) / double(count - 1));
                Tensor rm = running_mean, rv = running_var;  // handles on the layer's storage
                rm.copy_((rm * (1 - momentum) + mean(mu.reshape({samples, channels_}), 0) * momentum).to(rm.dtype()));
                rv.copy_((rv * (1 - momentum) + mean(unbiased, 0) * momentum).to(rv.dtype()));
            }
            if (weight.defined()) y = y * per_channel(weight, x, axis) + per_channel(bias, x, axis);
        } else {
            const Tensor w = weight.defined() ? per_channel(weight, x, axis) : Tensor();
            const Tensor b = weight.defined() ? per_channel(bias, x, axis) : Tensor();
            y = running_normalised(x, per_channel(running_mean, x, axis), per_channel(running_var, x, axis), w, b,
                                   epsilon);
        }
        return activation(y);
    });
}

}  // namespace fluxion
