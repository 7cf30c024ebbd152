// fluxion/outputsize.hpp — the shape a model gives an input of a given shape, without computing it
// (Flux's outputsize):
//
//   auto model = fx::Chain(fx::Conv({3, 3}, 3, 16, fx::relu), fx::MaxPool({2, 2}), fx::Flatten(), fx::Dense(3600, 10));
//   fx::outputsize(model, {8, 3, 32, 32})   // {8, 10}
//
// The model runs once, as itself, on an input of that shape (its parameters' type and device) while
// every kernel is one that does nothing: each op works out its output's shape and checks its inputs
// as always, and no arithmetic runs (memory is reserved, not touched). A layer that the shapes do not
// fit raises its usual error, which names the layer. Values are meaningless meanwhile, as Flux's
// Nil: a model that branches on the values it computes may take any branch.
#pragma once
#include "fluxion/autodiff.hpp"
#include "fluxion/dtype.hpp"
#include "fluxion/functor.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

namespace detail {
// While alive, the kernels of the CPU and of `device` on this thread do nothing (copies and memory
// stay real). Not inside a compiled step's trace (ValueError).
class ShapesOnly {
public:
    explicit ShapesOnly(const Device& device);
    ~ShapesOnly();
    ShapesOnly(const ShapesOnly&) = delete;
    ShapesOnly& operator=(const ShapesOnly&) = delete;
};
}  // namespace detail

template <class M> Shape outputsize(const M& model, const Shape& input) {
    TensorOptions options{.dtype = DType::f32};
    bool found = false;
    for_each_tensor(model, [&](const Tensor& t) {
        if (found || !t.defined() || !is_floating(t.dtype())) return;
        options = {.dtype = t.dtype(), .device = t.device()};
        found = true;
    });
    detail::ShapesOnly shapes_only(options.device);
    NoGrad no_tape;
    return model(empty(input, options)).shape();
}

}  // namespace fluxion
