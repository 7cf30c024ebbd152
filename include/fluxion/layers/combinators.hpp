// fluxion/layers/combinators.hpp — layers built from layers (Flux's SkipConnection, Parallel,
// Maxout and PairwiseFusion).
//
//   fx::SkipConnection(fx::Dense(4, 4, fx::relu), std::plus<>())  // x -> dense(x) + x
//   fx::Parallel(fx::Concat{}, fx::Dense(2, 3), fx::Dense(2, 4))   // x -> concat(a(x), b(x)) along features
//   fx::Parallel(std::plus<>(), a, b, c)                           // a(x) + b(x) + c(x)
//   fx::Maxout([] { return fx::Dense(5, 7); }, 3)                  // the elementwise max of 3 Dense layers
//   fx::PairwiseFusion(std::plus<>(), a, b, c)                     // y1 = a(x1), y2 = b(y1 + x2), ...: {y1, y2, y3}
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
#include <vector>

#include "fluxion/error.hpp"
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

// The elementwise maximum of the outputs of layers of one type (Flux's Maxout).
template <class Layer> class Maxout {
public:
    std::vector<Layer> layers;

    explicit Maxout(std::vector<Layer> ls) : layers(std::move(ls)) {
        if (layers.empty()) throw ValueError("Maxout: needs at least one layer");
    }
    // n layers, each made by make() (so each draws its own weights).
    template <class Make>
        requires std::is_invocable_r_v<Layer, Make>
    Maxout(Make make, std::size_t n) : Maxout(repeat(make, n)) {}

    Tensor operator()(const Tensor& x) const {
        Tensor y = layers.front()(x);
        for (std::size_t i = 1; i < layers.size(); ++i) y = maximum(y, layers[i](x));
        return y;
    }

    void show(detail::Shower& s) const {
        s.open("Maxout");
        for (const auto& l : layers) s.layer(l);
        s.close();
    }

private:
    template <class Make> static std::vector<Layer> repeat(Make& make, std::size_t n) {
        std::vector<Layer> out;
        for (std::size_t i = 0; i < n; ++i) out.push_back(make());
        return out;
    }
};

template <class Make>
Maxout(Make, std::size_t) -> Maxout<std::remove_cvref_t<std::invoke_result_t<Make>>>;

// Flux's PairwiseFusion: with inputs x1..xn (or one x for all), y1 = layer1(x1) and
// yi = layeri(connection(y(i-1), xi)); returns every yi.
template <class Combine, class... Layers> class PairwiseFusion {
public:
    Combine connection;
    std::tuple<Layers...> layers;

    explicit PairwiseFusion(Combine combine, Layers... ls) : connection(std::move(combine)), layers(std::move(ls)...) {}

    std::vector<Tensor> operator()(const std::vector<Tensor>& xs) const {
        if (xs.size() != sizeof...(Layers))
            throw ValueError("PairwiseFusion: takes one input, or one per layer (" + std::to_string(sizeof...(Layers)) +
                             "), got " + std::to_string(xs.size()));
        std::vector<Tensor> ys;
        std::size_t i = 0;
        std::apply([&](const auto&... l) {
            ((ys.push_back(i == 0 ? l(xs[0]) : l(connection(ys.back(), xs[i]))), ++i), ...);
        }, layers);
        return ys;
    }
    std::vector<Tensor> operator()(const Tensor& x) const { return (*this)(std::vector<Tensor>(sizeof...(Layers), x)); }

    void show(detail::Shower& s) const {
        s.open("PairwiseFusion");
        s.item(detail::combine_name<Combine>());
        std::apply([&](const auto&... l) { (s.layer(l), ...); }, layers);
        s.close();
    }
};

template <class C, class... Ls> PairwiseFusion(C, Ls&&...) -> PairwiseFusion<C, detail::layer_t<Ls>...>;

template <class L> struct functor<Maxout<L>> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) { f("layers", x.layers); }
};
template <class C, class... Ls> struct functor<PairwiseFusion<C, Ls...>> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) { f("layers", x.layers); }
};

template <class L, class C> struct functor<SkipConnection<L, C>> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) { f("layers", x.layers); }
};
template <class C, class... Ls> struct functor<Parallel<C, Ls...>> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) { f("layers", x.layers); }
};

}  // namespace fluxion
