// Broadcasting elementwise kernels of two and three operands: binary and where. binary computes
// f16 and bf16 elements in f32 inside its loops and rounds each result once (half.hpp).
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/strided.hpp"

namespace fluxion::backend::cpu {
namespace {

template <class T>
bool fx_isnan(T x) {
    if constexpr (std::is_floating_point_v<T>)
        return x != x;
    else
        return false;
}

// Integer powers by squaring; a negative exponent truncates 1/a^|b| towards zero as division does.
template <class T>
T integer_pow(T base, T exponent) {
    if constexpr (std::is_signed_v<T>) {
        if (exponent < 0) {
            if (base == 1) return 1;
            if (base == -1) return (exponent & 1) ? T(-1) : T(1);
            return 0;
        }
    }
    Wrapping<T> result = 1, factor = Wrapping<T>(base);
    for (auto e = std::make_unsigned_t<T>(exponent); e; e >>= 1) {
        if (e & 1) result = Wrapping<T>(result * factor);
        factor = Wrapping<T>(factor * factor);
    }
    return T(result);
}

template <class T>
T fx_power(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
        return T(std::pow(a, b));
    else
        return integer_pow(a, b);
}

template <class T>
T fx_quotient(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        return T(a / b);
    } else {  // integer division by zero is defined as 0, and INT_MIN / -1 wraps
        if (b == 0) return T(0);
        if constexpr (std::is_signed_v<T>)
            if (b == -1) return T(Wrapping<T>(0) - Wrapping<T>(a));
        return T(a / b);
    }
}

// The table has one line per backend::Binary, in the order of the codes, which the shaders use.
constexpr bool table_matches_codes() {
    int next = 0;
#define FX_BINARY(name, code, value) \
    if (int(Binary::name) != next++ || code != int(Binary::name)) return false;
#define FX_COMPARE(name, code, value) \
    if (int(Binary::name) != next++ || code != int(Binary::name)) return false;
#include "core/elementwise_formulas.def"
    return next == int(Binary::ge) + 1;
}
static_assert(table_matches_codes(), "core/elementwise_formulas.def: one line per backend::Binary, by code");

template <Binary>
constexpr bool kHasNoFormula = false;

// The ops of core/elementwise_formulas.def, one if-constexpr branch per line; comparisons give bool.
template <Binary op, class T, class W = Wrapping<T>>
auto binary_value(T a, T b) {
#define FX_BINARY(name, code, value)                \
    if constexpr (op == Binary::name) return value; \
    else
#define FX_COMPARE(name, code, value)               \
    if constexpr (op == Binary::name) return value; \
    else
#include "core/elementwise_formulas.def"
    static_assert(kHasNoFormula<op>, "binary_value: an op with no line in core/elementwise_formulas.def");
}

std::string kernel_name(Binary op) {
#define FX_BINARY(name, code, value) \
    if (op == Binary::name) return "binary " #name;
#define FX_COMPARE(name, code, value) \
    if (op == Binary::name) return "binary " #name;
#include "core/elementwise_formulas.def"
    throw ValueError("binary: unknown op code " + std::to_string(int(op)));
}

// The result of op on two elements: bool for a comparison, else an element of T (a 16-bit float
// computed in f32 and rounded once).
template <Binary op, class T>
auto element(Compute<T> a, Compute<T> b) {
    if constexpr (is_half_v<T> && !std::is_same_v<decltype(binary_value<op>(a, b)), bool>)
        return store<T>(binary_value<op>(a, b));
    else return binary_value<op>(a, b);
}

template <Binary op, class T>
void binary_typed(const Walk<3>& w, const T* a, const T* b, void* out_data) {
    using Out = decltype(element<op, T>(Compute<T>{}, Compute<T>{}));
    Out* out = static_cast<Out*>(out_data);
    const int last = w.ndim - 1;
    const int64_t sa = w.strides[0][last], sb = w.strides[1][last];
    for_each_row(w, [&](const int64_t* offset, int64_t n) {
        const T* pa = a + offset[0];
        const T* pb = b + offset[1];
        Out* po = out + offset[2];
        if (sa == 1 && sb == 1) {
            for (int64_t i = 0; i < n; ++i) po[i] = element<op, T>(load(pa[i]), load(pb[i]));
        } else if (sa == 1 && sb == 0) {
            const auto vb = load(*pb);
            for (int64_t i = 0; i < n; ++i) po[i] = element<op, T>(load(pa[i]), vb);
        } else if (sa == 0 && sb == 1) {
            const auto va = load(*pa);
            for (int64_t i = 0; i < n; ++i) po[i] = element<op, T>(va, load(pb[i]));
        } else {
            for (int64_t i = 0; i < n; ++i) po[i] = element<op, T>(load(pa[i * sa]), load(pb[i * sb]));
        }
    });
}

// Subtraction, division and powers have no meaning for bool and are not instantiated for it.
template <class T>
void binary_dispatch(Binary op, const char* kernel, const Walk<3>& w, const T* a, const T* b, void* out) {
    constexpr bool arithmetic = !std::is_same_v<T, bool>;
    switch (op) {
        case Binary::add: return binary_typed<Binary::add>(w, a, b, out);
        case Binary::sub:
            if constexpr (arithmetic) return binary_typed<Binary::sub>(w, a, b, out);
            break;
        case Binary::mul: return binary_typed<Binary::mul>(w, a, b, out);
        case Binary::div:
            if constexpr (arithmetic) return binary_typed<Binary::div>(w, a, b, out);
            break;
        case Binary::pow:
            if constexpr (arithmetic) return binary_typed<Binary::pow>(w, a, b, out);
            break;
        case Binary::maximum: return binary_typed<Binary::maximum>(w, a, b, out);
        case Binary::minimum: return binary_typed<Binary::minimum>(w, a, b, out);
        case Binary::eq: return binary_typed<Binary::eq>(w, a, b, out);
        case Binary::ne: return binary_typed<Binary::ne>(w, a, b, out);
        case Binary::lt: return binary_typed<Binary::lt>(w, a, b, out);
        case Binary::le: return binary_typed<Binary::le>(w, a, b, out);
        case Binary::gt: return binary_typed<Binary::gt>(w, a, b, out);
        case Binary::ge: return binary_typed<Binary::ge>(w, a, b, out);
    }
    throw unsupported(kernel, DType::boolean, kNumericTypes);
}

std::string shape_text(const Strided& v) {
    std::string text = "{";
    for (int d = 0; d < v.ndim; ++d) text += (d ? ", " : "") + std::to_string(v.shape[d]);
    return text + "}";
}

// Every view must have the shape of the first; the output is contiguous in that shape.
void check_same_shape(const char* kernel, const Strided& first, const Strided& other) {
    bool same = first.ndim == other.ndim;
    for (int d = 0; same && d < first.ndim; ++d) same = first.shape[d] == other.shape[d];
    if (!same)
        throw ShapeError(std::string(kernel) + ": operand views of shapes " + shape_text(first) + " and " +
                         shape_text(other) + " were not broadcast to one shape before the kernel");
}

}  // namespace

void binary(int device, Binary op, DType t, const Strided* a_view, const void* a, const Strided* b_view,
            const void* b, void* out) {
    const std::string kernel = kernel_name(op);
    check_same_shape(kernel.c_str(), *a_view, *b_view);
    int64_t out_strides[kMaxDims];
    contiguous_strides(a_view->ndim, a_view->shape, out_strides);
    const Walk<3> w = simplify<3>(a_view->ndim, a_view->shape, {a_view->strides, b_view->strides, out_strides});
    dispatch_any(t, kernel.c_str(), [&](auto tag) {
        using T = decltype(tag);
        binary_dispatch(op, kernel.c_str(), w, static_cast<const T*>(a), static_cast<const T*>(b), out);
    });
}

void where(int device, DType t, const Strided* c_view, const void* c, const Strided* a_view, const void* a,
           const Strided* b_view, const void* b, void* out) {
    check_same_shape("where", *c_view, *a_view);
    check_same_shape("where", *c_view, *b_view);
    int64_t out_strides[kMaxDims];
    contiguous_strides(c_view->ndim, c_view->shape, out_strides);
    const Walk<4> w =
        simplify<4>(c_view->ndim, c_view->shape, {c_view->strides, a_view->strides, b_view->strides, out_strides});
    const int last = w.ndim - 1;
    const int64_t sc = w.strides[0][last], sa = w.strides[1][last], sb = w.strides[2][last];
    dispatch_bytes(t, [&](auto tag) {
        using T = decltype(tag);
        const auto* cond = static_cast<const std::uint8_t*>(c);
        const T* pa = static_cast<const T*>(a);
        const T* pb = static_cast<const T*>(b);
        T* po = static_cast<T*>(out);
        for_each_row(w, [&](const int64_t* offset, int64_t n) {
            const std::uint8_t* rc = cond + offset[0];
            const T* ra = pa + offset[1];
            const T* rb = pb + offset[2];
            T* ro = po + offset[3];
            if (sc == 1 && sa == 1 && sb == 1) {
                for (int64_t i = 0; i < n; ++i) ro[i] = rc[i] ? ra[i] : rb[i];
            } else {
                for (int64_t i = 0; i < n; ++i) ro[i] = rc[i * sc] ? ra[i * sa] : rb[i * sb];
            }
        });
    });
}

}  // namespace fluxion::backend::cpu
