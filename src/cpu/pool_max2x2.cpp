// 2×2 max pooling and its gradient (pool_max2x2.hpp), per pair of input rows: 16 input columns of
// each row are split into their even and odd columns (the windows' left and right cells), and 8
// windows are reduced, or compared with their maxima and the gradients interleaved back into
// place, at once; then 4 windows at a time in 128-bit registers, then one. pool.cpp's tiled passes
// take three trips through buffers for the gradient: this one took a third to a half of their time
// on LeNet-5's pools (BENCHMARKS.md, "Kernel choices").
#include "cpu/pool_max2x2.hpp"

#if defined(__AVX2__)

#include <immintrin.h>

#include <algorithm>

#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {
namespace {

// Lanes where v equals the maximum m, or both are NaN.
__m256 matches(__m256 v, __m256 m) {
    const __m256 nan = _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), _mm256_cmp_ps(m, m, _CMP_UNORD_Q));
    return _mm256_or_ps(_mm256_cmp_ps(v, m, _CMP_EQ_OQ), nan);
}

// The even and odd columns of 16 consecutive cells.
void split(const float* row, __m256& even, __m256& odd) {
    const __m256 a = _mm256_loadu_ps(row), b = _mm256_loadu_ps(row + 8);
    // Within each 128-bit lane the shuffles give columns 0 2 8 10 | 4 6 12 14; the permute puts the
    // lanes' 64-bit halves in order.
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

// Stores even and odd columns interleaved as 16 consecutive cells.
void join(float* row, __m256 even, __m256 odd) {
    const __m256 lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
    _mm256_storeu_ps(row, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(row + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}

// The same for 4 windows (8 cells a row), in 128-bit registers.
__m128 matches(__m128 v, __m128 m) {
    const __m128 nan = _mm_and_ps(_mm_cmpunord_ps(v, v), _mm_cmpunord_ps(m, m));
    return _mm_or_ps(_mm_cmpeq_ps(v, m), nan);
}
void split(const float* row, __m128& even, __m128& odd) {
    const __m128 a = _mm_loadu_ps(row), b = _mm_loadu_ps(row + 4);
    even = _mm_shuffle_ps(a, b, 0x88);
    odd = _mm_shuffle_ps(a, b, 0xDD);
}
void join(float* row, __m128 even, __m128 odd) {
    _mm_storeu_ps(row, _mm_unpacklo_ps(even, odd));
    _mm_storeu_ps(row + 4, _mm_unpackhi_ps(even, odd));
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
__m128 load(const float* p, __m128) { return _mm_loadu_ps(p); }
__m256 load(const float* p, __m256) { return _mm256_loadu_ps(p); }

// V::size windows of the row pair from window ox on (V: __m128 or __m256, 4 or 8 windows).
template <class V>
void windows(const float* top, const float* bottom, const float* m, const float* g, bool relu, float* out_top,
             float* out_bottom) {
    V a, b, c, d;
    split(top, a, b);
    split(bottom, c, d);
    const V mv = load(m, V{}), share = add(V{}, load(g, V{}));
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
void store(float* p, __m128 v) { _mm_storeu_ps(p, v); }
void store(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
float nan_max(float a, float b) { return (b > a) | (b != b) ? b : a; }

// The maxima of V::size windows: each column's rows first, then the window's two columns, as
// pool.cpp's tiled passes order them (a start from -∞ changes no result, so it is left out).
template <class V>
void window_maxima(const float* top, const float* bottom, float* out) {
    V a, b, c, d;
    split(top, a, b);
    split(bottom, c, d);
    store(out, nan_max(nan_max(a, c), nan_max(b, d)));
}

bool same(float v, float m) { return v == m || (v != v && m != m); }

// One window in scalar code: the row's last windows where fewer than 8 are left.
void window(const float* top, const float* bottom, float m, float g, bool relu, float* out_top, float* out_bottom) {
    const float share = 0.0f + g;
    const bool a = same(top[0], m), b = !a && same(top[1], m), c = !a && !b && same(bottom[0], m),
               d = !a && !b && !c && same(bottom[1], m);
    const auto take = [&](bool first, float x) { return first && (!relu || x > 0.0f) ? share : 0.0f; };
    out_top[0] = take(a, top[0]);
    out_top[1] = take(b, top[1]);
    out_bottom[0] = take(c, bottom[0]);
    out_bottom[1] = take(d, bottom[1]);
}

}  // namespace

bool max_pool_2x2_takes(const Pool2dShape& s) {
    return s.kh == 2 && s.kw == 2 && s.stride_h == 2 && s.stride_w == 2 && s.pad_h == 0 && s.pad_w == 0 &&
           s.oh * 2 <= s.h && s.ow * 2 == s.w && s.n >= 0 && s.c >= 0 && s.oh >= 0;
}

bool max_pool_2x2_forward(const Pool2dShape& s, const float* x, float* y) {
    if (!max_pool_2x2_takes(s)) return false;
    const int64_t planes = s.n * s.c, hw = s.h * s.w, ohw = s.oh * s.ow;
    parallel_for(planes, team_for(planes * hw), [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p)
            for (int64_t oy = 0; oy < s.oh; ++oy) {
                const float* top = x + p * hw + 2 * oy * s.w;
                const float* bottom = top + s.w;
                float* out = y + p * ohw + oy * s.ow;
                int64_t ox = 0;
                for (; ox + 8 <= s.ow; ox += 8) window_maxima<__m256>(top + 2 * ox, bottom + 2 * ox, out + ox);
                for (; ox + 4 <= s.ow; ox += 4) window_maxima<__m128>(top + 2 * ox, bottom + 2 * ox, out + ox);
                for (; ox < s.ow; ++ox)
                    out[ox] = nan_max(nan_max(top[2 * ox], bottom[2 * ox]), nan_max(top[2 * ox + 1], bottom[2 * ox + 1]));
            }
    });
    return true;
}

bool max_pool_2x2_backward(const Pool2dShape& s, const float* x, const float* y, const float* gy, float* gx,
                           bool relu) {
    if (!max_pool_2x2_takes(s)) return false;
    const int64_t planes = s.n * s.c, hw = s.h * s.w, ohw = s.oh * s.ow, covered = 2 * s.oh * s.w;
    parallel_for(planes, team_for(planes * hw), [&](int64_t first, int64_t last) {
        for (int64_t p = first; p < last; ++p) {
            for (int64_t oy = 0; oy < s.oh; ++oy) {
                const float* top = x + p * hw + 2 * oy * s.w;
                const float* bottom = top + s.w;
                const float* m = y + p * ohw + oy * s.ow;
                const float* g = gy + p * ohw + oy * s.ow;
                float* out_top = gx + p * hw + 2 * oy * s.w;
                float* out_bottom = out_top + s.w;
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
            std::fill(gx + p * hw + covered, gx + (p + 1) * hw, 0.0f);
        }
    });
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
}  // namespace fluxion::backend::cpu

#endif
