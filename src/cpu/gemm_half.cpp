// f16 and bf16 matrix products in the manner of BLIS (gemm_half.hpp): op(B) is packed in blocks of
// kKC rows × kNC columns and op(A) in blocks of kMC rows × kKC, both as f32, converted while they
// are packed; a 6 × 16 micro-kernel keeps its tile of C in twelve AVX2 registers through a block's
// depth. Products deeper than kKC keep their partial sums in an f32 copy of C between blocks; the
// last block rounds each sum once into C.
//
// Why not the libraries: on CPUs without bf16 instructions, oneDNN (2.x) and OpenBLAS offer no
// 16-bit product faster than their f32 one, and widening both operands into f32 copies first, then
// rounding the f32 result, cost the bf16 wide MLP's step a tenth of its time on an AMD EPYC Zen 3
// (BENCHMARKS.md): every operand element was read as 16 bits, written and read again as 32.
//
// Built where the compiler targets AVX2 with FMA and F16C; elsewhere gemm_half declines. Preferred
// only without AVX-512 (gemm_half_preferred).
#include "cpu/gemm_half.hpp"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <omp.h>

#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "cpu/half.hpp"
#include "cpu/half_simd.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"
#include "fluxion/error.hpp"

namespace fluxion::backend::cpu {
namespace {

constexpr int64_t kMR = 6;     // rows of a micro-kernel tile
constexpr int64_t kNR = 16;    // columns: two vectors of 8
constexpr int64_t kKC = 256;   // depth of a block: a packed B micro-panel, 256 × 16 floats (16 KiB), stays in L1
constexpr int64_t kMC = 96;    // rows of a packed A block, 96 × 256 floats (96 KiB): L2
constexpr int64_t kNC = 2048;  // columns of a packed B block, 256 × 2048 floats (2 MiB): L3
constexpr int64_t kSlack = 8;  // floats after a packed A block, where the last 8-wide store of pack_a lands

// r[q] becomes column q of the 8 × 8 matrix whose rows were r[0..7].
inline void transpose8(__m256 (&r)[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// A row-major matrix of T, or its transpose: at(i, j) is element (i, j) of op(X), which has `rows`
// rows.
template <class T>
struct Operand {
    const T* data;
    int64_t ld;
    bool trans;
    int64_t rows;
    const T* at(int64_t i, int64_t j) const { return trans ? data + j * ld + i : data + i * ld + j; }
};

// ---- packing ----

// Rows [p0, p0 + kc) and columns [j0, j0 + nc) of op(B) as f32 micro-panels of kNR columns, each
// kc × kNR row-major, the last one padded with zeros.
template <class T>
void pack_b(const Operand<T>& b, int64_t p0, int64_t j0, int64_t kc, int64_t nc, float* dst) {
    const int64_t whole = b.trans ? 0 : nc / kNR * kNR;
    if (whole > 0)  // rows of op(B) are rows in memory: read each once, front to back, into every panel
        for (int64_t p = 0; p < kc; ++p) {
            const T* row = b.at(p0 + p, j0);
            for (int64_t j = 0; j < whole; j += kNR) {
                _mm256_store_ps(dst + j * kc + p * kNR, load8(row + j));
                _mm256_store_ps(dst + j * kc + p * kNR + 8, load8(row + j + 8));
            }
        }
    for (int64_t j = whole; j < nc; j += kNR) {
        const int64_t cols = std::min(kNR, nc - j);
        float* panel = dst + j * kc;
        int64_t p = 0;
        if (b.trans && cols == kNR) {  // columns of op(B) are rows in memory: transpose 8 × 8 blocks
            for (; p + 8 <= kc; p += 8)
                for (int64_t h = 0; h < kNR; h += 8) {
                    __m256 r[8];
                    for (int q = 0; q < 8; ++q) r[q] = load8(b.at(p0 + p, j0 + j + h + q));
                    transpose8(r);
                    for (int q = 0; q < 8; ++q) _mm256_store_ps(panel + (p + q) * kNR + h, r[q]);
                }
        }
        for (; p < kc; ++p)
            for (int64_t q = 0; q < kNR; ++q) panel[p * kNR + q] = q < cols ? load(*b.at(p0 + p, j0 + j + q)) : 0.0f;
    }
}

// Rows [i0, i0 + mc) and columns [p0, p0 + kc) of op(A) as f32 micro-panels of kMR rows, each
// stored column after column (kc × kMR), the last one padded with zeros. Writes up to kSlack floats
// past the end.
template <class T>
void pack_a(const Operand<T>& a, int64_t i0, int64_t p0, int64_t mc, int64_t kc, float* dst) {
    int64_t i = 0;
    if (a.trans) {
        // Columns of op(A) are rows in memory: each read once, front to back, 8 elements into each
        // panel (the next column overwrites the two beyond its 6 rows; they still lie in op(A)),
        // the last column of each panel exactly, so as not to write into the next panel.
        int64_t whole = 0;
        while (whole + kMR <= mc && i0 + whole + 8 <= a.rows) whole += kMR;
        for (int64_t p = 0; p < kc; ++p) {
            const T* column = a.at(i0, p0 + p);
            for (int64_t w = 0; w < whole; w += kMR) {
                float* to = dst + w * kc + p * kMR;
                if (p + 1 < kc) _mm256_storeu_ps(to, load8(column + w));
                else
                    for (int64_t q = 0; q < kMR; ++q) to[q] = load(column[w + q]);
            }
        }
        i = whole;
    }
    for (dst += i * kc; i < mc; i += kMR, dst += kc * kMR) {
        const int64_t rows = std::min(kMR, mc - i);
        int64_t p = 0;
        if (rows == kMR && !a.trans) {
            // Rows of op(A) are rows in memory: 6 of them × 8 columns transposed at a time, each
            // column stored 8 wide, its last two floats overwritten by the next column.
            for (; p + 8 <= kc; p += 8) {
                __m256 r[8];
                for (int q = 0; q < kMR; ++q) r[q] = load8(a.at(i0 + i + q, p0 + p));
                r[6] = r[7] = _mm256_setzero_ps();
                transpose8(r);
                for (int q = 0; q < 8; ++q) _mm256_storeu_ps(dst + (p + q) * kMR, r[q]);
            }
        }
        for (; p < kc; ++p)
            for (int64_t q = 0; q < kMR; ++q) dst[p * kMR + q] = q < rows ? load(*a.at(i0 + i + q, p0 + p)) : 0.0f;
    }
}

// ---- the micro-kernel ----

// Where a tile's sums go: C itself after the last block of the depth, the f32 partial sums w (n
// wide) before it.
template <class T>
struct Out {
    T* c;
    int64_t ldc;
    float* w;
    int64_t ldw;
    float alpha, beta;
    bool first, last;
};

// v = alpha × (this block's sum) + (the previous blocks' sums, or beta C), into w or, rounded, C.
template <class T>
inline __m256 finish8(__m256 sum, const Out<T>& o, int64_t i, int64_t j) {
    __m256 v = _mm256_mul_ps(sum, _mm256_set1_ps(o.alpha));
    if (!o.first) v = _mm256_add_ps(v, _mm256_loadu_ps(o.w + i * o.ldw + j));
    else if (o.beta != 0.0f) v = _mm256_fmadd_ps(_mm256_set1_ps(o.beta), load8(o.c + i * o.ldc + j), v);
    return v;
}

template <class T>
inline float finish1(float sum, const Out<T>& o, int64_t i, int64_t j) {
    float v = o.alpha * sum;
    if (!o.first) v += o.w[i * o.ldw + j];
    else if (o.beta != 0.0f) v += o.beta * load(o.c[i * o.ldc + j]);
    return v;
}

// The tile of rows [i, i + rows) and columns [j, j + cols) of C: kc steps of a rank-1 update of
// twelve accumulators by a column of the A panel (broadcast) and a row of the B panel.
template <class T>
[[gnu::noinline]] void tile(int64_t kc, const float* a, const float* b, const Out<T>& o, int64_t i, int64_t j,
                            int64_t rows, int64_t cols) {
    __m256 acc[kMR][2];
    #pragma GCC unroll 6
    for (auto& row : acc) row[0] = row[1] = _mm256_setzero_ps();
    #pragma GCC unroll 4
    for (int64_t p = 0; p < kc; ++p) {
        const __m256 b0 = _mm256_load_ps(b + p * kNR), b1 = _mm256_load_ps(b + p * kNR + 8);
        #pragma GCC unroll 6
        for (int r = 0; r < kMR; ++r) {
            const __m256 ar = _mm256_broadcast_ss(a + p * kMR + r);
            acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
        }
    }
    if (rows == kMR && cols == kNR) {
        // Unrolled by hand: an accumulator indexed by a loop variable would live in memory, and the
        // compiler then stores all twelve at every step of the loop above.
        const auto put = [&](__m256 sum, int64_t r, int64_t h) {
            const __m256 v = finish8(sum, o, i + r, j + 8 * h);
            if (o.last) store8(o.c + (i + r) * o.ldc + j + 8 * h, v);
            else _mm256_storeu_ps(o.w + (i + r) * o.ldw + j + 8 * h, v);
        };
        put(acc[0][0], 0, 0), put(acc[0][1], 0, 1), put(acc[1][0], 1, 0), put(acc[1][1], 1, 1);
        put(acc[2][0], 2, 0), put(acc[2][1], 2, 1), put(acc[3][0], 3, 0), put(acc[3][1], 3, 1);
        put(acc[4][0], 4, 0), put(acc[4][1], 4, 1), put(acc[5][0], 5, 0), put(acc[5][1], 5, 1);
        return;
    }
    alignas(32) float sums[kMR][kNR];
    #pragma GCC unroll 6
    for (int r = 0; r < kMR; ++r) {
        _mm256_store_ps(sums[r], acc[r][0]);
        _mm256_store_ps(sums[r] + 8, acc[r][1]);
    }
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t q = 0; q < cols; ++q) {
            const float v = finish1(sums[r][q], o, i + r, j + q);
            if (o.last) o.c[(i + r) * o.ldc + j + q] = store<T>(v);
            else o.w[(i + r) * o.ldw + j + q] = v;
        }
}

// ---- a part of C on one thread ----

struct Problem {
    int64_t m, n, k;
    float alpha, beta;
};

constexpr int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// This thread's packing buffer, at least `floats` long and 64-byte aligned, kept for its next
// product (a replayed step allocates nothing). Each thread of a product takes its own here, not
// from a share of one buffer by omp_get_thread_num(): called inside another parallel region (a
// batch split by product), that number is the outer region's.
float* packing_buffer(int64_t floats) {
    struct Kept {
        float* data = nullptr;
        int64_t floats = 0;
        ~Kept() { free(0, data); }
    };
    thread_local Kept kept;
    if (kept.floats < floats) {
        float* grown = static_cast<float*>(alloc(0, std::size_t(floats) * sizeof(float)));
        free(0, kept.data);
        kept.data = grown;
        kept.floats = floats;
    }
    return kept.data;
}

// Rows [i0, i1) and columns [j0, j1) of C, with this thread's packing buffers.
template <class T>
void run(const Problem& pr, const Operand<T>& a, const Operand<T>& b, T* c, int64_t ldc, float* w, int64_t i0,
         int64_t i1, int64_t j0, int64_t j1, float* packed_a, float* packed_b) {
    for (int64_t jc = j0; jc < j1; jc += kNC) {
        const int64_t nc = std::min(kNC, j1 - jc);
        for (int64_t pc = 0; pc < pr.k; pc += kKC) {
            const int64_t kc = std::min(kKC, pr.k - pc);
            const Out<T> o{c, ldc, w, pr.n, pr.alpha, pr.beta, pc == 0, pc + kc == pr.k};
            pack_b(b, pc, jc, kc, nc, packed_b);
            for (int64_t ic = i0; ic < i1; ic += kMC) {
                const int64_t mc = std::min(kMC, i1 - ic);
                pack_a(a, ic, pc, mc, kc, packed_a);
                for (int64_t jr = 0; jr < nc; jr += kNR)
                    for (int64_t ir = 0; ir < mc; ir += kMR)
                        tile(kc, packed_a + ir * kc, packed_b + jr * kc, o, ic + ir, jc + jr, std::min(kMR, mc - ir),
                             std::min(kNR, nc - jr));
            }
        }
    }
}

template <class T>
void product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
             const T* b, int64_t ldb, float beta, T* c, int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) {  // C = beta C
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
                c[i * ldc + j] = store<T>(beta == 0.0f ? 0.0f : beta * load(c[i * ldc + j]));
        return;
    }
    const Problem pr{m, n, k, alpha, beta};
    const Operand<T> oa{a, lda, trans_a, m}, ob{b, ldb, trans_b, k};
    // Threads split C by columns, in whole micro-panels, or by rows where C is taller than wide;
    // each packs its own blocks.
    const double flops = 2.0 * double(m) * double(n) * double(k);
    const bool by_columns = n >= m;
    const int64_t units = by_columns ? (n + kNR - 1) / kNR : (m + kMR - 1) / kMR;
    const int64_t partial = k > kKC ? m * n : 0;
    Scratch scratch(std::size_t(partial) * sizeof(float));
    float* w = scratch.as<float>();
    parallel_for(units, team_for(flops, gemm_split_min()), [&](int64_t first, int64_t last) {
        const int64_t j0 = by_columns ? first * kNR : 0, j1 = by_columns ? std::min(last * kNR, n) : n;
        const int64_t i0 = by_columns ? 0 : first * kMR, i1 = by_columns ? m : std::min(last * kMR, m);
        const int64_t a_floats = round_up(kMC * kKC + kSlack, 16);
        float* packed_a = packing_buffer(a_floats + kKC * round_up(std::min(j1 - j0, kNC), kNR));
        run(pr, oa, ob, c, ldc, w, i0, i1, j0, j1, packed_a, packed_a + a_floats);
    });
}

}  // namespace

// With AVX-512 the f32 libraries run 512-bit kernels, twice this one's width: there the widened
// product is the faster one (a 512-bit version of this kernel is unwritten and unmeasured).
bool gemm_half_preferred() {
    static const bool packed = [] {
        const char* chosen = std::getenv("FLUXION_HALF_GEMM");
        if (!chosen || !*chosen) return !__builtin_cpu_supports("avx512f");
        if (strcasecmp(chosen, "packed") == 0) return true;
        if (strcasecmp(chosen, "widen") == 0) return false;
        throw ValueError(std::string("FLUXION_HALF_GEMM=") + chosen + " names no kernel: packed or widen");
    }();
    return packed;
}

bool gemm_half(DType t, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
               int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc) {
    if (t == DType::bf16)
        product(trans_a, trans_b, m, n, k, alpha, static_cast<const BFloat16*>(a), lda,
                static_cast<const BFloat16*>(b), ldb, beta, static_cast<BFloat16*>(c), ldc);
    else if (t == DType::f16)
        product(trans_a, trans_b, m, n, k, alpha, static_cast<const Half*>(a), lda, static_cast<const Half*>(b), ldb,
                beta, static_cast<Half*>(c), ldc);
    else return false;
    return true;
}

}  // namespace fluxion::backend::cpu

#else

namespace fluxion::backend::cpu {

bool gemm_half_preferred() { return false; }

bool gemm_half(DType, bool, bool, int64_t, int64_t, int64_t, float, const void*, int64_t, const void*, int64_t, float,
               void*, int64_t) {
    return false;
}

}  // namespace fluxion::backend::cpu

#endif
