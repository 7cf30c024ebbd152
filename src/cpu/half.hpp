// half.hpp — the two 16-bit float formats as storage types: IEEE binary16 (f16) and bfloat16.
// Kernels do not compute in them; they are converted to and from float, rounding to nearest even.
#pragma once
#include <bit>
#include <cstdint>
#include <type_traits>

namespace fluxion::backend::cpu {

struct Half {
    std::uint16_t bits;
};
struct BFloat16 {
    std::uint16_t bits;
};

inline float to_float(Half h) {
    const std::uint32_t sign = std::uint32_t(h.bits & 0x8000u) << 16;
    const std::uint32_t exponent = (h.bits >> 10) & 0x1fu;
    const std::uint32_t mantissa = h.bits & 0x3ffu;
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
        const float magnitude = float(mantissa) * 0x1p-24f;
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) {  // infinity, or NaN made quiet with its payload kept: as F16C and PyTorch do
        const std::uint32_t quiet = mantissa ? 0x400000u : 0u;
        return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mantissa << 13));
    }
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline Half to_half(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const std::uint16_t sign = std::uint16_t((x >> 16) & 0x8000u);
    std::uint32_t magnitude = x & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return {std::uint16_t(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu))};  // NaN
    if (magnitude >= 0x477ff000u) return {std::uint16_t(sign | 0x7c00u)};  // rounds to infinity (>= 65520)
    if (magnitude < 0x38800000u) {
        // Below the smallest normal half: adding 0.5f leaves round(|f| * 2^24) in the low mantissa
        // bits, because the float spacing at 0.5 is exactly the half subnormal step 2^-24.
        const float shifted = std::bit_cast<float>(magnitude) + 0.5f;
        return {std::uint16_t(sign | (std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u))};
    }
    // Re-bias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
    const std::uint32_t odd = (magnitude >> 13) & 1u;
    magnitude += 0xc8000fffu + odd;
    return {std::uint16_t(sign | (magnitude >> 13))};
}

inline float to_float(BFloat16 b) { return std::bit_cast<float>(std::uint32_t(b.bits) << 16); }

inline BFloat16 to_bfloat16(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return {std::uint16_t((x >> 16) | 0x40u)};  // keep NaN quiet
    const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return {std::uint16_t((x + rounding) >> 16)};
}

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The type a kernel computes an element of type T in: float for the 16-bit floats, T itself for
// every other type. A kernel written as store<T>(f(load(x))) over T's storage then computes f16
// and bf16 in f32 and rounds each result once, in one pass and in registers, with no f32 copy of
// its operands.
template <class T>
using Compute = std::conditional_t<is_half_v<T>, float, T>;

template <class T>
Compute<T> load(T x) {
    if constexpr (is_half_v<T>) return to_float(x);
    else return x;
}

template <class T>
T store(Compute<T> v) {
    if constexpr (std::is_same_v<T, Half>) return to_half(v);
    else if constexpr (std::is_same_v<T, BFloat16>) return to_bfloat16(v);
    else return v;
}

}  // namespace fluxion::backend::cpu
