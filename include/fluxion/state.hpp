// fluxion/state.hpp — a model's tensors by name, as PyTorch's state_dict:
//
//   for (auto& [name, t] : fx::state(model)) std::cout << name << " " << fx::summary(t) << "\n";
//   // layers.0.weight 5×10 Tensor<f32, CPU>, layers.0.bias ..., layers.1.running_mean ...
//
// Names are dotted paths in declaration order (docs/ARCHITECTURE.md, "Conventions"); every tensor
// fmap reaches is listed, trainable or not (BatchNorm's running statistics too); fields without a
// tensor (Dense without bias) are left out. The tensors are handles on the model's own storage,
// not copies.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "fluxion/functor.hpp"

namespace fluxion {

using State = std::vector<std::pair<std::string, Tensor>>;

template <class T> State state(const T& model) {
    State s;
    visit_tensors(model, [&](const std::string& path, const Tensor& t) {
        if (t.defined()) s.emplace_back(path, t);
    });
    return s;
}

}  // namespace fluxion
