// bf16 convolutions on AMX tiles (conv_amx.hpp). A tile product C += A·B takes A as 16 rows of 32
// bf16 values and B as 16 rows of 16 pairs (the pairs that A's rows multiply, "VNNI" order), and
// adds 16 × 16 f32 sums; eight tile registers hold them.
//
//   forward          per image, 16 output pixels at a time: C[k][p] = Σ_i A[k][i] B[i][p] over the
//                    pairs of taps i, A the weight (packed once), B each pixel's two input values
//                    of each pair (ForwardPlan says how); two accumulators take turns, so that one
//                    block's sums are rounded and stored while the tiles work on the next.
//   backward_weight  gw[k][c][ky][kx]: C[kx][k] += A[kx][p] B[p][k] over the output pixels p of
//                    every image, 32 at a time, one accumulator tile per kernel row (c, ky). A's rows
//                    are read from x itself (WeightPlan says how); B is the output gradient, its
//                    pixels paired. Up to 6 accumulators stay in registers for the whole sum;
//                    threads take shares of the images, and their partial sums are added in a fixed
//                    order at the end.
//   backward_input   per image: the column matrix C[j][p] = Σ_k A[j][k] B[k][p], A the weight
//                    transposed (packed once), B the output gradient with its filters paired; then
//                    col2im, each input row summed in registers and rounded once into gx.
//
// Built where the compiler targets AMX-BF16 and AVX-512 BW (-march=native on such a CPU); the tile
// instructions need Linux's permission, which amx_usable() asks for.
#include "cpu/conv_amx.hpp"

// GCC 12's AVX-512 intrinsics pass an uninitialised vector as the unused source of their unmasked
// forms, which -Wmaybe-uninitialized reports once they are inlined here (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <atomic>

#include "cpu/conv_direct.hpp"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BW__) && defined(__x86_64__) && defined(__linux__)
#define FLUXION_AMX 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "cpu/half.hpp"
#include "cpu/half_simd.hpp"
#include "cpu/kernels.hpp"
#include "cpu/nonfinite.hpp"
#include "cpu/parallel.hpp"
#endif

namespace fluxion::backend::cpu {
namespace {
std::atomic<std::uint64_t> runs{0};
}  // namespace

std::uint64_t amx_conv_runs() { return runs.load(std::memory_order_relaxed); }

#if FLUXION_AMX

namespace {

constexpr int64_t kRows = 16;     // rows of a tile; f32 sums in an accumulator's row
constexpr int64_t kDepth = 32;    // bf16 values in a row of A (64 bytes)
constexpr int kAccumulators = 6;  // tiles 0-5; 6 holds A, 7 holds B
constexpr int64_t kMaxTaps = 8;   // of a kernel row (the direct kernels' shapes: at most 7)
constexpr int64_t kImages = 32;   // whose B tiles the weight gradient packs at a time

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

struct alignas(64) TileConfig {
    std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
    std::uint16_t bytes[16] = {};  // a row's bytes per tile
    std::uint8_t rows[16] = {};
    void set(int tile, int64_t r, int64_t b) {
        rows[tile] = std::uint8_t(r);
        bytes[tile] = std::uint16_t(b);
    }
};

// The tile instructions are asm statements that do not tell the compiler what memory they read: a
// barrier before them keeps the stores that packed their operands in place.
inline void packed() { asm volatile("" ::: "memory"); }

// The thread's tile configuration for a kernel's lifetime; released after, so that oneDNN's
// kernels, which load their own, find the tiles free.
class Tiles {
public:
    explicit Tiles(const TileConfig& c) {
        packed();
        _tile_loadconfig(&c);
    }
    ~Tiles() { _tile_release(); }
    Tiles(const Tiles&) = delete;
    Tiles& operator=(const Tiles&) = delete;
};

// Tile numbers are part of the instruction, so each accumulator is a case of its own.
#define FLUXION_AMX_CASES(X) X(0) X(1) X(2) X(3) X(4) X(5)
inline void zero_accumulator(int t) {
#define FLUXION_AMX_ZERO(i) \
    case i: _tile_zero(i); break;
    switch (t) { FLUXION_AMX_CASES(FLUXION_AMX_ZERO) }
#undef FLUXION_AMX_ZERO
}
// Accumulator t += tile 6 (A, loaded from a with rows `stride` bytes apart) · tile 7 (B).
inline void multiply_into(int t, const std::uint16_t* a, int64_t stride) {
    _tile_loadd(6, a, stride);
#define FLUXION_AMX_DP(i) \
    case i: _tile_dpbf16ps(i, 6, 7); break;
    switch (t) { FLUXION_AMX_CASES(FLUXION_AMX_DP) }
#undef FLUXION_AMX_DP
}
inline void load_accumulator(int t, const float* from, int64_t stride) {
#define FLUXION_AMX_LOAD(i) \
    case i: _tile_loadd(i, from, stride); break;
    switch (t) { FLUXION_AMX_CASES(FLUXION_AMX_LOAD) }
#undef FLUXION_AMX_LOAD
}
inline void store_accumulator(int t, float* to, int64_t stride) {
#define FLUXION_AMX_STORE(i) \
    case i: _tile_stored(i, to, stride); break;
    switch (t) { FLUXION_AMX_CASES(FLUXION_AMX_STORE) }
#undef FLUXION_AMX_STORE
}
#undef FLUXION_AMX_CASES

// v rounded to bf16 (the f32 value of the nearest-even bf16; NaN kept quiet), as to_bfloat16.
inline __m512 round_cells(__m512 v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                              _mm512_or_si512(x, _mm512_set1_epi32(0x400000)));
    return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(int(0xffff0000u))));
}

// The bf16 cells of v, whose lanes are bf16 values (round_cells's).
inline __m256i cells_of(__m512 v) { return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)); }

// The lanes of m of v rounded to bf16 cells at p.
inline void store_cells(std::uint16_t* p, __mmask16 m, __m512 v) {
    _mm256_mask_storeu_epi16(p, m, cells_of(round_cells(v)));
}

// ---- forward ----

// y[k][p] = Σ over pairs of taps i of A[k][i] · B[i][p]: A the weight, a kernel row's taps (c, ky,
// kx) paired (an odd row's last tap with zero); B's row i, for 16 output pixels, pairs each pixel's
// two input values, which are x[c][oy + ky][ox + kx] and the cell after it. Output rows are taken w
// wide, as in the weight gradient, so that a tap's 16 values are one run of x; the extra pixels'
// sums are dropped when the row is stored (compressed), so x past them may be anything.
struct ForwardPlan {
    int64_t pairs, chunks;       // pairs of taps; tiles of at most 16 pairs
    int64_t pixels, blocks;      // output pixels an image, w wide; blocks of 16
    int64_t plane, reach, last;  // an image's cells; the cells its tiles read; the last image's copy
    explicit ForwardPlan(const Conv2dShape& s) {
        pairs = s.c * s.r * ((s.s + 1) / 2), chunks = (pairs + kRows - 1) / kRows;
        pixels = s.oh * s.w, blocks = (pixels + kRows - 1) / kRows;
        plane = s.c * s.h * s.w;
        reach = (s.c - 1) * s.h * s.w + (s.r - 1) * s.w + s.s + blocks * kRows;
        last = round_up(std::max(plane, reach), 32);
    }
};

void forward(const Conv2dShape& s, const std::uint16_t* x, const std::uint16_t* w, const std::uint16_t* bias, bool relu,
             std::uint16_t* y) {
    const ForwardPlan p(s);
    const int64_t total = s.n * p.plane, ohw = s.oh * s.ow, crs = s.c * s.r * s.s, half = (s.s + 1) / 2;
    const int64_t work = s.n * s.k * ohw * crs;
    parallel_for(s.n, team_for(double(work)), [&](int64_t first, int64_t last) {
        // A (16 rows of 64 bytes a chunk), B (a tile a chunk, twice), C (two tiles of 16 × 16 f32),
        // the last image's copy, the blocks' masks. Each chunk's B has a place of its own: the tile
        // loads do not tell the compiler that they read it, so it may not be written over before
        // the next block's tile store (which does tell it).
        const Scratch scratch(std::size_t(3 * p.chunks * 1024 + 2048 + round_up(p.last * 2, 64) + p.blocks * 2));
        auto* a = scratch.as<std::uint32_t>();                       // a[chunk][k][pair]
        auto* b = a + p.chunks * 256;                                // b[parity][chunk][pair][pixel]
        auto* c = reinterpret_cast<float*>(b + 2 * p.chunks * 256);  // two tiles of sums
        auto* copy = reinterpret_cast<std::uint16_t*>(c + 512);
        std::memset(a, 0, std::size_t(p.chunks) * 1024);
        for (int64_t k = 0; k < s.k; ++k)
            for (int64_t i = 0; i < p.pairs; ++i) {
                const int64_t row = i / half, kx = i % half * 2;  // row = (c, ky)
                const std::uint16_t* wk = w + (k * s.c * s.r + row) * s.s;
                const std::uint32_t second = kx + 1 < s.s ? wk[kx + 1] : 0;
                a[(i / kRows * kRows + k) * kRows + i % kRows] = wk[kx] | second << 16;
            }
        // Where pair i's first tap (c, ky, kx) reads in an image; the last pair of a kernel row of odd
        // width has no second tap.
        int64_t offset[3 * kRows];
        bool second[3 * kRows];
        for (int64_t i = 0; i < p.pairs; ++i) {
            const int64_t row = i / half, kx = i % half * 2;
            offset[i] = (row / s.r * s.h + row % s.r) * s.w + kx;
            second[i] = kx + 1 < s.s;
        }
        // Each block's real pixels: those left of ow in their row, and inside the image.
        auto* reals = reinterpret_cast<__mmask16*>(copy + round_up(p.last, 32));
        for (int64_t q = 0; q < p.blocks; ++q) {
            __mmask16 real = 0;
            for (int64_t i = 0; i < kRows; ++i)
                if (q * kRows + i < p.pixels && (q * kRows + i) % s.w < s.ow) real |= __mmask16(1u << i);
            reals[q] = real;
        }
        float biases[kRows] = {};
        if (bias)
            for (int64_t k = 0; k < s.k; ++k) biases[k] = to_float(BFloat16{bias[k]});
        TileConfig config;
        config.set(0, kRows, 64);                           // C, even blocks
        config.set(7, kRows, 64);                           // C, odd blocks
        for (int64_t chunk = 0; chunk < p.chunks; ++chunk)  // A
            config.set(int(1 + chunk), kRows, 4 * std::min(kRows, p.pairs - chunk * kRows));
        for (int64_t chunk = 0; chunk < p.chunks; ++chunk)  // B
            config.set(int(4 + chunk), std::min(kRows, p.pairs - chunk * kRows), 64);
        const Tiles tiles(config);
        for (int64_t chunk = 0; chunk < p.chunks; ++chunk) {
            const std::uint32_t* at = a + chunk * 256;
            if (chunk == 0) _tile_loadd(1, at, 64);
            else if (chunk == 1) _tile_loadd(2, at, 64);
            else _tile_loadd(3, at, 64);
        }
        for (int64_t n = first; n < last; ++n) {
            const std::uint16_t* image = x + n * p.plane;
            if (n * p.plane + p.reach > total) {  // the tiles' rows would read past x
                std::memcpy(copy, image, std::size_t(p.plane) * 2);
                std::memset(copy + p.plane, 0, std::size_t(p.last - p.plane) * 2);
                image = copy;
            }
            std::uint16_t* out = y + n * s.k * ohw;
            int64_t written = 0;  // output pixels stored so far
            // Block q's sums go to accumulator 0 or 7 and to c's first or second half by parity,
            // and its B tiles to b's first or second half: the output of block q - 1 is stored while the
            // tiles work on block q, instead of waiting for each product.
            const auto emit = [&](int64_t q) {
                const float* sums = c + q % 2 * 256;
                const __mmask16 real = reals[q];
                for (int64_t k = 0; k < s.k; ++k) {
                    // The bias after the rounded sum, and relu after it, each rounded as the eager
                    // calls' results are (x < 0 ? 0 : x keeps NaN and -0).
                    __m512 r = round_cells(_mm512_loadu_ps(sums + k * kRows));
                    if (bias) r = round_cells(_mm512_add_ps(r, _mm512_set1_ps(biases[k])));
                    if (relu) r = _mm512_maskz_mov_ps(~_mm512_cmp_ps_mask(r, _mm512_setzero_ps(), _CMP_LT_OQ), r);
                    _mm256_mask_compressstoreu_epi16(out + k * ohw + written, real, cells_of(r));
                }
                written += __builtin_popcount(unsigned(real));
            };
            for (int64_t q = 0; q < p.blocks; ++q) {
                const int64_t p0 = q * kRows;
                const bool odd = q % 2;
                if (odd) _tile_zero(7);
                else _tile_zero(0);
                for (int64_t chunk = 0; chunk < p.chunks; ++chunk) {
                    std::uint32_t* pairs = b + (q % 2 * p.chunks + chunk) * 256;
                    const int64_t count = std::min(kRows, p.pairs - chunk * kRows);
                    for (int64_t r = 0; r < count; ++r) {
                        const int64_t i = chunk * kRows + r;
                        const std::uint16_t* in = image + offset[i] + p0;
                        const __m512i first_tap =
                            _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)));
                        const __m512i second_tap =
                            second[i]
                                ? _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 1)))
                                : _mm512_setzero_si512();
                        _mm512_storeu_si512(pairs + r * kRows,
                                            _mm512_or_si512(first_tap, _mm512_slli_epi32(second_tap, 16)));
                    }
                    packed();
                    if (chunk == 0) {
                        _tile_loadd(4, pairs, 64);
                        if (odd) _tile_dpbf16ps(7, 1, 4);
                        else _tile_dpbf16ps(0, 1, 4);
                    } else if (chunk == 1) {
                        _tile_loadd(5, pairs, 64);
                        if (odd) _tile_dpbf16ps(7, 2, 5);
                        else _tile_dpbf16ps(0, 2, 5);
                    } else {
                        _tile_loadd(6, pairs, 64);
                        if (odd) _tile_dpbf16ps(7, 3, 6);
                        else _tile_dpbf16ps(0, 3, 6);
                    }
                }
                if (odd) _tile_stored(7, c + 256, 64);
                else _tile_stored(0, c, 64);
                if (q > 0) emit(q - 1);
            }
            emit(p.blocks - 1);
        }
    });
}

// ---- backward_weight ----

// The weight gradient sums over output pixels taken as if output rows were as wide as input rows
// (w, not ow), the extra pixels' output gradient zero. Then the input pixels of tap (c, ky, kx) for
// a run of output pixels are one run of x's channel c, from row ky, column kx, and the taps kx = 0,
// 1, ... of a kernel row start one cell apart: a tile of A is S rows loaded straight from x with rows
// 2 bytes apart, and its accumulator holds gw[·][c][ky][kx] for every filter (rows kx, columns k).
// The extra pixels multiply x's next values by zero, which needs them finite (∞ · 0 is NaN):
// a call with a NaN or an infinity in x goes to the direct kernels. The last image's tiles would
// read past x, so it is copied first, with zeros after.
struct WeightPlan {
    int64_t pixels, span, blocks;     // output pixels an image, w wide; rounded to 32; blocks of 32
    int64_t rows, groups, per_group;  // kernel rows (c, ky); groups of at most 6, one accumulator each
    int64_t parts;                    // shares of the images, one a thread
    int64_t plane, last, reach;       // x's cells an image; the copy of the last image, with room
    int64_t b_bytes, task_bytes;      // the B tiles of a run of images; a share's scratch
    WeightPlan(const Conv2dShape& s) {
        pixels = s.oh * s.w, span = round_up(pixels, kDepth), blocks = span / kDepth;
        rows = s.c * s.r;
        groups = (rows + kAccumulators - 1) / kAccumulators;
        per_group = (rows + groups - 1) / groups;
        parts = std::clamp<int64_t>(threads(), 1, s.n);
        plane = s.c * s.h * s.w;
        reach =
            (s.c - 1) * s.h * s.w + (s.r - 1) * s.w + (s.s - 1) + span;  // cells a tile may read, from an image's start
        last = round_up(std::max(plane, reach), 32);
        b_bytes = std::min((s.n + parts - 1) / parts, kImages) * blocks * kRows * 64;
        // the B tiles of up to kImages images, the masks, the last image's copy, the sums (rows × S × 16 f32)
        task_bytes = b_bytes + round_up(blocks * 8, 64) + round_up(last * 2, 64) + round_up(rows * s.s * kRows * 4, 64);
    }
};

// The 16 × 16 transpose of 32-bit words held in r (r[i] becomes column i).
inline void transpose16(__m512i (&r)[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; ++i) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

// One share: images [n0, n1), every kernel row, into `sums` (rows × S × 16 f32: sums[c ky][kx][k]).
// False, having summed nothing, where x holds a NaN or an infinity in these images.
bool weight_task(const Conv2dShape& s, const WeightPlan& p, const std::uint16_t* x, const std::uint16_t* gy, int64_t n0,
                 int64_t n1, char* scratch) {
    if (any_nonfinite(reinterpret_cast<const BFloat16*>(x) + n0 * p.plane, (n1 - n0) * p.plane)) return false;
    auto* b = reinterpret_cast<std::uint32_t*>(scratch);  // per image and block, b[i][k]: pixels 2i, 2i + 1
    auto* valid = reinterpret_cast<__mmask32*>(scratch + p.b_bytes);
    auto* before = reinterpret_cast<std::uint32_t*>(valid + p.blocks);  // real pixels before each block
    auto* copy = reinterpret_cast<std::uint16_t*>(scratch + p.b_bytes + round_up(p.blocks * 8, 64));
    auto* sums = reinterpret_cast<float*>(reinterpret_cast<char*>(copy) + round_up(p.last * 2, 64));
    std::uint32_t seen = 0;
    for (int64_t q = 0; q < p.blocks; ++q) {
        __mmask32 m = 0;
        for (int64_t i = 0; i < kDepth; ++i)
            if (q * kDepth + i < p.pixels && (q * kDepth + i) % s.w < s.ow) m |= __mmask32(1) << i;
        valid[q] = m;
        before[q] = seen;
        seen += std::uint32_t(__builtin_popcount(m));
    }
    const int64_t ohw = s.oh * s.ow, total = s.n * p.plane;
    TileConfig config;
    for (int t = 0; t < kAccumulators; ++t) config.set(t, s.s, 64);
    config.set(6, s.s, 64);
    config.set(7, kRows, 64);
    const Tiles tiles(config);
    // Runs of up to kImages images, so that their B tiles stay few whatever the batch; the
    // accumulators are kept in `sums` from one run to the next.
    for (int64_t g0 = n0; g0 < n1; g0 += kImages) {
        const int64_t g1 = std::min(n1, g0 + kImages);
        // B: each block of the output gradient w wide (the extra pixels zero), its pixels paired.
        for (int64_t n = g0; n < g1; ++n)
            for (int64_t q = 0; q < p.blocks; ++q) {
                __m512i r[16];
                for (int64_t k = 0; k < 16; ++k)
                    r[k] = k < s.k ? _mm512_maskz_expandloadu_epi16(valid[q], gy + (n * s.k + k) * ohw + before[q])
                                   : _mm512_setzero_si512();
                transpose16(r);
                std::uint32_t* to = b + ((n - g0) * p.blocks + q) * kRows * kRows;
                for (int i = 0; i < 16; ++i) _mm512_storeu_si512(to + i * kRows, r[i]);
            }
        packed();
        for (int64_t first = 0; first < p.rows; first += p.per_group) {
            const int count = int(std::min(p.per_group, p.rows - first));
            for (int t = 0; t < count; ++t) {
                if (g0 == n0) zero_accumulator(t);
                else load_accumulator(t, sums + (first + t) * s.s * kRows, kRows * 4);
            }
            for (int64_t n = g0; n < g1; ++n) {
                const std::uint16_t* image = x + n * p.plane;
                if (n * p.plane + p.reach > total) {  // the tiles would read past x
                    std::memcpy(copy, image, std::size_t(p.plane) * 2);
                    std::memset(copy + p.plane, 0, std::size_t(p.last - p.plane) * 2);
                    image = copy;
                    packed();
                }
                for (int64_t q = 0; q < p.blocks; ++q) {
                    _tile_loadd(7, b + ((n - g0) * p.blocks + q) * kRows * kRows, 64);
                    for (int t = 0; t < count; ++t) {
                        const int64_t row = first + t, c = row / s.r, ky = row % s.r;
                        multiply_into(t, image + (c * s.h + ky) * s.w + q * kDepth, 2);
                    }
                }
            }
            for (int t = 0; t < count; ++t) store_accumulator(t, sums + (first + t) * s.s * kRows, kRows * 4);
        }
    }
    return true;
}

// False, having written nothing, where x holds a NaN or an infinity (WeightPlan says why).
bool weight_gradient(const Conv2dShape& s, const std::uint16_t* x, const std::uint16_t* gy, std::uint16_t* gw) {
    const WeightPlan p(s);
    const int64_t taps = p.rows * s.s, sums_at = p.task_bytes - round_up(taps * kRows * 4, 64);
    // The shares' scratch, then gw in f32 (k-major) for one rounding pass.
    const Scratch scratch(std::size_t(p.parts * p.task_bytes + s.k * taps * 4));
    char* base = scratch.as<char>();
    std::atomic<bool> finite{true};
    parallel_for(p.parts, p.parts, [&](int64_t begin, int64_t end) {
        for (int64_t part = begin; part < end; ++part)
            if (!weight_task(s, p, x, gy, s.n * part / p.parts, s.n * (part + 1) / p.parts, base + part * p.task_bytes))
                finite.store(false, std::memory_order_relaxed);
    });
    if (!finite.load(std::memory_order_relaxed)) return false;
    // The shares' sums in order, a tap's 16 filters at a time, transposed into gw's layout.
    auto* wide = reinterpret_cast<float*>(base + p.parts * p.task_bytes);
    const __mmask16 filters = __mmask16((1u << s.k) - 1);
    alignas(64) float lanes[kRows];
    for (int64_t j = 0; j < taps; ++j) {
        __m512 total = _mm512_setzero_ps();
        for (int64_t part = 0; part < p.parts; ++part)
            total = _mm512_add_ps(
                total,
                _mm512_loadu_ps(reinterpret_cast<const float*>(base + part * p.task_bytes + sums_at) + j * kRows));
        _mm512_mask_store_ps(lanes, filters, total);
        for (int64_t k = 0; k < s.k; ++k) wide[k * taps + j] = lanes[k];
    }
    f32_to_cells(wide, reinterpret_cast<BFloat16*>(gw), s.k * taps);
    return true;
}

// ---- backward_input ----

void input_gradient(const Conv2dShape& s, const std::uint16_t* gy, const std::uint16_t* w, std::uint16_t* gx) {
    const int64_t crs = s.c * s.r * s.s, ohw = s.oh * s.ow, span = round_up(ohw, kRows);
    const int64_t tiles = (crs + kRows - 1) / kRows, pairs = (s.k + 1) / 2;
    const int64_t a_cells = tiles * kRows * kDepth, b_words = pairs * span, col_floats = tiles * kRows * span;
    const int64_t work = s.n * s.k * ohw * crs;
    parallel_for(s.n, team_for(double(work)), [&](int64_t first, int64_t last) {
        const Scratch scratch(std::size_t(a_cells * 2 + b_words * 4 + col_floats * 4));
        auto* a = scratch.as<std::uint16_t>();                    // a[j][k] = w[k][j]
        auto* b = reinterpret_cast<std::uint32_t*>(a + a_cells);  // b[i][p]: filters 2i, 2i + 1 at pixel p
        auto* columns = reinterpret_cast<float*>(b + b_words);    // columns[j][p]
        // Lanes [kx, kx + ow) of an input row: where column rows shifted by kx land; all its lanes.
        const std::uint32_t all = std::uint32_t((std::uint64_t(1) << s.w) - 1);
        std::uint32_t shifted[kMaxTaps];
        for (int64_t kx = 0; kx < s.s; ++kx) shifted[kx] = ((std::uint64_t(1) << s.ow) - 1) << kx;
        std::memset(a, 0, std::size_t(a_cells) * 2);
        for (int64_t k = 0; k < s.k; ++k)
            for (int64_t j = 0; j < crs; ++j) a[j * kDepth + k] = w[k * crs + j];
        TileConfig config;
        config.set(0, kRows, 4 * pairs);  // A: 16 taps × the filters
        config.set(1, pairs, 64);         // B: the filters' pairs × 16 pixels
        config.set(2, kRows, 64);         // C
        const Tiles tiles_in_use(config);
        for (int64_t n = first; n < last; ++n) {
            const std::uint16_t* g = gy + n * s.k * ohw;
            for (int64_t i = 0; i < pairs; ++i)
                for (int64_t q = 0; q < span; q += 16) {
                    const int64_t left = std::min<int64_t>(16, ohw - q);
                    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
                    const __m512i even = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, g + 2 * i * ohw + q));
                    const __m512i odd =
                        2 * i + 1 < s.k ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, g + (2 * i + 1) * ohw + q))
                                        : _mm512_setzero_si512();
                    _mm512_storeu_si512(b + i * span + q, _mm512_or_si512(even, _mm512_slli_epi32(odd, 16)));
                }
            packed();
            for (int64_t q = 0; q < span; q += 16) {
                _tile_loadd(1, b + q, span * 4);
                for (int64_t t = 0; t < tiles; ++t) {
                    _tile_loadd(0, a + t * kRows * kDepth, kDepth * 2);
                    _tile_zero(2);
                    _tile_dpbf16ps(2, 0, 1);
                    _tile_stored(2, columns + t * kRows * span + q, span * 4);
                }
            }
            // col2im: input row iy sums, over the taps (ky, kx) whose output row oy = iy - ky
            // exists, column row (c, ky, kx) at output row oy shifted right by kx; the row is kept in
            // two vectors (w <= 32) and its shifted column rows are masked loads, so that no sum is
            // stored and loaded again.
            const auto col2im = [&](auto wide) {
                for (int64_t c = 0; c < s.c; ++c)
                    for (int64_t iy = 0; iy < s.h; ++iy) {
                        __m512 low = _mm512_setzero_ps(), high = _mm512_setzero_ps();
                        for (int64_t ky = std::max<int64_t>(0, iy - s.oh + 1); ky <= std::min<int64_t>(s.r - 1, iy);
                             ++ky) {
                            const float* col = columns + ((c * s.r + ky) * s.s) * span + (iy - ky) * s.ow;
                            for (int64_t kx = 0; kx < s.s; ++kx, col += span) {
                                low = _mm512_add_ps(low, _mm512_maskz_loadu_ps(__mmask16(shifted[kx]), col - kx));
                                if constexpr (wide.value)
                                    high = _mm512_add_ps(
                                        high, _mm512_maskz_loadu_ps(__mmask16(shifted[kx] >> 16), col - kx + 16));
                            }
                        }
                        std::uint16_t* to = gx + ((n * s.c + c) * s.h + iy) * s.w;
                        store_cells(to, __mmask16(all), low);
                        if constexpr (wide.value) store_cells(to + 16, __mmask16(all >> 16), high);
                    }
            };
            if (s.w > 16) col2im(std::true_type{});
            else col2im(std::false_type{});
        }
    });
}

}  // namespace

bool amx_usable() {
    static const bool usable = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
        if (!(d & (1u << 24)) || !(d & (1u << 22))) return false;  // AMX-TILE, AMX-BF16
        constexpr long kRequestPermission = 0x1023;                // ARCH_REQ_XCOMP_PERM
        constexpr long kTileData = 18;                             // XFEATURE_XTILEDATA
        return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
    }();
    return usable;
}

bool amx_conv2d_takes(ConvPass pass, const Conv2dShape& s) {
    if (!amx_usable() || !direct_conv2d_takes(pass, s)) return false;
    switch (pass) {
        case ConvPass::forward: return s.k <= kRows && ForwardPlan(s).chunks <= 3;
        case ConvPass::backward_weight: return s.k <= kRows;
        case ConvPass::backward_input: return s.k <= kDepth && s.s <= kMaxTaps;
    }
    return false;
}

bool amx_conv2d(ConvPass pass, const Conv2dShape& s, const void* a, const void* b, void* out, const void* bias,
                bool relu) {
    if (!amx_conv2d_takes(pass, s)) return false;
    const auto cells = [](const void* p) { return static_cast<const std::uint16_t*>(p); };
    if (pass == ConvPass::forward) {
        forward(s, cells(a), cells(b), cells(bias), relu, static_cast<std::uint16_t*>(out));
    } else if (pass == ConvPass::backward_weight) {
        if (!weight_gradient(s, cells(a), cells(b), static_cast<std::uint16_t*>(out))) return false;
    } else {
        input_gradient(s, cells(a), cells(b), static_cast<std::uint16_t*>(out));
    }
    runs.fetch_add(1, std::memory_order_relaxed);
    return true;
}

#else  // built without AMX-BF16: the direct kernels take these passes

bool amx_usable() { return false; }
bool amx_conv2d_takes(ConvPass, const Conv2dShape&) { return false; }
bool amx_conv2d(ConvPass, const Conv2dShape&, const void*, const void*, void*, const void*, bool) { return false; }

#endif

}  // namespace fluxion::backend::cpu
