// fluxion/layers/combinators.hpp — layers built from layers (Flux's SkipConnection and Parallel).
//
//   fx::SkipConnection(fx::Dense(4, 4, fx::relu), std::plus<>())  // x -> dense(x) + x
//   fx::Parallel(fx::Concat{}, fx::Dense(2, 3), fx::Dense(2, 4))   // x -> concat(a(x), b(x)) along features
//   fx::Parallel(std::plus<>(), a, b, c)                           // a(x) + b(x) + c(x)
//
// A combine function is any callable on tensors; Parallel calls it with every output at once when
// it takes that many, else folds it pairwise from the left. State names are `layers.<field>` for
// SkipConnection and `layers.<i>.<field>` for Parallel, as in Flux.
#pragma once
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/show.hpp"
#include "fluxion/ops.hpp"

namespace fluxion {

// Concatenates outputs along an axis (the features, -1, by default).
struct Concat {
    int axis = -1;
    template <class... Ts> Tensor operator()(const Tensor& first, const Ts&... rest) const {
        return concat({first, rest...}, axis);
    }
};

namespace detail {
template <class C> std::string combine_name() {
    if constexpr (std::is_same_v<C, std::plus<>>) return "+";
    else if constexpr (std::is_same_v<C, std::minus<>>) return "-";
    else if constexpr (std::is_same_v<C, std::multiplies<>>) return "*";
    else if constexpr (std::is_same_v<C, Concat>) return "concat";
    else return "λ";
}
}  // namespace detail

template <class Layer, class Combine> class SkipConnection {
public:
    Layer layers;
    Combine connection;

    SkipConnection(Layer layer, Combine combine) : layers(std::move(layer)), connection(std::move(combine)) {}

    Tensor operator()(const Tensor& x) const { return connection(layers(x), x); }

    void show(detail::Shower& s) const {
        s.open("SkipConnection");
        s.layer(layers);
        s.item(detail::combine_name<Combine>());
        s.close();
    }
};

template <class L, class C> SkipConnection(L&&, C) -> SkipConnection<detail::layer_t<L>, C>;

template <class Combine, class... Layers> class Parallel {
public:
    Combine connection;
    std::tuple<Layers...> layers;

    explicit Parallel(Combine combine, Layers... ls) : connection(std::move(combine)), layers(std::move(ls)...) {}

    Tensor operator()(const Tensor& x) const {
        return std::apply([&](const auto&... l) { return combine(l(x)...); }, layers);
    }

    void show(detail::Shower& s) const {
        s.open("Parallel");
        s.item(detail::combine_name<Combine>());
        std::apply([&](const auto&... l) { (s.layer(l), ...); }, layers);
        s.close();
    }

private:
    template <class... Ts> Tensor combine(const Tensor& first, const Ts&... rest) const {
        if constexpr (std::is_invocable_r_v<Tensor, const Combine&, const Tensor&, const Ts&...>) {
            return connection(first, rest...);
        } else {
            Tensor y = first;
            ((y = connection(y, rest)), ...);
            return y;
        }
    }
};

template <class C, class... Ls> Parallel(C, Ls&&...) -> Parallel<C, detail::layer_t<Ls>...>;

template <class L, class C> struct functor<SkipConnection<L, C>> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) { f("layers", x.layers); }
};
template <class C, class... Ls> struct functor<Parallel<C, Ls...>> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) { f("layers", x.layers); }
};

}  // namespace fluxion
