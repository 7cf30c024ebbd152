// state.cpp — checking an update against the optimiser's state, and freezing by path.
#include "fluxion/optimisers.hpp"

namespace fluxion::detail {

void check_update(const std::vector<ParamState>& states, const Trainable& params, const Trainable& grads) {
    if (params.paths.size() != states.size())
        throw ValueError("update: the model has " + std::to_string(params.paths.size()) +
                         " trainable tensors but the optimiser was set up for " + std::to_string(states.size()) +
                         "; call fx::setup again after changing the model");
    if (grads.paths != params.paths)
        throw ValueError("update: the gradients do not have the model's trainable tensors (" +
                         std::to_string(grads.paths.size()) + " against " + std::to_string(params.paths.size()) +
                         "); pass the gradient that withgradient returned for this model");
    for (std::size_t i = 0; i < states.size(); ++i) {
        const auto& path = states[i].path;
        const Tensor& p = params.tensors[i];
        const Tensor& g = grads.tensors[i];
        if (params.paths[i] != path)
            throw ValueError("update: the model's tensor " + std::to_string(i) + " is '" + params.paths[i] +
                             "' but the optimiser was set up with '" + path + "'; call fx::setup again");
        if (g.shape() != p.shape())
            throw ShapeError("update: gradient of '" + path + "' has shape " + to_string(g.shape()) +
                             " but the parameter has " + to_string(p.shape()));
        if (!(g.device() == p.device()) || (states[i].state1.defined() && !(states[i].state1.device() == p.device())))
            throw DeviceError("update: '" + path + "' is on " + p.device().str() + " but its gradient is on " +
                              g.device().str() + (states[i].state1.defined() ? " and its optimiser state on " +
                                                                                    states[i].state1.device().str()
                                                                              : std::string()) +
                              "; move the model before fx::setup, or set up again after moving it");
        if (!is_floating(p.dtype()) || !is_floating(g.dtype()))
            throw DTypeError("update: '" + path + "' and its gradient must be floating point, got " +
                             name(p.dtype()) + " and " + name(g.dtype()));
    }
}

void set_frozen(std::vector<ParamState>& states, const std::string& prefix, bool frozen) {
    auto below = [&](const std::string& path) {
        return prefix.empty() || path == prefix ||
               (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 && path[prefix.size()] == '.');
    };
    bool any = false;
    for (const auto& s : states) any = any || below(s.path);
    if (!any) {
        std::string known;
        for (std::size_t i = 0; i < states.size() && i < 6; ++i) known += (i ? ", " : "") + states[i].path;
        if (states.size() > 6) known += ", ...";
        throw ValueError(std::string(frozen ? "freeze" : "thaw") + ": no trainable tensor is at or below '" + prefix +
                         "'; the optimiser has " + (known.empty() ? std::string("none") : known));
    }
    for (auto& s : states)
        if (below(s.path)) s.frozen = frozen;
}

}  // namespace fluxion::detail
