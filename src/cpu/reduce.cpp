// Reductions over the middle axis of {outer, n, inner}: sum, mean, max, min, argmax, argmin.
// Floats accumulate sums in double; max, min, argmax and argmin let a NaN win, and the arg
// reductions keep the first of equal extremes. f16 and bf16 elements are read as floats (half.hpp's
// load) and a result rounded once: a sum is rounded from double to float, then to its type, as the
// f32 kernel's result on widened copies was; an extreme is one of the elements, exactly.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "cpu/dispatch.hpp"
#include "cpu/half_simd.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {
namespace {

// The scans below read a 16-bit range in chunks widened to f32 eight cells at a time where the build
// has AVX2 and F16C (half_simd.hpp): read cell by cell, f16's widening (half.hpp's branches) kept
// GCC from vectorising them at all, and bf16's made them slower than f32's on twice the bytes. A
// chunk is a whole number of the scans' 16 lanes, so each element meets the lane, and the order, it
// would have met cell by cell: the results are the same bits.
constexpr int64_t kChunk = 256;
template <class T>
inline constexpr bool widened_in_chunks =
#ifdef FLUXION_HALF_SIMD
    is_half_v<T>;
#else
    false;
#endif

// Calls f(values, count) on [begin, end) in f32: chunk by chunk for the 16-bit types (their last
// part shorter), else on the range itself.
template <class T, class F>
void in_f32(const T* x, int64_t begin, int64_t end, F&& f) {
    if constexpr (widened_in_chunks<T>) {
        float chunk[kChunk];
        for (int64_t i = begin; i < end; i += kChunk) {
            const int64_t count = std::min(kChunk, end - i);
            cells_to_f32(x + i, chunk, count);
            f(static_cast<const float*>(chunk), count);
        }
    } else {
        f(x + begin, end - begin);
    }
}

template <class T>
bool is_nan(T x) {
    if constexpr (std::is_floating_point_v<T>)
        return x != x;
    else
        return false;
}

// Each reduction is a policy: the running State starts from the first element and takes the
// others one `step` at a time; `merge` joins the States of two consecutive ranges.
template <class T, bool mean>
struct Sum {
    using C = Compute<T>;
    using Acc = std::conditional_t<std::is_floating_point_v<C>, double, std::uint64_t>;  // integers wrap
    using State = Acc;
    using Out = T;
    static State start(T x, int64_t) { return Acc(load(x)); }
    static State step(State s, T x, int64_t) { return s + Acc(load(x)); }
    static State merge(State a, State b) { return a + b; }
    static Out finish(State s, int64_t n) { return store<T>(mean ? C(s / double(n)) : C(s)); }

    // Sixteen independent lanes let the compiler vectorise a sum it may not reorder.
    static State scan(const T* x, int64_t begin, int64_t end) {
        constexpr int lanes = 16;
        Acc lane[lanes] = {};
        in_f32(x, begin, end, [&](const auto* v, int64_t count) {
            int64_t i = 0;
            for (; i + lanes <= count; i += lanes)
#pragma GCC unroll 1  // the loop vectoriser takes a loop over the lanes; unrolled, GCC 12 left them scalar
                for (int l = 0; l < lanes; ++l) lane[l] += Acc(load(v[i + l]));
            for (; i < count; ++i) lane[0] += Acc(load(v[i]));  // only the range's last part
        });
        Acc total = 0;
        for (int l = 0; l < lanes; ++l) total += lane[l];
        return total;
    }
};

// `greater` picks max (true) or min (false). The state is the element read as a float for the
// 16-bit types; storing it back is exact.
template <class T, bool greater>
struct Extreme {
    using C = Compute<T>;
    using State = C;
    using Out = T;
    static bool beats(C x, C best) { return (greater ? x > best : x < best) || (is_nan(x) && !is_nan(best)); }
    static State start(T x, int64_t) { return load(x); }
    static State step(State s, T x, int64_t) { return take(s, load(x)); }
    static State take(State s, C x) { return beats(x, s) ? x : s; }
    static State merge(State a, State b) { return take(a, b); }
    static Out finish(State s, int64_t) { return store<T>(s); }
    // Independent lanes vectorise when they only compare; NaNs are noted aside and win at the end.
    static State scan(const T* x, int64_t begin, int64_t end) {
        constexpr int lanes = 16;
        State s = load(x[begin]);
        int64_t i = begin + 1;
        bool nan = false;
        if (end - begin >= lanes) {
            C lane[lanes];
            int seen[lanes] = {};
            for (int l = 0; l < lanes; ++l) lane[l] = load(x[begin + l]);
            i = begin + lanes + (end - begin - lanes) / lanes * lanes;  // after the whole lanes
            in_f32(x, begin + lanes, i, [&](const auto* v, int64_t count) {
                for (int64_t k = 0; k < count; k += lanes)
#pragma GCC unroll 1  // as in Sum::scan
                    for (int l = 0; l < lanes; ++l) {
                        const C value = load(v[k + l]);
                        lane[l] = (greater ? value > lane[l] : value < lane[l]) ? value : lane[l];
                        seen[l] |= is_nan(value);
                    }
            });
            for (int l = 0; l < lanes; ++l) {
                s = take(s, lane[l]);
                nan |= seen[l] != 0;
            }
        }
        for (; i < end; ++i) s = step(s, x[i], i);
        if constexpr (std::is_floating_point_v<C>)
            if (nan) return std::numeric_limits<C>::quiet_NaN();
        return s;
    }
};

template <class T, bool greater>
struct ArgExtreme {
    using C = Compute<T>;
    struct State {
        C value;
        int64_t index;
    };
    using Out = int64_t;
    static State start(T x, int64_t j) { return {load(x), j}; }
    static State step(State s, T x, int64_t j) {
        const C v = load(x);
        return Extreme<T, greater>::beats(v, s.value) ? State{v, j} : s;
    }
    static State merge(State a, State b) { return Extreme<T, greater>::beats(b.value, a.value) ? b : a; }
    static Out finish(State s, int64_t) { return s.index; }
    static State scan(const T* x, int64_t begin, int64_t end) {
        State s{load(x[begin]), begin};
        for (int64_t i = begin + 1; i < end; ++i) s = step(s, x[i], i);
        return s;
    }
};

template <class Op, class T>
void reduce_typed(int64_t outer, int64_t n, int64_t inner, const T* src, typename Op::Out* dst) {
    using State = typename Op::State;
    if (inner == 1) {
        constexpr int kMaxParts = 64;
        const int64_t parts =
            outer < threads() && n >= 4 * kParallelMin ? std::min<int64_t>({threads(), team_for(n), kMaxParts}) : 1;
        if (parts == 1) {
            parallel_for(outer, team_for(outer * n), [&](int64_t first, int64_t last) {
                for (int64_t o = first; o < last; ++o) dst[o] = Op::finish(Op::scan(src + o * n, 0, n), n);
            });
            return;
        }
        // Few long rows: every thread scans a slice of a row, and the slices merge in order.
        for (int64_t o = 0; o < outer; ++o) {
            State partial[kMaxParts];
            const T* row = src + o * n;
            parallel_for(parts, parts, [&](int64_t first, int64_t last) {
                for (int64_t p = first; p < last; ++p) partial[p] = Op::scan(row, n * p / parts, n * (p + 1) / parts);
            });
            State s = partial[0];
            for (int64_t p = 1; p < parts; ++p) s = Op::merge(s, partial[p]);
            dst[o] = Op::finish(s, n);
        }
        return;
    }
    // Strided columns: a block of consecutive columns advances together, one row at a time.
    constexpr int64_t block = 64;
    const int64_t blocks = (inner + block - 1) / block;
    parallel_for(outer * blocks, team_for(outer * n * inner), [&](int64_t first, int64_t last) {
        for (int64_t task = first; task < last; ++task) {
            const int64_t o = task / blocks, i0 = (task % blocks) * block, len = std::min(block, inner - i0);
            const T* column = src + o * n * inner + i0;
            State s[block];
            for (int64_t i = 0; i < len; ++i) s[i] = Op::start(column[i], 0);
            for (int64_t j = 1; j < n; ++j) {
                const T* row = column + j * inner;
                for (int64_t i = 0; i < len; ++i) s[i] = Op::step(s[i], row[i], j);
            }
            for (int64_t i = 0; i < len; ++i) dst[o * inner + i0 + i] = Op::finish(s[i], n);
        }
    });
}

const char* const kReduceNames[] = {"reduce sum", "reduce mean", "reduce max",
                                    "reduce min", "reduce argmax", "reduce argmin"};

}  // namespace

void reduce(int device, Reduce op, DType t, int64_t outer, int64_t n, int64_t inner, const void* src, void* dst) {
    if (int(op) < 0 || int(op) > int(Reduce::argmin))
        throw ValueError("reduce: unknown op code " + std::to_string(int(op)));
    const char* kernel = kReduceNames[int(op)];
    if (op == Reduce::sum && t == DType::boolean) throw unsupported(kernel, t, kNumericTypes);
    if (op == Reduce::mean && t != DType::f32 && t != DType::f64 && t != DType::f16 && t != DType::bf16)
        throw unsupported(kernel, t, kFloatTypes);
    if (n == 0 && op != Reduce::sum && op != Reduce::mean)
        throw ValueError(std::string(kernel) + ": cannot reduce an axis of length 0; there is no extreme to return");
    if (outer * inner == 0) return;
    dispatch_any(t, kernel, [&](auto tag) {
        using T = decltype(tag);
        using C = Compute<T>;
        const T* x = static_cast<const T*>(src);
        if (n == 0) {  // the empty sum is 0 and the empty mean is NaN, as 0 / 0
            T* d = static_cast<T*>(dst);
            const T value = store<T>(op == Reduce::sum ? C(0) : C(std::numeric_limits<double>::quiet_NaN()));
            std::fill(d, d + outer * inner, value);
            return;
        }
        auto* values = static_cast<T*>(dst);
        auto* indices = static_cast<int64_t*>(dst);
        switch (op) {
            case Reduce::sum:
                if constexpr (!std::is_same_v<T, bool>) reduce_typed<Sum<T, false>>(outer, n, inner, x, values);
                return;
            case Reduce::mean:
                if constexpr (std::is_floating_point_v<C>) reduce_typed<Sum<T, true>>(outer, n, inner, x, values);
                return;
            case Reduce::max: return reduce_typed<Extreme<T, true>>(outer, n, inner, x, values);
            case Reduce::min: return reduce_typed<Extreme<T, false>>(outer, n, inner, x, values);
            case Reduce::argmax: return reduce_typed<ArgExtreme<T, true>>(outer, n, inner, x, indices);
            case Reduce::argmin: return reduce_typed<ArgExtreme<T, false>>(outer, n, inner, x, indices);
        }
    });
}

}  // namespace fluxion::backend::cpu
