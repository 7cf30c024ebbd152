// nonfinite_check.cpp — mixed precision's overflow check (core/backend.hpp, nonfinite_check): one
// parallel pass over every gradient of a step (any_nonfinite, nonfinite.hpp); a divided value is
// first computed in f32 as a division kernel would.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/dispatch.hpp"
#include "cpu/half_simd.hpp"
#include "cpu/kernels.hpp"
#include "cpu/nonfinite.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {
namespace {

// The same for x[i] / divisor in T's compute type (16-bit cells widened to f32 chunk by chunk).
template <class T> bool any_nonfinite_divided(const T* x, int64_t n, double divisor) {
    using C = Compute<T>;
    constexpr int64_t kChunk = 1024;
    alignas(64) C v[kChunk];
    const C d = C(divisor);
    for (int64_t c = 0; c < n; c += kChunk) {
        const int64_t m = std::min(kChunk, n - c);
        if constexpr (is_half_v<T>) cells_to_f32(x + c, v, m);
        else std::copy(x + c, x + c + m, v);
        for (int64_t i = 0; i < m; ++i) v[i] /= d;
        if (any_nonfinite(v, m)) return true;
    }
    return false;
}

}  // namespace

void nonfinite_check(int device, DType t, std::size_t count, const int64_t* n, const void* const* ptrs,
                     double divisor, void* flag) {
    int64_t total = 0;
    for (std::size_t i = 0; i < count; ++i) total += n[i];
    std::atomic<bool> found{false};
    dispatch_float_or_half(t, "nonfinite_check", [&](auto tag) {
        using T = decltype(tag);
        parallel_for(total, team_for(total), [&](int64_t begin, int64_t end) {
            for_each_part(count, n, begin, end, [&](std::size_t i, int64_t lo, int64_t hi) {
                if (found.load(std::memory_order_relaxed)) return;
                const T* x = static_cast<const T*>(ptrs[i]) + lo;
                const bool bad = divisor == 1 ? any_nonfinite(x, hi - lo) : any_nonfinite_divided(x, hi - lo, divisor);
                if (bad) found.store(true, std::memory_order_relaxed);
            });
        });
    });
    const float value = found.load() ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
    std::memcpy(flag, &value, sizeof value);
}

}  // namespace fluxion::backend::cpu
