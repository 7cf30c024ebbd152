// half_simd.hpp — the 16-bit floats converted eight at a time (AVX2, F16C), bit for bit as half.hpp's
// scalar conversions: round to nearest even, NaN kept quiet. Only where the compiler targets AVX2
// with F16C (FLUXION_HALF_SIMD is then defined); elsewhere callers use half.hpp alone.
#pragma once

#if defined(__AVX2__) && defined(__F16C__)
#define FLUXION_HALF_SIMD 1

#include <immintrin.h>

#include "cpu/half.hpp"

namespace fluxion::backend::cpu {

inline __m256 load8(const BFloat16* p) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

inline __m256 load8(const Half* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Rounds to nearest even and keeps NaN quiet, as to_bfloat16.
inline void store8(BFloat16* p, __m256 v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
    const __m256i magnitude = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    const __m256i bits = _mm256_blendv_epi8(rounded, quiet, nan);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}

// F16C rounds to nearest even, to infinity from 65520 on, and quiets NaN keeping its high payload
// bits: to_half, bit for bit.
inline void store8(Half* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

}  // namespace fluxion::backend::cpu

#endif
