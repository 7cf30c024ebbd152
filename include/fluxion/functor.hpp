// fluxion/functor.hpp — walking structures of tensors (Flux's Functors.jl): fmap, the field
// declarations for user types, moving anything between devices (`x | fx::gpu`, `x | dev`) and
// between precisions (`fx::bf16(model)`, `fx::f32(model)`).
//
// fmap(f, x) applies f to every tensor leaf of x and returns a new value of x's type. It walks
// Tensor, std::tuple, std::pair, std::vector, std::array, std::map, std::optional, and every type
// declared with FLUXION_FUNCTOR (layers declare themselves the same way). Numbers, strings and
// enums pass through unchanged. Any other type is a compile error saying what to declare.
#pragma once
#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "fluxion/device.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion {

// Specialised by FLUXION_FUNCTOR: `visit(x, f)` calls f(name, field) for each declared field.
template <class T, class Enable = void> struct functor { static constexpr bool declared = false; };
// Specialised by FLUXION_TRAINABLE: the fields an optimiser updates (default: all declared fields).
template <class T, class Enable = void> struct trainable { static constexpr bool declared = false; };

namespace detail {
template <class T> inline constexpr bool always_false = false;
template <class T> struct is_tuple : std::false_type {};
template <class... Ts> struct is_tuple<std::tuple<Ts...>> : std::true_type {};
template <class T> struct is_pair : std::false_type {};
template <class A, class B> struct is_pair<std::pair<A, B>> : std::true_type {};
template <class T> struct is_vector : std::false_type {};
template <class T, class A> struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T> struct is_array : std::false_type {};
template <class T, std::size_t N> struct is_array<std::array<T, N>> : std::true_type {};
template <class T> struct is_map : std::false_type {};
template <class K, class V, class C, class A> struct is_map<std::map<K, V, C, A>> : std::true_type {};
template <class T> struct is_optional : std::false_type {};
template <class T> struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
inline constexpr bool is_plain_leaf =
    std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string> || std::is_pointer_v<T>;

inline std::string join_path(const std::string& prefix, const std::string& name) {
    return prefix.empty() ? name : prefix + "." + name;
}
template <class K> std::string key_name(const K& k) {
    if constexpr (std::is_same_v<K, std::string>) return k;
    else return std::to_string(k);
}

// The one structural walk: calls leaf(path, tensor) for each tensor reachable from x (X may be
// const). `only_trainable` follows FLUXION_TRAINABLE where a type declares it; without `named`
// every path is empty, so that the walk allocates nothing (compiled steps check their model so).
template <bool only_trainable, bool named = true, class X, class Leaf>
void walk(X& x, Leaf&& leaf, const std::string& path) {
    using T = std::remove_const_t<X>;
    if constexpr (std::is_same_v<T, Tensor>) {
        leaf(path, x);
    } else if constexpr (is_tuple<T>::value || is_pair<T>::value) {
        std::size_t i = 0;
        std::apply([&](auto&... e) { (walk<only_trainable, named>(e, leaf, named ? join_path(path, std::to_string(i++)) : std::string()), ...); }, x);
    } else if constexpr (is_vector<T>::value || is_array<T>::value) {
        for (std::size_t i = 0; i < x.size(); ++i) walk<only_trainable, named>(x[i], leaf, named ? join_path(path, std::to_string(i)) : std::string());
    } else if constexpr (is_map<T>::value) {
        for (auto& [k, v] : x) walk<only_trainable, named>(v, leaf, named ? join_path(path, key_name(k)) : std::string());
    } else if constexpr (is_optional<T>::value) {
        if (x) walk<only_trainable, named>(*x, leaf, path);
    } else if constexpr (only_trainable && trainable<T>::declared) {
        trainable<T>::visit(x, [&](const char* name, auto& field) { walk<only_trainable, named>(field, leaf, named ? join_path(path, name) : std::string()); });
    } else if constexpr (functor<T>::declared) {
        functor<T>::visit(x, [&](const char* name, auto& field) { walk<only_trainable, named>(field, leaf, named ? join_path(path, name) : std::string()); });
    } else if constexpr (is_plain_leaf<T>) {
        // numbers, strings, enums: nothing to walk
    } else {
        static_assert(always_false<T>,
                      "fluxion: this type is not declared to fmap, gpu, cpu, gradient or the optimisers. "
                      "Declare its fields once after the type's definition, at global scope: "
                      "FLUXION_FUNCTOR(YourType, field1, field2, ...)");
    }
}
}  // namespace detail

// f(path, tensor) for every tensor leaf, in declaration order; path is dotted ("layers.0.weight").
template <class T, class F> void visit_tensors(T& x, F&& f) { detail::walk<false>(x, f, ""); }
template <class T, class F> void visit_trainable(T& x, F&& f) { detail::walk<true>(x, f, ""); }
// f(tensor) for every tensor leaf, in the same order, building no paths (allocates nothing).
template <class T, class F> void for_each_tensor(T& x, F&& f) {
    detail::walk<false, false>(x, [&](const std::string&, auto& t) { f(t); }, std::string());
}

// A new value of x's type with f applied to every defined tensor leaf.
template <class F, class T> T fmap(F&& f, const T& x) {
    T y = x;
    visit_tensors(y, [&](const std::string&, Tensor& t) {
        if (t.defined()) t = f(std::as_const(t));
    });
    return y;
}

// ---- moving between devices ----
struct ToDevice {
    Device device;
    Tensor operator()(const Tensor& t) const { return t.to(device); }
    template <class T> T operator()(const T& x) const { return fmap(*this, x); }
};
// Moves to get_device(): a no-op where no GPU backend is functional.
struct GpuMover {
    Tensor operator()(const Tensor& t) const { return t.to(get_device()); }
    template <class T> T operator()(const T& x) const { return fmap(*this, x); }
};
struct CpuMover {
    Tensor operator()(const Tensor& t) const { return t.to(Device{}); }
    template <class T> T operator()(const T& x) const { return fmap(*this, x); }
};
inline constexpr GpuMover gpu{};
inline constexpr CpuMover cpu{};

// ---- changing precision (Flux's f16, f32, f64; bf16 beside them) ----
// fx::bf16(model) is a copy of model with every floating tensor leaf (weights, biases, running
// statistics) converted to bf16, on the device it was on; integer and bool tensors are kept.
// f16 and bf16 compute in f32 inside each CPU kernel and store their results rounded; the Vulkan and
// CUDA backends have no half kernels yet and raise DTypeError (fx::supports says so beforehand).
struct PrecisionMover {
    DType dtype;
    Tensor operator()(const Tensor& t) const { return is_floating(t.dtype()) ? t.to(dtype) : t; }
    template <class T> T operator()(const T& x) const { return fmap(*this, x); }
};
inline constexpr PrecisionMover f16{DType::f16};
inline constexpr PrecisionMover bf16{DType::bf16};
inline constexpr PrecisionMover f32{DType::f32};
inline constexpr PrecisionMover f64{DType::f64};

template <class T> T operator|(const T& x, const Device& d) { return ToDevice{d}(x); }
template <class T> T operator|(const T& x, GpuMover m) { return m(x); }
template <class T> T operator|(const T& x, CpuMover m) { return m(x); }
template <class T> T operator|(const T& x, PrecisionMover m) { return m(x); }

}  // namespace fluxion

// ---- field declarations ----
#define FLUXION_PP_CAT_(a, b) a##b
#define FLUXION_PP_CAT(a, b) FLUXION_PP_CAT_(a, b)
#define FLUXION_PP_NARGS_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, N, ...) N
#define FLUXION_PP_NARGS(...) \
    FLUXION_PP_NARGS_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define FLUXION_PP_F1(m, x) m(x)
#define FLUXION_PP_F2(m, x, ...) m(x) FLUXION_PP_F1(m, __VA_ARGS__)
#define FLUXION_PP_F3(m, x, ...) m(x) FLUXION_PP_F2(m, __VA_ARGS__)
#define FLUXION_PP_F4(m, x, ...) m(x) FLUXION_PP_F3(m, __VA_ARGS__)
#define FLUXION_PP_F5(m, x, ...) m(x) FLUXION_PP_F4(m, __VA_ARGS__)
#define FLUXION_PP_F6(m, x, ...) m(x) FLUXION_PP_F5(m, __VA_ARGS__)
#define FLUXION_PP_F7(m, x, ...) m(x) FLUXION_PP_F6(m, __VA_ARGS__)
#define FLUXION_PP_F8(m, x, ...) m(x) FLUXION_PP_F7(m, __VA_ARGS__)
#define FLUXION_PP_F9(m, x, ...) m(x) FLUXION_PP_F8(m, __VA_ARGS__)
#define FLUXION_PP_F10(m, x, ...) m(x) FLUXION_PP_F9(m, __VA_ARGS__)
#define FLUXION_PP_F11(m, x, ...) m(x) FLUXION_PP_F10(m, __VA_ARGS__)
#define FLUXION_PP_F12(m, x, ...) m(x) FLUXION_PP_F11(m, __VA_ARGS__)
#define FLUXION_PP_F13(m, x, ...) m(x) FLUXION_PP_F12(m, __VA_ARGS__)
#define FLUXION_PP_F14(m, x, ...) m(x) FLUXION_PP_F13(m, __VA_ARGS__)
#define FLUXION_PP_F15(m, x, ...) m(x) FLUXION_PP_F14(m, __VA_ARGS__)
#define FLUXION_PP_F16(m, x, ...) m(x) FLUXION_PP_F15(m, __VA_ARGS__)
#define FLUXION_PP_FOREACH(m, ...) FLUXION_PP_CAT(FLUXION_PP_F, FLUXION_PP_NARGS(__VA_ARGS__))(m, __VA_ARGS__)
#define FLUXION_PP_VISIT_FIELD(field) f(#field, x.field);

// FLUXION_FUNCTOR(Type, fields...): fmap, gpu, cpu, gradient, state and the optimisers walk the
// listed fields (up to 16) of Type, as Flux's `@functor Type (fields...,)`. Use at global scope.
#define FLUXION_FUNCTOR(Type, ...)                                                 \
    template <>                                                                    \
    struct fluxion::functor<Type> {                                                \
        static constexpr bool declared = true;                                     \
        template <class X, class F> static void visit(X& x, F&& f) {               \
            FLUXION_PP_FOREACH(FLUXION_PP_VISIT_FIELD, __VA_ARGS__)                \
        }                                                                          \
    }
// FLUXION_TRAINABLE(Type, fields...): only these fields are optimised; fmap still moves every
// FLUXION_FUNCTOR field.
#define FLUXION_TRAINABLE(Type, ...)                                               \
    template <>                                                                    \
    struct fluxion::trainable<Type> {                                              \
        static constexpr bool declared = true;                                     \
        template <class X, class F> static void visit(X& x, F&& f) {               \
            FLUXION_PP_FOREACH(FLUXION_PP_VISIT_FIELD, __VA_ARGS__)                \
        }                                                                          \
    }
