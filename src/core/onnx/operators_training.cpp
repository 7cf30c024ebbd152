// operators_training.cpp — the optimisers of ONNX's ai.onnx.preview.training domain: Adagrad,
// Momentum (standard and Nesterov) and Adam, each one step on n tensors at once, as device ops.
//
// Their inputs: the learning rate R (a scalar), the step count T (an int64 scalar, read on the
// host), then n parameters X, n gradients G and n of each state tensor; their outputs: the n new
// parameters, then the n new values of each state.
#include <cmath>

#include "core/onnx/import.hpp"
#include "fluxion/ops.hpp"

namespace fluxion::onnx::detail {
namespace {

using Ts = std::vector<Tensor>;

// How many tensors the node updates: its inputs after R and T, in `groups` groups of n.
std::size_t updated(const Node& n, const Ts& in, std::size_t groups) {
    if (in.size() < 2 + groups || (in.size() - 2) % groups != 0)
        n.unsupported(std::to_string(in.size()) + " inputs (R, T, then " + std::to_string(groups) +
                      " groups of the same number of tensors)");
    return (in.size() - 2) / groups;
}

// The step count T, read on the host: Momentum and Adam treat the first step (T = 0) apart.
std::int64_t step_count(const Node& n, const Ts& in) {
    values_read_on_host(n, "the step count T");
    if (in.at(1).numel() != 1) n.unsupported("a step count T of more than one value");
    return host_ints(in[1]).at(0);
}

// The learning rate as a scalar tensor on x's device.
Tensor rate(const Ts& in, const Tensor& x) { return in.at(0).reshape({}).to(x.dtype()).to(x.device()); }

Ts adagrad(const Node& n, const Ts& in) {
    const std::size_t k = updated(n, in, 3);
    const double decay = n.f("decay_factor", 0), eps = n.f("epsilon", 1e-6f), norm = n.f("norm_coefficient", 0);
    const double t = double(step_count(n, in));
    Ts x_new(k), h_new(k);
    for (std::size_t i = 0; i < k; ++i) {
        const Tensor &x = in[2 + i], &g = in[2 + k + i], &h = in[2 + 2 * k + i];
        const Tensor r = rate(in, x) / (1 + t * decay);
        const Tensor g_reg = norm * x + g;
        h_new[i] = h + g_reg * g_reg;
        x_new[i] = x - r * g_reg / (sqrt(h_new[i]) + eps);
    }
    x_new.insert(x_new.end(), h_new.begin(), h_new.end());
    return x_new;
}

Ts momentum(const Node& n, const Ts& in) {
    const std::size_t k = updated(n, in, 3);
    const double alpha = n.f("alpha", 0), beta = n.f("beta", 0), norm = n.f("norm_coefficient", 0);
    const std::string mode = n.s("mode", "standard");
    if (mode != "standard" && mode != "nesterov") n.unsupported("mode='" + mode + "' (it is standard or nesterov)");
    const double beta_t = step_count(n, in) > 0 ? beta : 1.0;  // the first step takes the whole gradient
    Ts x_new(k), v_new(k);
    for (std::size_t i = 0; i < k; ++i) {
        const Tensor &x = in[2 + i], &g = in[2 + k + i], &v = in[2 + 2 * k + i];
        const Tensor g_reg = norm * x + g;
        v_new[i] = alpha * v + beta_t * g_reg;
        x_new[i] = x - rate(in, x) * (mode == "nesterov" ? g_reg + alpha * v_new[i] : v_new[i]);
    }
    x_new.insert(x_new.end(), v_new.begin(), v_new.end());
    return x_new;
}

Ts adam(const Node& n, const Ts& in) {
    const std::size_t k = updated(n, in, 4);
    const double alpha = n.f("alpha", 0.9f), beta = n.f("beta", 0.999f), eps = n.f("epsilon", 1e-6f);
    const double norm = n.f("norm_coefficient", 0), norm_post = n.f("norm_coefficient_post", 0);
    const std::int64_t t = step_count(n, in);
    // The bias correction of both moments, folded into the rate (none on the first step, T = 0).
    const double correction = t > 0 ? std::sqrt(1 - std::pow(beta, double(t))) / (1 - std::pow(alpha, double(t))) : 1.0;
    Ts x_new(k), v_new(k), h_new(k);
    for (std::size_t i = 0; i < k; ++i) {
        const Tensor &x = in[2 + i], &g = in[2 + k + i], &v = in[2 + 2 * k + i], &h = in[2 + 3 * k + i];
        const Tensor g_reg = norm * x + g;
        v_new[i] = alpha * v + (1 - alpha) * g_reg;
        h_new[i] = beta * h + (1 - beta) * (g_reg * g_reg);
        x_new[i] = (1 - norm_post) * (x - rate(in, x) * correction * v_new[i] / (sqrt(h_new[i]) + eps));
    }
    x_new.insert(x_new.end(), v_new.begin(), v_new.end());
    x_new.insert(x_new.end(), h_new.begin(), h_new.end());
    return x_new;
}

}  // namespace

void add_training_operators(std::map<std::string, Operator>& t) {
    t["ai.onnx.preview.training.Adagrad"] = adagrad;
    t["ai.onnx.preview.training.Momentum"] = momentum;
    t["ai.onnx.preview.training.Adam"] = adam;
}

}  // namespace fluxion::onnx::detail
