// fluxion/layers/mode.hpp — switching Dropout and BatchNorm between training and testing
// (Flux's trainmode! / testmode!). Each walks the model as fmap does and sets the `mode` of every
// layer that has one (a member `fluxion::Mode mode`); a layer that hides its parts (AnyLayer) sets
// them through a member `set_mode(Mode)`.
#pragma once
#include <tuple>
#include <type_traits>

#include "fluxion/functor.hpp"
#include "fluxion/layers/layer.hpp"

namespace fluxion {
namespace detail {

template <class T> void set_mode(T& x, Mode mode) {
    if constexpr (requires { x.set_mode(mode); }) {
        x.set_mode(mode);
    } else if constexpr (is_tuple<T>::value || is_pair<T>::value) {
        std::apply([&](auto&... e) { (set_mode(e, mode), ...); }, x);
    } else if constexpr (is_vector<T>::value || is_array<T>::value) {
        for (auto& e : x) set_mode(e, mode);
    } else if constexpr (is_map<T>::value) {
        for (auto& [k, v] : x) set_mode(v, mode);
    } else if constexpr (is_optional<T>::value) {
        if (x) set_mode(*x, mode);
    } else if constexpr (functor<T>::declared) {
        if constexpr (requires { { x.mode } -> std::same_as<Mode&>; }) x.mode = mode;
        functor<T>::visit(x, [&](const char*, auto& field) { set_mode(field, mode); });
    } else {
        static_assert(std::is_same_v<T, Tensor> || is_plain_leaf<T>,
                      "fluxion: trainmode/testmode cannot walk this type; declare its fields with "
                      "FLUXION_FUNCTOR(YourType, field1, ...)");
    }
}

}  // namespace detail

template <class T> void trainmode(T& model) { detail::set_mode(model, Mode::train); }  // always train
template <class T> void testmode(T& model) { detail::set_mode(model, Mode::test); }    // always test
template <class T> void automode(T& model) { detail::set_mode(model, Mode::automatic); }  // the default

}  // namespace fluxion
