// fluxion/layers/chain.hpp — Chain: layers applied in sequence, fixed when the program is compiled.
//
//   auto m = fx::Chain(fx::Dense(10, 5, fx::sigmoid), fx::Dense(5, 2), fx::softmax);
//   fx::Tensor y = m(x);                   // x {10} or {N, 10}
//   auto& first = std::get<0>(m.layers);   // the layers are a public tuple
//
// Functions (fx::relu, fx::softmax) and stateless lambdas become Activations. State names are
// `layers.<i>.<field>`, as Flux's Chain. For layers chosen at run time see DynamicChain.
#pragma once
#include <tuple>
#include <utility>

#include "fluxion/layers/activation.hpp"
#include "fluxion/layers/show.hpp"

namespace fluxion {

template <class... Layers> class Chain {
public:
    std::tuple<Layers...> layers;

    explicit Chain(Layers... ls) : layers(std::move(ls)...) {}

    Tensor operator()(const Tensor& x) const {
        return std::apply(
            [&](const auto&... l) {
                Tensor y = x;
                ((y = l(y)), ...);
                return y;
            },
            layers);
    }

    void show(detail::Shower& s) const {
        s.open("Chain");
        std::apply([&](const auto&... l) { (s.layer(l), ...); }, layers);
        s.close();
    }
};

template <class... Ls> Chain(Ls&&...) -> Chain<detail::layer_t<Ls>...>;

template <class... Ls> struct functor<Chain<Ls...>> {
    static constexpr bool declared = true;
    template <class X, class F> static void visit(X& x, F&& f) { f("layers", x.layers); }
};

}  // namespace fluxion
