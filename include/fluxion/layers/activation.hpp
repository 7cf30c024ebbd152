// fluxion/layers/activation.hpp — functions as layers and as the activation of Dense, Conv, ...
//
// An Activation wraps any function of the library taking one Tensor (fx::relu, fx::sigmoid printed
// σ, fx::mish, ...; the list is ops.hpp's activations), fx::softmax and fx::logsoftmax (along the
// last axis), the functions with parameters at their defaults (fx::leakyrelu, fx::elu, fx::celu,
// fx::softshrink, fx::hardtanh, fx::trelu, fx::rrelu), or any callable taking a Tensor.
// Chain(Dense(10, 5), fx::softmax) turns the function into an Activation automatically.
// A callable's captured tensors are not walked by fmap: make a layer type for that.
#pragma once
#include <concepts>
#include <functional>
#include <string>
#include <type_traits>

#include "fluxion/layers/layer.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

class Activation {
public:
    Activation() = default;                  // identity
    Activation(Tensor (*f)(const Tensor&));  // NOLINT: implicit, so fx::relu converts
    Activation(Tensor (*f)(const Tensor&, int));
    Activation(Tensor (*f)(const Tensor&, double));          // fx::leakyrelu, ...; ValueError for others
    Activation(Tensor (*f)(const Tensor&, double, double));  // fx::hardtanh, fx::trelu, fx::rrelu
    template <class F>
        requires(std::is_class_v<F> && !std::same_as<F, Activation> &&
                 std::is_invocable_r_v<Tensor, const F&, const Tensor&>)
    Activation(F f, std::string name = "λ") : fn_(std::move(f)), name_(std::move(name)) {}  // NOLINT

    Tensor operator()(const Tensor& x) const { return fn_ ? fn_(x) : x; }
    bool is_identity() const { return !fn_; }
    // Whether it is the function f itself (made from the pointer f), e.g. is(fx::relu), so that a
    // layer can join it to its own kernel.
    bool is(Tensor (*f)(const Tensor&)) const;
    const std::string& name() const { return name_; }  // "relu", "σ", "hardσ", "softmax", "λ" for lambdas
    std::string describe() const { return name_; }

private:
    std::function<Tensor(const Tensor&)> fn_;
    std::string name_ = "identity";
};

namespace detail {
// What a Chain (or DynamicChain, SkipConnection, ...) stores for an argument: functions and
// stateless callables become Activations; everything else is kept as it is.
template <class L, class D = std::decay_t<L>>
using layer_t = std::conditional_t<std::is_pointer_v<D> || std::is_function_v<std::remove_reference_t<L>> ||
                                       (std::is_empty_v<D> && !functor<D>::declared),
                                   Activation, D>;
}  // namespace detail

}  // namespace fluxion

FLUXION_FUNCTOR_NO_FIELDS(fluxion::Activation);
