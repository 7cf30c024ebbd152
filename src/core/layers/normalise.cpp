// normalise.cpp — BatchNorm and LayerNorm written with differentiable ops; BatchNorm's running
// statistics are updated in place outside the tape.
#include "fluxion/layers/normalise.hpp"

#include <sstream>

#include "core/dispatch.hpp"
#include "core/layers/context.hpp"
#include "fluxion/autodiff.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {
namespace {

// Mean of x over every axis in `axes` (ascending), keeping them.
Tensor mean_over(Tensor x, const std::vector<int>& axes) {
    for (auto it = axes.rbegin(); it != axes.rend(); ++it) x = mean(x, *it, true);
    return x;
}

// (x - mean) / sqrt(var + epsilon) over each run of `features` trailing elements of x, as one
// recorded op whose backward pass is the closed form
//   gx = (g - mean(g) - x̂ mean(g x̂)) / sqrt(var + epsilon)
// with the means over each run: 7 passes over x where the autodiff of the forward composition takes
// about 12, and none of them on a broadcast of a {..., 1} statistic back to x's shape.
Tensor normalised(const Tensor& x, std::int64_t features, double epsilon) {
    const Shape shape = x.shape();
    Tensor xhat, rstd;
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
    if (!x.defined()) throw ValueError(describe() + ": the input is an empty tensor");
    std::string c = std::to_string(channels_);
    std::string expected = "{" + c + "}, {N, " + c + "}, {" + c + ", H, W} or {N, " + c + ", H, W}";
    if (x.ndim() < 1 || x.ndim() > 4)
        throw ShapeError(describe() + ": input has shape " + to_string(x.shape()) + "; expected " + expected);
    int axis = x.ndim() % 2 == 1 ? 0 : 1;  // {C}, {C, H, W} are one sample
    if (x.shape(axis) != channels_)
        throw ShapeError(describe() + ": input has " + std::to_string(x.shape(axis)) + " channels, expected " + c +
                         " (input shape " + to_string(x.shape()) + "; expected " + expected + ")");
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
        Tensor y;
        if (batch_stats) {
            Tensor mu = mean_over(x, axes);
            Tensor centred = x - mu;
            Tensor var = mean_over(square(centred), axes);
            y = centred / sqrt(var + epsilon);
            if (running_mean.defined() && training(mode)) {
                NoGrad no_grad;
                Tensor rm = running_mean, rv = running_var;  // handles on the layer's storage
                Tensor unbiased = var.reshape({channels_}) * (double(count) / double(count - 1));
                rm.copy_((rm * (1 - momentum) + mu.reshape({channels_}) * momentum).to(rm.dtype()));
                rv.copy_((rv * (1 - momentum) + unbiased * momentum).to(rv.dtype()));
            }
        } else {
            y = (x - running_mean.reshape(stat_shape)) / sqrt(running_var.reshape(stat_shape) + epsilon);
        }
        if (weight.defined()) y = y * weight.reshape(stat_shape) + bias.reshape(stat_shape);
        return activation(y);
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

}  // namespace fluxion
