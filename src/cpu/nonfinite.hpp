// nonfinite.hpp — whether a buffer of f32, f64, bf16 or f16 values holds a NaN or an infinity: its
// exponent bits all ones. Mixed precision's overflow check (nonfinite_check.cpp) and the AMX
// weight gradient, which needs finite inputs (conv_amx.cpp), scan with it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/half.hpp"

namespace fluxion::backend::cpu {

// The exponent field of each type's bits, all ones for infinities and NaN.
template <class T> struct Bits;
template <> struct Bits<float> {
    using U = std::uint32_t;
    static constexpr U kExponent = 0x7f800000u;
};
template <> struct Bits<double> {
    using U = std::uint64_t;
    static constexpr U kExponent = 0x7ff0000000000000u;
};
template <> struct Bits<BFloat16> {
    using U = std::uint16_t;
    static constexpr U kExponent = 0x7f80u;
};
template <> struct Bits<Half> {
    using U = std::uint16_t;
    static constexpr U kExponent = 0x7c00u;
};

// Whether x[0, n) holds a value that is not finite. It keeps the largest exponent field it sees, a
// max of integers that vectorises.
template <class T> bool any_nonfinite(const T* x, std::int64_t n) {
    using U = typename Bits<T>::U;
    U top = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        U bits;
        std::memcpy(&bits, x + i, sizeof(U));
        top = std::max<U>(top, bits & Bits<T>::kExponent);
    }
    return top == Bits<T>::kExponent;
}

}  // namespace fluxion::backend::cpu
