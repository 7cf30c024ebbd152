// 2×2 max pooling and its gradient (pool_max2x2.hpp) in f32, bf16 or f16 cells, per pair of input
// rows: 16 input columns of each row are split into their even and odd columns (the windows' left
// and right cells), and 8 windows are reduced, or compared with their maxima and the gradients
// interleaved back into place, at once; then 4 windows at a time in 128-bit registers, then one.
// pool.cpp's tiled passes take three trips through buffers for the gradient: this one took a third
// to a half of their time on LeNet-5's pools (BENCHMARKS.md, "Kernel choices").
#include "cpu/pool_max2x2.hpp"

#if defined(__AVX2__)

#include <immintrin.h>

#include <algorithm>

#include "cpu/half.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {
namespace {

// Lanes where v equals the maximum m, or both are NaN.
__m256 matches(__m256 v, __m256 m) {
    const __m256 nan = _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(m, m, _CMP_UNORD_Q));
    return _mm256_or_ps(_mm256_cmp_ps(v, m, _CMP_EQ_OQ), nan);
}

// Cells of f32, bf16 or f16 as f32 vectors, and back. Pooling moves values and computes none but
// 0 + g, so every f32 result is a value of the cells' type, and the narrowing is exact (bf16 by
// truncation, f16 by F16C's rounding).
__m256 cells(const float* p, __m256) { return _mm256_loadu_ps(p); }
__m128 cells(const float* p, __m128) { return _mm_loadu_ps(p); }
void put(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
void put(float* p, __m128 v) { _mm_storeu_ps(p, v); }
__m256 cells(const BFloat16* p, __m256) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
__m128 cells(const BFloat16* p, __m128) {
    const __m128i bits = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(bits), 16));
}
void put(BFloat16* p, __m256 v) {
    const __m256i high = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(high), _mm256_extracti128_si256(high, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}
void put(BFloat16* p, __m128 v) {
    const __m128i high = _mm_srli_epi32(_mm_castps_si128(v), 16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi32(high, high));
}
#if defined(__F16C__)
__m256 cells(const Half* p, __m256) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
__m128 cells(const Half* p, __m128) { return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
void put(Half* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
void put(Half* p, __m128 v) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
#endif

// The even and odd columns of 16 consecutive cells.
template <class E> void split(const E* row, __m256& even, __m256& odd) {
    const __m256 a = cells(row, __m256{}), b = cells(row + 8, __m256{});
    // Within each 128-bit lane the shuffles give columns 0 2 8 10 | 4 6 12 14; the permute puts the
    // lanes' 64-bit halves in order.
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

// Stores even and odd columns interleaved as 16 consecutive cells.
template <class E> void join(E* row, __m256 even, __m256 odd) {
    const __m256 lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
    put(row, _mm256_permute2f128_ps(lo, hi, 0x20));
    put(row + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}

// bf16 cells need no shuffles: each 32-bit lane of a load holds an even cell in its low half and
// the odd one after it in its high half, so a shift or a mask gives either as an f32, in order.
void split(const BFloat16* row, __m256& even, __m256& odd) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
    odd = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(int(0xffff0000u))));
}
void join(BFloat16* row, __m256 even, __m256 odd) {
    const __m256i bits = _mm256_or_si256(_mm256_srli_epi32(_mm256_castps_si256(even), 16), _mm256_castps_si256(odd));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), bits);
}

// The same for 4 windows (8 cells a row), in 128-bit registers.
__m128 matches(__m128 v, __m128 m) {
    const __m128 nan = _mm_and_ps(_mm_cmpunord_ps(v, v), _mm_cmpunord_ps(m, m));
    return _mm_or_ps(_mm_cmpeq_ps(v, m), nan);
}
template <class E> void split(const E* row, __m128& even, __m128& odd) {
    const __m128 a = cells(row, __m128{}), b = cells(row + 4, __m128{});
    even = _mm_shuffle_ps(a, b, 0x88);
    odd = _mm_shuffle_ps(a, b, 0xDD);
}
template <class E> void join(E* row, __m128 even, __m128 odd) {
    put(row, _mm_unpacklo_ps(even, odd));
    put(row + 4, _mm_unpackhi_ps(even, odd));
}
void split(const BFloat16* row, __m128& even, __m128& odd) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row));
    even = _mm_castsi128_ps(_mm_slli_epi32(x, 16));
    odd = _mm_castsi128_ps(_mm_and_si128(x, _mm_set1_epi32(int(0xffff0000u))));
}
void join(BFloat16* row, __m128 even, __m128 odd) {
    const __m128i bits = _mm_or_si128(_mm_srli_epi32(_mm_castps_si128(even), 16), _mm_castps_si128(odd));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(row), bits);
}
__m128 gt_zero(__m128 v) { return _mm_cmpgt_ps(v, _mm_setzero_ps()); }
__m256 gt_zero(__m256 v) { return _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ); }
__m128 add(__m128 a, __m128 b) { return _mm_add_ps(a, b); }
__m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
__m128 both(__m128 a, __m128 b) { return _mm_and_ps(a, b); }
__m256 both(__m256 a, __m256 b) { return _mm256_and_ps(a, b); }
__m128 either(__m128 a, __m128 b) { return _mm_or_ps(a, b); }
__m256 either(__m256 a, __m256 b) { return _mm256_or_ps(a, b); }
__m128 not_first(__m128 a, __m128 b) { return _mm_andnot_ps(a, b); }
__m256 not_first(__m256 a, __m256 b) { return _mm256_andnot_ps(a, b); }

// V::size windows of the row pair from window ox on (V: __m128 or __m256, 4 or 8 windows).
template <class V, class E>
void windows(const E* top, const E* bottom, const E* m, const E* g, bool relu, E* out_top, E* out_bottom) {
    V a, b, c, d;
    split(top, a, b);
    split(bottom, c, d);
    const V mv = cells(m, V{}), share = add(V{}, cells(g, V{}));
    // The first cell in row-major order that holds the maximum takes the gradient.
    const V ta = matches(a, mv);
    V taken = ta;
    const V tb = not_first(taken, matches(b, mv));
    taken = either(taken, tb);
    const V tc = not_first(taken, matches(c, mv));
    taken = either(taken, tc);
    const V td = not_first(taken, matches(d, mv));
    const auto take = [&](V t, V v) { return both(relu ? both(t, gt_zero(v)) : t, share); };
    join(out_top, take(ta, a), take(tb, b));
    join(out_bottom, take(tc, c), take(td, d));
}

// pool.cpp's nan_max: b where b > a or b is NaN, else a.
__m128 nan_max(__m128 a, __m128 b) { return _mm_blendv_ps(a, b, _mm_or_ps(_mm_cmpgt_ps(b, a), _mm_cmpunord_ps(b, b))); }
__m256 nan_max(__m256 a, __m256 b) {
    return _mm256_blendv_ps(a, b, _mm256_or_ps(_mm256_cmp_ps(b, a, _CMP_GT_OQ), _mm256_cmp_ps(b, b, _CMP_UNORD_Q)));
}
float nan_max(float a, float b) { return (b > a) | (b != b) ? b : a; }

// The maxima of V::size windows: each column's rows first, then the window's two columns, as
// pool.cpp's tiled passes order them (a start from -∞ changes no result, so it is left out).
template <class V, class E> void window_maxima(const E* top, const E* bottom, E* out) {
    V a, b, c, d;
    split(top, a, b);
    split(bottom, c, d);
    put(out, nan_max(nan_max(a, c), nan_max(b, d)));
}

bool same(float v, float m) { return v == m || (v != v && m != m); }

// One window in scalar code: the row's last windows where fewer than 8 are left.
template <class E>
void window(const E* top, const E* bottom, E max, E grad, bool relu, E* out_top, E* out_bottom) {
    const float m = cpu::load(max), share = 0.0f + cpu::load(grad);
    const float x[4] = {cpu::load(top[0]), cpu::load(top[1]), cpu::load(bottom[0]), cpu::load(bottom[1])};
    const bool a = same(x[0], m), b = !a && same(x[1], m), c = !a && !b && same(x[2], m),
               d = !a && !b && !c && same(x[3], m);
    const auto take = [&](bool first, float v) { return cpu::store<E>(first && (!relu || v > 0.0f) ? share : 0.0f); };
    out_top[0] = take(a, x[0]);
    out_top[1] = take(b, x[1]);
    out_bottom[0] = take(c, x[2]);
    out_bottom[1] = take(d, x[3]);
}

// The kernels for cells of type E.
template <class E> void forward(const Pool2dShape& s, const E* x, E* y) {
    const int64_t planes = s.n * s.c, hw = s.h * s.w, ohw = s.oh * s.ow;
    parallel_for(planes, team_for(planes * hw), [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p)
            for (int64_t oy = 0; oy < s.oh; ++oy) {
                const E* top = x + p * hw + 2 * oy * s.w;
                const E* bottom = top + s.w;
                E* out = y + p * ohw + oy * s.ow;
                int64_t ox = 0;
                for (; ox + 8 <= s.ow; ox += 8) window_maxima<__m256>(top + 2 * ox, bottom + 2 * ox, out + ox);
                for (; ox + 4 <= s.ow; ox += 4) window_maxima<__m128>(top + 2 * ox, bottom + 2 * ox, out + ox);
                for (; ox < s.ow; ++ox) {
                    const float a = cpu::load(top[2 * ox]), b = cpu::load(bottom[2 * ox]);
                    const float c = cpu::load(top[2 * ox + 1]), d = cpu::load(bottom[2 * ox + 1]);
                    out[ox] = cpu::store<E>(nan_max(nan_max(a, b), nan_max(c, d)));
                }
            }
    });
}

template <class E> void backward(const Pool2dShape& s, const E* x, const E* y, const E* gy, E* gx, bool relu) {
    const int64_t planes = s.n * s.c, hw = s.h * s.w, ohw = s.oh * s.ow, covered = 2 * s.oh * s.w;
    parallel_for(planes, team_for(planes * hw), [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p) {
            for (int64_t oy = 0; oy < s.oh; ++oy) {
                const E* top = x + p * hw + 2 * oy * s.w;
                const E* bottom = top + s.w;
                const E* m = y + p * ohw + oy * s.ow;
                const E* g = gy + p * ohw + oy * s.ow;
                E* out_top = gx + p * hw + 2 * oy * s.w;
                E* out_bottom = out_top + s.w;
                int64_t ox = 0;
                for (; ox + 8 <= s.ow; ox += 8)
                    windows<__m256>(top + 2 * ox, bottom + 2 * ox, m + ox, g + ox, relu, out_top + 2 * ox,
                                    out_bottom + 2 * ox);
                for (; ox + 4 <= s.ow; ox += 4)
                    windows<__m128>(top + 2 * ox, bottom + 2 * ox, m + ox, g + ox, relu, out_top + 2 * ox,
                                    out_bottom + 2 * ox);
                for (; ox < s.ow; ++ox)
                    window(top + 2 * ox, bottom + 2 * ox, m[ox], g[ox], relu, out_top + 2 * ox, out_bottom + 2 * ox);
            }
            std::fill(gx + p * hw + covered, gx + (p + 1) * hw, cpu::store<E>(0.0f));
        }
    });
}

}  // namespace

bool max_pool_2x2_takes(const Pool2dShape& s) {
    return s.kh == 2 && s.kw == 2 && s.stride_h == 2 && s.stride_w == 2 && s.pad_h == 0 && s.pad_w == 0 &&
           s.oh * 2 <= s.h && s.ow * 2 == s.w && s.n >= 0 && s.c >= 0 && s.oh >= 0;
}

bool max_pool_2x2_forward(const Pool2dShape& s, const float* x, float* y) {
    if (!max_pool_2x2_takes(s)) return false;
    forward(s, x, y);
    return true;
}

bool max_pool_2x2_backward(const Pool2dShape& s, const float* x, const float* y, const float* gy, float* gx,
                           bool relu) {
    if (!max_pool_2x2_takes(s)) return false;
    backward(s, x, y, gy, gx, relu);
    return true;
}

bool max_pool_2x2_forward(DType t, const Pool2dShape& s, const void* x, void* y) {
    if (!max_pool_2x2_takes(s)) return false;
    if (t == DType::bf16) forward(s, static_cast<const BFloat16*>(x), static_cast<BFloat16*>(y));
#if defined(__F16C__)
    else if (t == DType::f16) forward(s, static_cast<const Half*>(x), static_cast<Half*>(y));
#endif
    else return false;
    return true;
}

bool max_pool_2x2_backward(DType t, const Pool2dShape& s, const void* x, const void* y, const void* gy, void* gx,
                           bool relu) {
    if (!max_pool_2x2_takes(s)) return false;
    if (t == DType::bf16)
        backward(s, static_cast<const BFloat16*>(x), static_cast<const BFloat16*>(y), static_cast<const BFloat16*>(gy),
                 static_cast<BFloat16*>(gx), relu);
#if defined(__F16C__)
    else if (t == DType::f16)
        backward(s, static_cast<const Half*>(x), static_cast<const Half*>(y), static_cast<const Half*>(gy),
                 static_cast<Half*>(gx), relu);
#endif
    else return false;
    return true;
}

}  // namespace fluxion::backend::cpu

#else  // no AVX2: pool.cpp's passes compute it

namespace fluxion::backend::cpu {
bool max_pool_2x2_takes(const Pool2dShape&) { return false; }
bool max_pool_2x2_forward(const Pool2dShape&, const float*, float*) { return false; }
bool max_pool_2x2_backward(const Pool2dShape&, const float*, const float*, const float*, float*, bool) {
    return false;
}
bool max_pool_2x2_forward(DType, const Pool2dShape&, const void*, void*) { return false; }
bool max_pool_2x2_backward(DType, const Pool2dShape&, const void*, const void*, const void*, void*, bool) {
    return false;
}
}  // namespace fluxion::backend::cpu

#endif
