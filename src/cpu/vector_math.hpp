// vector_math.hpp — e^x and tanh x in float, written so that a loop calling them vectorises (glibc's
// expf and tanhf are scalar calls): a range reduction and a polynomial, no branch, no table, only
// arithmetic, comparisons that become selects (which needs -fno-trapping-math: without it GCC 12
// keeps the clamps below as branches on AVX2 and the loops scalar; CMakeLists.txt sets it for the
// library), and integer bit operations. unary.cpp's kernels use
// them for f32 (sigmoid, swish, softplus, gelu and the rest reach them through the formula table);
// f64 keeps std::.
//
// Accuracy against double-precision std::, measured over all 2^32 floats: exp within 1.08 ulp
// (subnormal results too: they are rounded once), tanh within 1.34 ulp, and sigmoid, the formula
// table's 1 / (1 + exp(-x)), within 2.49 ulp where σ(x) >= FLT_MIN (below, where e^-x overflows,
// within 3e-39 of it). ±0, ±∞ and NaN give what std:: gives; exp overflows to ∞ above
// log(FLT_MAX) as std::exp does. tests/test_cpu_vector_math.cpp holds them to 1.5, 2 and 3 ulp.
// The polynomials' coefficients were fitted for this file (Chebyshev fits in mpmath, 40 digits).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace fluxion::backend::cpu::vector_math {

// e^x = 2^n e^r with n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2], and
// e^r = 1 + r + r² P(r). 2^n is applied as two factors 2^(n/2) and 2^(n - n/2), so n reaches -150
// (subnormal results, rounded once, by the last product) and 128 (results just below FLT_MAX,
// e^r < 1 there) without a special case.
[[gnu::always_inline]] inline float exp(float x) {
    // Outside [-104, 89] the result is 0 or ∞ anyway; the clamp keeps n in [-150, 128]. NaN passes
    // (both comparisons are false) and gives NaN.
    x = x < -104.0f ? -104.0f : x;
    x = x > 89.0f ? 89.0f : x;
    // Adding 1.5 · 2^23 rounds to an integer, which then sits in the low bits of the sum's mantissa.
    constexpr float shifter = 0x1.8p23f;
    const float k = x * 0x1.715476p0f + shifter;  // x log2(e)
    const float n = k - shifter;
    // Cody and Waite's two-part ln 2: n · ln2_hi is exact for |n| < 2^15 (ln2_hi has 9 bits).
    const float r = (x - n * 0x1.63p-1f) - n * -0x1.bd0106p-13f;
    float p = 0x1.6d10fcp-10f;  // P(r) ≈ (e^r - 1 - r) / r², within 7e-8 on the interval
    p = p * r + 0x1.120b62p-7f;
    p = p * r + 0x1.55551ap-5f;
    p = p * r + 0x1.5554dep-3f;
    p = p * r + 0.5f;
    const float e = 1.0f + (r + r * r * p);
    const auto ni = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(k) - 0x4b400000u);
    const std::int32_t half = ni >> 1;
    const float s1 = std::bit_cast<float>((std::uint32_t(half) + 127u) << 23);
    const float s2 = std::bit_cast<float>((std::uint32_t(ni - half) + 127u) << 23);
    return e * s1 * s2;
}

// tanh |x| = |x| + |x|³ Q(x²) below |x| = 0.625, where 1 - 2 / (e^2|x| + 1) would lose bits to
// cancellation; that formula above, where it loses at most one bit; then x's sign (which keeps -0).
// Both are computed and one is chosen, which vectorises better than a branch.
[[gnu::always_inline]] inline float tanh(float x) {
    const float a = std::fabs(x);
    const float u = x * x;
    float q = -0x1.8f8de4p-8f;  // Q(u) ≈ (tanh √u - √u) / u^1.5, within 5e-8 for u < 0.625²
    q = q * u + 0x1.58048ep-6f;
    q = q * u + -0x1.b9258ap-5f;
    q = q * u + 0x1.110e1cp-3f;
    q = q * u + -0x1.555552p-2f;
    const float small = a + a * u * q;
    const float large = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
    return std::copysign(a < 0.625f ? small : large, x);
}

#if defined(__AVX512F__)
// exp(float)'s operations on sixteen lanes, written out for the loops the compiler does not
// vectorise on its own (softmax.cpp's rows, whose last vector is masked), its multiply-adds fused
// as GCC fuses them in exp(float) when it optimises (then the two agree bit for bit); held to the
// same bound (tests/test_cpu_vector_math.cpp). max and min return their second operand when either
// is NaN, which passes x through as the comparisons above do.
[[gnu::always_inline]] inline __m512 exp(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
    const __m512 shifter = _mm512_set1_ps(0x1.8p23f);
    const __m512 k = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p0f), shifter);
    const __m512 n = _mm512_sub_ps(k, shifter);
    const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-0x1.bd0106p-13f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.63p-1f), x));
    __m512 p = _mm512_set1_ps(0x1.6d10fcp-10f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.120b62p-7f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.55551ap-5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0x1.5554dep-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    const __m512 e = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_mul_ps(r, r), p, r));
    const __m512i ni = _mm512_sub_epi32(_mm512_castps_si512(k), _mm512_set1_epi32(0x4b400000));
    const __m512i half = _mm512_srai_epi32(ni, 1);
    const __m512i bias = _mm512_set1_epi32(127);
    const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(half, bias), 23));
    const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(ni, half), bias), 23));
    return _mm512_mul_ps(_mm512_mul_ps(e, s1), s2);
}
#endif

}  // namespace fluxion::backend::cpu::vector_math
