// half_simd.hpp — the 16-bit floats converted eight at a time (AVX2, F16C), bit for bit as half.hpp's
// scalar conversions: round to nearest even, NaN kept quiet. Only where the compiler targets AVX2
// with F16C (FLUXION_HALF_SIMD is then defined); elsewhere only cells_to_f32 and f32_to_cells are
// defined, one cell at a time through half.hpp.
#pragma once

#if defined(__AVX2__) && defined(__F16C__)
#define FLUXION_HALF_SIMD 1

#include <immintrin.h>

#include <cstdint>

#include "cpu/half.hpp"

namespace fluxion::backend::cpu {

// Each cell into the high half of its 32-bit lane, zeros below, by one byte shuffle of the 16 bytes
// loaded into both 128-bit halves (a broadcast load, no arithmetic): a zero extension and a shift
// took two operations, the shift on the ports the multiply-adds beside it need (Intel's AVX2 FMA
// ports), which made the direct convolutions' bf16 weight gradient 1.35x its f32 time.
inline __m256 load8(const BFloat16* p) {
    const __m256i bits = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i high_halves = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7,     //
                                                 -1, -1, 8, 9, -1, -1, 10, 11, -1, -1, 12, 13, -1, -1, 14, 15);
    return _mm256_castsi256_ps(_mm256_shuffle_epi8(bits, high_halves));
}

inline __m256 load8(const Half* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// v rounded to bf16 and widened again, in registers, where no lane is NaN (infinities may be):
// the integer rounding of the f32 bits to nearest even, which carries into the exponent where it
// should and leaves infinity as it is.
inline __m256 round8_number(BFloat16, __m256 v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
    return _mm256_castsi256_ps(_mm256_and_si256(rounded, _mm256_set1_epi32(int(0xffff0000u))));
}

// The same for any v: to nearest even, NaN kept quiet, as to_bfloat16.
inline __m256 round8(BFloat16, __m256 v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    const __m256 quiet = _mm256_castsi256_ps(
        _mm256_and_si256(_mm256_or_si256(x, _mm256_set1_epi32(0x400000)), _mm256_set1_epi32(int(0xffff0000u))));
    return _mm256_blendv_ps(round8_number(BFloat16{}, v), quiet, nan);
}

// Stores v, whose lanes are bf16 values already (round8's results), by truncation.
inline void store8_exact(BFloat16* p, __m256 v) {
    const __m256i high = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(high), _mm256_extracti128_si256(high, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}

inline void store8(BFloat16* p, __m256 v) { store8_exact(p, round8(BFloat16{}, v)); }

// F16C rounds to nearest even, to infinity from 65520 on, and quiets NaN keeping its high payload
// bits: to_half, bit for bit.
inline void store8(Half* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

inline __m256 round8(Half, __m256 v) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline __m256 round8_number(Half, __m256 v) { return round8(Half{}, v); }
inline void store8_exact(Half* p, __m256 v) { store8(p, v); }

// n 16-bit cells widened into f32, and n f32 values rounded into 16-bit cells: eight at a time,
// the rest one by one, bit for bit as half.hpp's load and store.
template <class E>
void cells_to_f32(const E* from, float* to, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(to + i, load8(from + i));
    for (; i < n; ++i) to[i] = load(from[i]);
}

template <class E>
void f32_to_cells(const float* from, E* to, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) store8(to + i, _mm256_loadu_ps(from + i));
    for (; i < n; ++i) to[i] = store<E>(from[i]);
}

}  // namespace fluxion::backend::cpu

#else

#include <cstdint>

#include "cpu/half.hpp"

namespace fluxion::backend::cpu {

template <class E>
void cells_to_f32(const E* from, float* to, int64_t n) {
    for (int64_t i = 0; i < n; ++i) to[i] = load(from[i]);
}

template <class E>
void f32_to_cells(const float* from, E* to, int64_t n) {
    for (int64_t i = 0; i < n; ++i) to[i] = store<E>(from[i]);
}

}  // namespace fluxion::backend::cpu

#endif
