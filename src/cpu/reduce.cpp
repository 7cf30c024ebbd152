// Reductions over the middle axis of {outer, n, inner}: sum, mean, max, min, argmax, argmin.
// Floats accumulate sums in double; max, min, argmax and argmin let a NaN win, and the arg
// reductions keep the first of equal extremes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {
namespace {

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
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, std::uint64_t>;  // integers wrap
    using State = Acc;
    using Out = T;
    static State start(T x, int64_t) { return Acc(x); }
    static State step(State s, T x, int64_t) { return s + Acc(x); }
    static State merge(State a, State b) { return a + b; }
    static Out finish(State s, int64_t n) { return mean ? T(s / double(n)) : T(s); }

    // Sixteen independent lanes let the compiler vectorise a sum it may not reorder.
    static State scan(const T* x, int64_t begin, int64_t end) {
        constexpr int lanes = 16;
        Acc lane[lanes] = {};
        int64_t i = begin;
        for (; i + lanes <= end; i += lanes)
            for (int l = 0; l < lanes; ++l) lane[l] += Acc(x[i + l]);
        for (; i < end; ++i) lane[0] += Acc(x[i]);
        Acc total = 0;
        for (int l = 0; l < lanes; ++l) total += lane[l];
        return total;
    }
};

// `greater` picks max (true) or min (false).
template <class T, bool greater>
struct Extreme {
    using State = T;
    using Out = T;
    static bool beats(T x, T best) { return (greater ? x > best : x < best) || (is_nan(x) && !is_nan(best)); }
    static State start(T x, int64_t) { return x; }
    static State step(State s, T x, int64_t) { return beats(x, s) ? x : s; }
    static State merge(State a, State b) { return step(a, b, 0); }
    static Out finish(State s, int64_t) { return s; }
    // Independent lanes vectorise when they only compare; NaNs are noted aside and win at the end.
    static State scan(const T* x, int64_t begin, int64_t end) {
        constexpr int lanes = 16;
        State s = x[begin];
        int64_t i = begin + 1;
        bool nan = false;
        if (end - begin >= lanes) {
            T lane[lanes];
            int seen[lanes] = {};
            for (int l = 0; l < lanes; ++l) lane[l] = x[begin + l];
            for (i = begin + lanes; i + lanes <= end; i += lanes)
                for (int l = 0; l < lanes; ++l) {
                    const T v = x[i + l];
                    lane[l] = (greater ? v > lane[l] : v < lane[l]) ? v : lane[l];
                    seen[l] |= is_nan(v);
                }
            for (int l = 0; l < lanes; ++l) {
                s = step(s, lane[l], 0);
                nan |= seen[l] != 0;
            }
        }
        for (; i < end; ++i) s = step(s, x[i], i);
        if constexpr (std::is_floating_point_v<T>)
            if (nan) return std::numeric_limits<T>::quiet_NaN();
        return s;
    }
};

template <class T, bool greater>
struct ArgExtreme {
    struct State {
        T value;
        int64_t index;
    };
    using Out = int64_t;
    static State start(T x, int64_t j) { return {x, j}; }
    static State step(State s, T x, int64_t j) { return Extreme<T, greater>::beats(x, s.value) ? State{x, j} : s; }
    static State merge(State a, State b) { return Extreme<T, greater>::beats(b.value, a.value) ? b : a; }
    static Out finish(State s, int64_t) { return s.index; }
    static State scan(const T* x, int64_t begin, int64_t end) {
        State s{x[begin], begin};
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
    if (op == Reduce::mean && t != DType::f32 && t != DType::f64) throw unsupported(kernel, t, kFloatTypes);
    if (n == 0 && op != Reduce::sum && op != Reduce::mean)
        throw ValueError(std::string(kernel) + ": cannot reduce an axis of length 0; there is no extreme to return");
    if (outer * inner == 0) return;
    dispatch_plain(t, kernel, [&](auto tag) {
        using T = decltype(tag);
        const T* x = static_cast<const T*>(src);
        if (n == 0) {  // the empty sum is 0 and the empty mean is NaN, as 0 / 0
            T* d = static_cast<T*>(dst);
            const T value = op == Reduce::sum ? T(0) : T(std::numeric_limits<double>::quiet_NaN());
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
                if constexpr (std::is_floating_point_v<T>) reduce_typed<Sum<T, true>>(outer, n, inner, x, values);
                return;
            case Reduce::max: return reduce_typed<Extreme<T, true>>(outer, n, inner, x, values);
            case Reduce::min: return reduce_typed<Extreme<T, false>>(outer, n, inner, x, values);
            case Reduce::argmax: return reduce_typed<ArgExtreme<T, true>>(outer, n, inner, x, indices);
            case Reduce::argmin: return reduce_typed<ArgExtreme<T, false>>(outer, n, inner, x, indices);
        }
    });
}

}  // namespace fluxion::backend::cpu
