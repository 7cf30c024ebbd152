// unary.cpp — elementwise functions of one tensor and their gradients: the op registry's formulas
// (cpu/unary_formulas.hpp) in one loop per op. f16 and bf16 elements are computed in f32 inside
// the loop and rounded once (half.hpp's load and store).
#include <cmath>
#include <string>
#include <type_traits>

#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"
#include "cpu/unary_formulas.hpp"

namespace fluxion::backend::cpu {
namespace {

// The table has one line per backend::Unary, in the order of the codes, which the shaders use.
constexpr bool table_matches_codes() {
    int next = 0;
#define FX_UNARY(name, code, reads, api, value, gradient) \
    if (int(Unary::name) != next++ || code != int(Unary::name)) return false;
#define FX_UNARY_INTEGER(name, code, value) \
    if (code != int(Unary::name)) return false;
#include "core/elementwise_formulas.def"
    return next == int(Unary::count);
}
static_assert(table_matches_codes(), "core/elementwise_formulas.def: one FX_UNARY line per backend::Unary, by code");

// The ops that also take integers (i32, i64).
constexpr bool takes_integers(Unary op) {
#define FX_UNARY_INTEGER(name, code, value) \
    if (op == Unary::name) return true;
#include "core/elementwise_formulas.def"
    return false;
}

// Each op's loops are functions of their own: inlined into unary(), whose dispatch makes it very
// large, GCC stopped inlining the elementary functions into them and left them scalar calls.
template <Unary op, class T, class C = Compute<T>>
[[gnu::noinline]] void unary_range(int64_t begin, int64_t end, const T* x, T* y, C a, C b) {
    if constexpr (std::is_integral_v<T>)
        for (int64_t i = begin; i < end; ++i) y[i] = integer_value<op>(x[i]);
    else
        for (int64_t i = begin; i < end; ++i) y[i] = store<T>(unary_value<op>(load(x[i]), a, b));
}

// x or y is null where the op's gradient does not read it (the formulas' `reads`).
template <Unary op, class T, class C = Compute<T>>
[[gnu::noinline]] void unary_backward_range(int64_t begin, int64_t end, const T* x, const T* y, const T* gy, T* gx,
                                            C a, C b) {
    if constexpr (is_half_v<T>) {
        for (int64_t i = begin; i < end; ++i)
            gx[i] = store<T>(unary_gradient<op>(x ? load(x[i]) : C(0), y ? load(y[i]) : C(0), load(gy[i]), a, b));
    } else {
        for (int64_t i = begin; i < end; ++i) gx[i] = unary_gradient<op>(x[i], y[i], gy[i], a, b);
    }
}

template <Unary op, class T, class C = Compute<T>>
void unary_loop(int64_t n, const T* x, T* y, C a, C b) {
    constexpr int64_t grain = unary_is_cheap(op) ? kParallelMin : kParallelMin / kCostlyOp;
    parallel_for(n, team_for(n, grain), [=](int64_t begin, int64_t end) { unary_range<op>(begin, end, x, y, a, b); });
}

template <Unary op, class T, class C = Compute<T>>
void unary_backward_loop(int64_t n, const T* x, const T* y, const T* gy, T* gx, C a, C b) {
    constexpr int64_t grain = unary_is_cheap(op) ? kParallelMin : kParallelMin / kCostlyOp;
    parallel_for(n, team_for(n, grain),
                 [=](int64_t begin, int64_t end) { unary_backward_range<op>(begin, end, x, y, gy, gx, a, b); });
}

// Calls f(std::integral_constant<Unary, op>{}) so that each op compiles to its own loop.
template <class F>
void with_op(Unary op, F&& f) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    if (op == Unary::name) return f(std::integral_constant<Unary, Unary::name>{});
#include "core/elementwise_formulas.def"
    throw ValueError("unary: unknown op code " + std::to_string(int(op)));
}

// The name is only built for an error, so the common path allocates nothing.
std::string kernel_name(const char* kernel, Unary op) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    if (op == Unary::name) return std::string(kernel) + " " #name;
#include "core/elementwise_formulas.def"
    return std::string(kernel) + " ?";
}

bool is_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }

}  // namespace

void unary(int device, Unary op, DType t, int64_t n, const void* x, void* y, double a, double b) {
    with_op(op, [&](auto constant) {
        constexpr Unary o = decltype(constant)::value;
        if constexpr (takes_integers(o)) {
            const auto integers = [&](auto tag) {
                using I = decltype(tag);
                unary_loop<o>(n, static_cast<const I*>(x), static_cast<I*>(y), I(0), I(0));
            };
            if (t == DType::i32) return integers(std::int32_t{});
            if (t == DType::i64) return integers(std::int64_t{});
            if (!is_float(t)) throw unsupported(kernel_name("unary", op).c_str(), t, "f32, f64, f16, bf16, i32, i64");
        }
        if (!is_float(t)) throw unsupported(kernel_name("unary", op).c_str(), t, kFloatTypes);
        dispatch_float_or_half(t, "unary", [&](auto tag) {
            using T = decltype(tag);
            unary_loop<o>(n, static_cast<const T*>(x), static_cast<T*>(y), Compute<T>(a), Compute<T>(b));
        });
    });
}

void unary_backward(int device, Unary op, DType t, int64_t n, const void* x, const void* y, const void* gy,
                    void* gx, double a, double b) {
    if (!is_float(t)) throw unsupported(kernel_name("unary_backward", op).c_str(), t, kFloatTypes);
    with_op(op, [&](auto constant) {
        constexpr Unary o = decltype(constant)::value;
        dispatch_float_or_half(t, "unary_backward", [&](auto tag) {
            using T = decltype(tag);
            unary_backward_loop<o>(n, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(gy),
                                   static_cast<T*>(gx), Compute<T>(a), Compute<T>(b));
        });
    });
}

}  // namespace fluxion::backend::cpu
