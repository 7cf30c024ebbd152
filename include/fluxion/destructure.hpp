// fluxion/destructure.hpp — a model's trainable parameters as one flat vector, and back (Flux's and
// Optimisers.jl's destructure): for optimisers that want a vector (L-BFGS, evolution strategies),
// hypernetworks, or Hessian-vector products.
//
//   auto [flat, re] = fx::destructure(model);     // flat {P}: every trainable tensor, in order
//   auto m2 = re(flat * 0.5);                      // a model like `model` holding those values
//   auto g = fx::gradient([&](const fx::Tensor& p) { return fx::mse(re(p)(x), y); }, flat);
//
// Both directions differentiate: re(p) slices and reshapes p, so gradients reach p. Tensors that
// are not trainable (BatchNorm's running statistics) are not in the vector: re keeps the model's.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/error.hpp"
#include "fluxion/functor.hpp"
#include "fluxion/ops.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

// Rebuilds a model of type M from a flat vector of its trainable parameters.
template <class M> struct Restructure {
    M model;                 // the template: its shapes, dtypes and untrainable tensors
    std::int64_t length = 0;  // elements the vector must have

    M operator()(const Tensor& flat) const {
        if (flat.shape() != Shape{length})
            throw ShapeError("Restructure: expected a vector of the " + std::to_string(length) +
                             " trainable parameters, got shape " + to_string(flat.shape()));
        M y = model;
        std::int64_t at = 0;
        visit_trainable(y, [&](const std::string&, Tensor& t) {
            if (!t.defined()) return;
            const std::int64_t n = t.numel();
            Tensor part = flat.slice(0, at, at + n).reshape(t.shape());
            t = part.dtype() == t.dtype() ? part : cast(part, t.dtype());
            at += n;
        });
        return y;
    }
};

// The flat vector (the first parameter's dtype and device; DTypeError or DeviceError where the
// parameters differ) and the Restructure that inverts it.
template <class M> std::pair<Tensor, Restructure<M>> destructure(const M& model) {
    std::vector<Tensor> parts;
    std::int64_t length = 0;
    visit_trainable(model, [&](const std::string& path, const Tensor& t) {
        if (!t.defined()) return;
        if (!parts.empty() && t.dtype() != parts.front().dtype())
            throw DTypeError("destructure: " + path + " is " + name(t.dtype()) + " where the parameters before it are " +
                             name(parts.front().dtype()) + "; convert the model first (fx::f32(model))");
        if (!parts.empty() && t.device() != parts.front().device())
            throw DeviceError("destructure: " + path + " is on " + t.device().str() + " where the parameters before it are on " +
                              parts.front().device().str());
        parts.push_back(t.reshape({-1}));
        length += t.numel();
    });
    Tensor flat = parts.empty() ? zeros({0}) : concat(parts, 0);
    return {flat, Restructure<M>{model, length}};
}

}  // namespace fluxion
