// fluxion/autodiff.hpp — reverse-mode automatic differentiation on a tape.
//
//   auto [dW, db] = fx::gradient(f, W, b);         // one gradient per argument, of its type
//   auto [loss, g] = fx::withgradient(f, model);   // the value too; g has the model's type
//
// f must return a one-element tensor; anything else throws ShapeError. An argument (or a tensor
// inside it) that f does not depend on gets a zero gradient of its shape. Arguments may be tensors
// or any structure fmap walks (layers, Chains, FLUXION_FUNCTOR types). Gradients of gradients are
// not supported: inside f, a nested gradient() records on its own tape.
#pragma once
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "fluxion/functor.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

// Within a NoGrad scope no op is recorded (for evaluation and in-place updates).
class NoGrad {
public:
    NoGrad();
    ~NoGrad();
    NoGrad(const NoGrad&) = delete;
    NoGrad& operator=(const NoGrad&) = delete;

private:
    bool previous_;
};
bool grad_enabled();

namespace detail {
struct TapeData;
// One recording: active from construction to destruction (RAII), innermost wins.
class Tape {
public:
    Tape();
    ~Tape();
    Tape(const Tape&) = delete;
    Tape& operator=(const Tape&) = delete;
    Tensor track(const Tensor& x);                   // a new handle on x's storage, recorded as a leaf
    void backward(const Tensor& result);             // result must hold one element
    Tensor grad(const Tensor& tracked) const;        // zeros if the result did not depend on it

private:
    std::unique_ptr<TapeData> data_;
};

}  // namespace detail

template <class Arg> struct WithGradient {
    Tensor value;
    Arg grad;
};
template <class... Args> struct WithGradients {
    Tensor value;
    std::tuple<Args...> grad;
};

// The value of f(args...) and the gradient with respect to each argument.
template <class F, class... Args> auto withgradient(F&& f, const Args&... args) {
    detail::Tape tape;
    auto tracked = std::make_tuple(fmap([&](const Tensor& t) { return tape.track(t); }, args)...);
    Tensor value = std::apply(f, std::as_const(tracked));
    tape.backward(value);
    auto grad_of = [&](const auto& x) { return fmap([&](const Tensor& t) { return tape.grad(t); }, x); };
    auto grads = std::apply([&](const auto&... t) { return std::make_tuple(grad_of(t)...); }, tracked);
    Tensor detached = value.detach();
    if constexpr (sizeof...(Args) == 1) return WithGradient<Args...>{detached, std::get<0>(std::move(grads))};
    else return WithGradients<Args...>{detached, std::move(grads)};
}

// The gradients of f(args...) with respect to each argument, as a tuple (Flux's gradient).
template <class F, class... Args> std::tuple<Args...> gradient(F&& f, const Args&... args) {
    auto r = withgradient(std::forward<F>(f), args...);
    if constexpr (sizeof...(Args) == 1) return std::tuple<Args...>{std::move(r.grad)};
    else return std::move(r.grad);
}

}  // namespace fluxion
