// Direct convolutions on NCHW (conv_direct.hpp). Each pass keeps a tile of its result in vector
// registers for the whole reduction and reads its operands straight from the tensors:
//
//   forward          y row (k, oy): KB output channels × the row's 8-pixel vectors; for every
//                    input channel and tap, one load of the shifted input row per vector, and one
//                    fused multiply-add per channel with the tap's weight broadcast.
//   backward_weight  gw (k, c, ky, ·): KB filters × the S taps of a weight row, summed over images
//                    and output pixels; per 8 output pixels, one load of each filter's output
//                    gradient and of the S shifted input segments, KB × S multiply-adds.
//   backward_input   per image and input channel, its rows of the column matrix (the product of
//                    the transposed weight with the output gradient, up to 6 rows × 4 pixel vectors
//                    a tile), then col2im as a sum of shifted column rows per input row. Computing
//                    the input rows directly instead multiplies zeros: on LeNet-5's 12-pixel rows,
//                    twice the useful products, and twice the time (BENCHMARKS.md, "Kernel
//                    choices").
//
// Channels are split into equal tiles of at most 24 accumulators, so that with the operands they
// stay in the 32 vector registers of AVX-512. Each tile is a function of its own (noinline):
// inlined into the loops that pick it, the input gradient's tiles ran 25% slower. Every kernel is a
// template over the cells of the tensors it reads and writes (f32, bf16, f16; the sums are f32
// throughout), so that the 16-bit types need no f32 copies of the tensors. Built where the compiler
// targets AVX2 with FMA (and F16C for the 16-bit cells); elsewhere direct_conv2d declines and
// oneDNN or im2col computes every convolution.
#include "cpu/conv_direct.hpp"

#include "cpu/onednn.hpp"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "cpu/half.hpp"
#include "cpu/half_simd.hpp"
#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"

namespace fluxion::backend::cpu {
namespace {

constexpr int kLanes = 8;
constexpr int kAccumulators = 24;
constexpr int kMaxWidth = 7;  // of the kernel, for the weight gradient's tiles

// Calls f(std::integral_constant<int, v>{}) for the value v in [1, Max]: tile sizes become
// compile-time constants, so that tiles are arrays of registers.
template <int Max, class F>
[[gnu::always_inline]] inline void with_constant(int64_t v, F&& f) {
    if constexpr (Max > 0) {
        if (v == Max) return f(std::integral_constant<int, Max>{});
        with_constant<Max - 1>(v, f);
    }
}

// Cells of the tensors the kernels read and write: f32 as they are, bf16 and f16 (half_simd.hpp)
// widened on loading and rounded to nearest even on storing. Weights are always read as f32: a
// 16-bit weight is widened once into a copy (a few thousand values), so that the inner loops
// broadcast it from memory as the f32 kernels do; so are the forward pass's input and the input
// gradient's output gradient, an image at a time, which every tap, and every input channel, reads
// again.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }

// The f32 values of n weights: w itself for f32, else widened into `copy`.
template <class E> const float* f32_weights(const E* w, int64_t n, float* copy) {
    if constexpr (std::is_same_v<E, float>) {
        return w;
    } else {
        cells_to_f32(w, copy, n);
        return copy;
    }
}

// A tile of accumulators set to zero (unrolled, so that the tile stays in registers).
template <int A, int B>
[[gnu::always_inline]] inline void zero(__m256 (&tile)[A][B]) {
    #pragma GCC unroll 32
    for (auto& row : tile)
        #pragma GCC unroll 32
        for (auto& a : row) a = _mm256_setzero_ps();
}

// ---- forward ----

// Rounds v to E (Numbers: v holds no NaN).
template <class E, bool Numbers>
[[gnu::always_inline]] inline __m256 to_cells(__m256 v) {
    if constexpr (std::is_same_v<E, float>) return v;
    else if constexpr (Numbers) return round8_number(E{}, v);
    else return round8(E{}, v);
}

// Row oy of y[n][k0, k0 + KB) from its sums: the bias added to the rounded sum and rounded, then
// relu, as the eager x < 0 ? 0 : x, which keeps NaN and -0 (max would not).
template <int KB, int NV, class E, bool Numbers>
[[gnu::always_inline]] inline void finish_row(const Conv2dShape& s, const __m256 (&acc)[KB][NV], const E* bias,
                                              bool relu, E* y, int64_t n, int64_t k0, int64_t oy) {
    #pragma GCC unroll 32
    for (int k = 0; k < KB; ++k) {
        E* out = y + ((n * s.k + k0 + k) * s.oh + oy) * s.ow;
        const __m256 b = bias ? _mm256_set1_ps(load(bias[k0 + k])) : _mm256_setzero_ps();
        #pragma GCC unroll 32
        for (int j = 0; j < NV; ++j) {
            __m256 r = to_cells<E, Numbers>(acc[k][j]);
            if (bias) r = to_cells<E, Numbers>(_mm256_add_ps(r, b));
            if (relu) r = _mm256_andnot_ps(_mm256_cmp_ps(r, _mm256_setzero_ps(), _CMP_LT_OQ), r);
            if constexpr (std::is_same_v<E, float>) _mm256_storeu_ps(out + j * kLanes, r);
            else store8_exact(out + j * kLanes, r);
        }
    }
}

// y[n][k0, k0 + KB)[oy][·] for every oy from the f32 planes of image n; the row is NV vectors wide.
template <int KB, int NV, class E>
[[gnu::noinline]] void forward_tile(const Conv2dShape& s, const float* image, const float* w, const E* bias, bool relu,
                                    E* y, int64_t n, int64_t k0) {
    const int64_t crs = s.c * s.r * s.s;
    for (int64_t oy = 0; oy < s.oh; ++oy) {
        __m256 acc[KB][NV];
        zero(acc);
        for (int64_t c = 0; c < s.c; ++c) {
            for (int64_t ky = 0; ky < s.r; ++ky) {
                const float* in = image + (c * s.h + oy + ky) * s.w;
                const float* wk = w + k0 * crs + (c * s.r + ky) * s.s;
                for (int64_t kx = 0; kx < s.s; ++kx) {
                    __m256 v[NV];
                    #pragma GCC unroll 32
                    for (int j = 0; j < NV; ++j) v[j] = _mm256_loadu_ps(in + kx + j * kLanes);
                    #pragma GCC unroll 32
                    for (int k = 0; k < KB; ++k) {
                        const __m256 wb = _mm256_broadcast_ss(wk + k * crs + kx);
                        #pragma GCC unroll 32
                        for (int j = 0; j < NV; ++j) acc[k][j] = _mm256_fmadd_ps(wb, v[j], acc[k][j]);
                    }
                }
            }
        }
        // The bias after the sum, and relu after it, each rounded to E as the eager calls' results
        // are, so that both give the same bits.
        if constexpr (std::is_same_v<E, float>) {
            finish_row<KB, NV, E, true>(s, acc, bias, relu, y, n, k0, oy);
        } else {
            // Rounding without the NaN case is half the work: it serves the rows with no NaN in
            // their sums nor their biases (a NaN makes the total NaN; an infinite one only sends
            // the row to the exact path).
            __m256 total = _mm256_setzero_ps();
            #pragma GCC unroll 32
            for (int k = 0; k < KB; ++k) {
                if (bias) total = _mm256_add_ps(total, _mm256_set1_ps(load(bias[k0 + k])));
                #pragma GCC unroll 32
                for (int j = 0; j < NV; ++j) total = _mm256_add_ps(total, acc[k][j]);
            }
            if (_mm256_movemask_ps(_mm256_cmp_ps(total, total, _CMP_UNORD_Q)) == 0)
                finish_row<KB, NV, E, true>(s, acc, bias, relu, y, n, k0, oy);
            else
                finish_row<KB, NV, E, false>(s, acc, bias, relu, y, n, k0, oy);
        }
    }
}

template <int NV, class E>
void forward(const Conv2dShape& s, const E* x, const E* w, const E* bias, bool relu, E* y) {
    const int64_t blocks = (s.k + kAccumulators / NV - 1) / (kAccumulators / NV), kb = (s.k + blocks - 1) / blocks;
    const int64_t work = s.n * s.k * s.oh * s.ow * s.c * s.r * s.s;
    const int64_t planes = s.c * s.h * s.w, weights = s.k * s.c * s.r * s.s;
    // Tasks [first, last) with the f32 weights wf; 16-bit cells widen each image into `copy`.
    const auto tasks = [&](int64_t first, int64_t last, const float* wf, float* copy) {
        int64_t widened = -1;
        for (int64_t task = first; task < last; ++task) {
            const int64_t n = task / blocks, k0 = task % blocks * kb;
            const float* image;
            if constexpr (std::is_same_v<E, float>) {
                image = x + n * planes;
            } else {
                if (n != widened) cells_to_f32(x + n * planes, copy, planes);
                widened = n;
                image = copy;
            }
            with_constant<kAccumulators / NV>(std::min(kb, s.k - k0), [&](auto tile) {
                forward_tile<tile.value, NV, E>(s, image, wf, bias, relu, y, n, k0);
            });
        }
    };
    parallel_for(s.n * blocks, team_for(work), [&](int64_t first, int64_t last) {
        if constexpr (std::is_same_v<E, float>) {
            tasks(first, last, w, nullptr);
        } else {
            // The thread's f32 copies of the weights and of the image its tasks are on.
            const Scratch scratch(std::size_t(weights + planes) * sizeof(float));
            tasks(first, last, f32_weights(w, weights, scratch.as<float>()), scratch.as<float>() + weights);
        }
    });
}

// ---- backward_weight ----

// Keeps v in a register: the compiler would otherwise fold its load into each of the KB
// multiply-adds that use it, KB loads instead of one, and the loop would wait on loads.
[[gnu::always_inline]] inline void in_register(__m256& v) { asm("" : "+v"(v)); }

float sum_lanes(__m256 v) {
    alignas(32) float lanes[kLanes];
    _mm256_store_ps(lanes, v);
    float total = 0;
    #pragma GCC unroll 32
    for (float f : lanes) total += f;
    return total;
}

// gw[k0, k0 + KB)[c][ky][·], summed over every image and output pixel.
template <int KB, int S, class E>
[[gnu::noinline]] void weight_tile(const Conv2dShape& s, const E* x, const E* gy, E* gw, int64_t k0, int64_t c,
                                   int64_t ky) {
    __m256 acc[KB][S];
    zero(acc);
    const int64_t ohw = s.oh * s.ow;
    for (int64_t n = 0; n < s.n; ++n) {
        for (int64_t oy = 0; oy < s.oh; ++oy) {
            const E* in = x + ((n * s.c + c) * s.h + oy + ky) * s.w;
            const E* g = gy + (n * s.k + k0) * ohw + oy * s.ow;
            for (int64_t ox = 0; ox < s.ow; ox += kLanes) {
                __m256 gv[KB];
                #pragma GCC unroll 32
                for (int k = 0; k < KB; ++k) gv[k] = load8(g + k * ohw + ox);
                #pragma GCC unroll 32
                for (int kx = 0; kx < S; ++kx) {
                    __m256 v = load8(in + ox + kx);
                    in_register(v);
                    #pragma GCC unroll 32
                    for (int k = 0; k < KB; ++k) acc[k][kx] = _mm256_fmadd_ps(gv[k], v, acc[k][kx]);
                }
            }
        }
    }
    #pragma GCC unroll 32
    for (int k = 0; k < KB; ++k)
        #pragma GCC unroll 32
        for (int kx = 0; kx < S; ++kx)
            gw[(((k0 + k) * s.c + c) * s.r + ky) * S + kx] = store<E>(sum_lanes(acc[k][kx]));
}

template <int S, class E>
void backward_weight(const Conv2dShape& s, const E* x, const E* gy, E* gw) {
    // Every filter of the tile needs its output gradient in a register too.
    const int64_t most = kAccumulators / (S + 1), blocks = (s.k + most - 1) / most, kb = (s.k + blocks - 1) / blocks;
    const int64_t tasks = blocks * s.c * s.r, work = s.n * s.k * s.oh * s.ow * s.c * s.r * S;
    parallel_for(tasks, team_for(work), [&](int64_t first, int64_t last) {
        for (int64_t task = first; task < last; ++task) {
            const int64_t ky = task % s.r, c = task / s.r % s.c, k0 = task / (s.r * s.c) * kb;
            with_constant<kAccumulators / (S + 1)>(std::min(kb, s.k - k0), [&](auto tile) {
                weight_tile<tile.value, S, E>(s, x, gy, gw, k0, c, ky);
            });
        }
    });
}

// ---- backward_input ----

// The columns of one input channel c (its rows of gx's im2col matrix: the product of the
// transposed weight and the output gradient), row (ky, kx) at pixel (oy, ox), are kept as
// {ky, oy, kx, width}: the S taps col2im adds for one output row lie together, each row of ow
// pixels with S - 1 zeros (or more) either side, so that col2im reads a row shifted by a tap as one
// unclipped vector load. One channel at a time, so that col2im finds them in the L1 cache
// (LeNet-5's second layer: 12.8 KB; the whole image's took a quarter longer from the L2 cache).
struct ColumnLayout {
    int64_t margin, width;  // zeros before a row's pixels; floats a row, a multiple of 8
    explicit ColumnLayout(const Conv2dShape& s)
        : margin(s.s - 1), width((s.ow + 2 * (s.s - 1) + kLanes - 1) / kLanes * kLanes) {}
    // Where the channel's row r = (ky, kx) starts, pixel (0, 0); pixel (oy, ox) is oy S width + ox
    // after it.
    int64_t row(const Conv2dShape& s, int64_t r) const { return ((r / s.s) * s.oh * s.s + r % s.s) * width + margin; }
    int64_t size(const Conv2dShape& s) const { return s.r * s.oh * s.s * width; }
};

// Rows [r0, r0 + RB) of the image's column matrix for the pixel vectors [v0, v0 + PV):
// Σ_k w[k][r] gy[k][p]. Row r goes to columns + row[r] (ColumnLayout::row of r within its
// channel), pixel vector v at[v] after it. gy is the image's output gradient in f32.
template <int RB, int PV>
[[gnu::noinline]] void column_tile(const Conv2dShape& s, const float* gy, const float* w, const int64_t* row,
                                   const int64_t* at, float* columns, int64_t r0, int64_t v0) {
    const int64_t crs = s.c * s.r * s.s, ohw = s.oh * s.ow;
    __m256 acc[RB][PV];
    zero(acc);
    for (int64_t k = 0; k < s.k; ++k) {
        __m256 g[PV];
        #pragma GCC unroll 32
        for (int v = 0; v < PV; ++v) {
            g[v] = _mm256_loadu_ps(gy + k * ohw + (v0 + v) * kLanes);
            in_register(g[v]);
        }
        #pragma GCC unroll 32
        for (int i = 0; i < RB; ++i) {
            const __m256 wb = _mm256_broadcast_ss(w + k * crs + r0 + i);
            #pragma GCC unroll 32
            for (int v = 0; v < PV; ++v) acc[i][v] = _mm256_fmadd_ps(wb, g[v], acc[i][v]);
        }
    }
    #pragma GCC unroll 32
    for (int i = 0; i < RB; ++i)
        #pragma GCC unroll 32
        for (int v = 0; v < PV; ++v) _mm256_storeu_ps(columns + row[r0 + i] + at[v0 + v], acc[i][v]);
}

// gx of one image and channel (its plane) from the channel's columns: each input row iy sums,
// over the taps (ky, kx) whose output row oy = iy - ky exists, the column row (ky, kx; oy) shifted
// right by kx. The row is NSEG 8-pixel segments, the last one overlapping the one before where iw
// is not a multiple of 8: its lanes compute the same sums in the same order, so the overlap writes
// equal values. Even and odd taps add into separate sums (two chains of dependent adds, not one).
template <int NSEG, class E>
void col2im_rows(const Conv2dShape& s, const ColumnLayout& layout, const float* columns, E* gx) {
    const int64_t width = layout.width, step = width - 1;  // from tap kx's shifted row to kx + 1's
    int64_t start[NSEG];
    for (int j = 0; j < NSEG; ++j) start[j] = std::min<int64_t>(j * kLanes, s.w - kLanes);
    for (int64_t iy = 0; iy < s.h; ++iy) {
        __m256 even[NSEG], odd[NSEG];
        #pragma GCC unroll 8
        for (int j = 0; j < NSEG; ++j) even[j] = odd[j] = _mm256_setzero_ps();
        for (int64_t ky = std::max<int64_t>(0, iy - s.oh + 1); ky <= std::min<int64_t>(s.r - 1, iy); ++ky) {
            const float* taps = columns + ((ky * s.oh + iy - ky) * s.s) * width + layout.margin;
            int64_t kx = 0;
            for (; kx + 1 < s.s; kx += 2)
                #pragma GCC unroll 8
                for (int j = 0; j < NSEG; ++j) {
                    even[j] = _mm256_add_ps(even[j], _mm256_loadu_ps(taps + kx * step + start[j]));
                    odd[j] = _mm256_add_ps(odd[j], _mm256_loadu_ps(taps + (kx + 1) * step + start[j]));
                }
            if (kx < s.s)
                #pragma GCC unroll 8
                for (int j = 0; j < NSEG; ++j)
                    even[j] = _mm256_add_ps(even[j], _mm256_loadu_ps(taps + kx * step + start[j]));
        }
        #pragma GCC unroll 8
        for (int j = 0; j < NSEG; ++j)
            store8(gx + iy * s.w + start[j], _mm256_add_ps(even[j], odd[j]));
    }
}

template <class E> void backward_input(const Conv2dShape& s, const E* gy, const E* w16, E* gx) {
    const int64_t rs = s.r * s.s, per_row = s.ow / kLanes, vectors = s.oh * per_row;
    // A channel's rows in equal tiles of at most 6 (5 of 5 for 5×5 rather than 6, 6, 6, 6 and 1).
    const int64_t tiles = (rs + 5) / 6, rb = (rs + tiles - 1) / tiles;
    const ColumnLayout layout(s);
    const int64_t size = layout.size(s), image_in = s.k * s.oh * s.ow, plane = s.h * s.w;
    const int64_t work = s.n * s.k * s.oh * s.ow * s.c * rs;
    // 16-bit weights widened, and each image's 16-bit output gradient, which the column tiles of
    // every channel read again (c × the tiles of a channel's rows times: 30 on LeNet-5's second
    // layer), widened once; each in a whole number of 64-byte lines, so that what follows stays
    // aligned.
    constexpr bool half = !std::is_same_v<E, float>;
    const int64_t weights = half ? (s.k * s.c * rs + 15) / 16 * 16 : 0;
    const int64_t gradient = half ? (image_in + 15) / 16 * 16 : 0;
    parallel_for(s.n, team_for(work), [&](int64_t first, int64_t last) {
        const Scratch scratch(std::size_t(size + weights + gradient) * sizeof(float) +
                              std::size_t(rs + vectors) * sizeof(int64_t));
        float* columns = scratch.as<float>();
        std::fill(columns, columns + size, 0.0f);  // the margins stay zero
        const float* w = f32_weights(w16, s.k * s.c * rs, columns + size);
        float* widened = columns + size + weights;
        auto* row = reinterpret_cast<int64_t*>(widened + gradient);
        int64_t* at = row + rs;
        for (int64_t r = 0; r < rs; ++r) row[r] = layout.row(s, r);
        for (int64_t v = 0; v < vectors; ++v) at[v] = v / per_row * s.s * layout.width + v % per_row * kLanes;
        for (int64_t n = first; n < last; ++n) {
            const float* g;
            if constexpr (half) {
                cells_to_f32(gy + n * image_in, widened, image_in);
                g = widened;
            } else {
                g = gy + n * image_in;
            }
            for (int64_t c = 0; c < s.c; ++c) {
                const float* wc = w + c * rs;  // the weight's rows of channel c: w[k][c rs + r] = wc[k crs + r]
                for (int64_t r0 = 0; r0 < rs; r0 += rb)
                    for (int64_t v0 = 0; v0 < vectors; v0 += 4)
                        with_constant<6>(std::min(rb, rs - r0), [&](auto rows) {
                            with_constant<4>(std::min<int64_t>(4, vectors - v0), [&](auto pixels) {
                                column_tile<rows.value, pixels.value>(s, g, wc, row, at, columns, r0, v0);
                            });
                        });
                with_constant<4>((s.w + kLanes - 1) / kLanes, [&](auto segments) {
                    col2im_rows<segments.value, E>(s, layout, columns, gx + (n * s.c + c) * plane);
                });
            }
        }
    });
}

}  // namespace

// ---- which shapes ----

// Where the direct kernels beat oneDNN, measured pass by pass against it (BENCHMARKS.md, "Kernel
// choices"): the forward pass up to 3 input channels (with more, oneDNN's blocked kernels win); the
// weight gradient while each task's output gradients over all images fit in the L2 cache (not for
// 8 => 16 channels, nor 3 => 32 on 32×32 outputs); the input gradient for few channels (not from
// 16 => 32 on).
bool direct_conv2d_takes(ConvPass pass, const Conv2dShape& s) {
    const bool plain = s.n > 0 && s.c > 0 && s.k > 0 && s.oh > 0 && s.ow > 0 && s.groups == 1 && s.stride_h == 1 &&
                       s.stride_w == 1 && s.dil_h == 1 && s.dil_w == 1 && s.pad_h == 0 && s.pad_w == 0 &&
                       s.oh == s.h - s.r + 1 && s.ow == s.w - s.s + 1 && s.ow % kLanes == 0;
    if (!plain) return false;
    switch (pass) {
        case ConvPass::forward: return s.c <= 3 && s.ow <= 4 * kLanes;
        case ConvPass::backward_weight: return s.c * s.k <= 96 && s.oh * s.ow <= 576 && s.s <= kMaxWidth;
        case ConvPass::backward_input: return s.c * s.k <= 128 && s.w >= kLanes && s.w <= 4 * kLanes;
    }
    return false;
}

namespace {
// One pass on cells of type E.
template <class E>
void direct_pass(ConvPass pass, const Conv2dShape& s, const E* a, const E* b, E* out, const E* bias, bool relu) {
    switch (pass) {
        case ConvPass::forward:
            with_constant<4>(s.ow / kLanes, [&](auto vectors) { forward<vectors.value>(s, a, b, bias, relu, out); });
            break;
        case ConvPass::backward_weight:
            with_constant<kMaxWidth>(s.s, [&](auto width) { backward_weight<width.value>(s, a, b, out); });
            break;
        case ConvPass::backward_input: backward_input(s, a, b, out); break;
    }
}
}  // namespace

bool direct_conv2d(ConvPass pass, const Conv2dShape& s, const float* a, const float* b, float* out,
                   const float* bias, bool relu) {
    if (!direct_conv2d_takes(pass, s)) return false;
    direct_pass(pass, s, a, b, out, bias, relu);
    return true;
}

bool direct_conv2d(DType t, ConvPass pass, const Conv2dShape& s, const void* a, const void* b, void* out,
                   const void* bias, bool relu) {
#if defined(FLUXION_HALF_SIMD)
    if (!direct_conv2d_takes(pass, s) || (t != DType::bf16 && t != DType::f16)) return false;
    const auto run = [&](auto tag) {
        using E = decltype(tag);
        direct_pass(pass, s, static_cast<const E*>(a), static_cast<const E*>(b), static_cast<E*>(out),
                    static_cast<const E*>(bias), relu);
    };
    if (t == DType::bf16) run(BFloat16{});
    else run(Half{});
    return true;
#else
    return false;
#endif
}

}  // namespace fluxion::backend::cpu

#else  // no AVX2 with FMA: oneDNN or im2col computes every convolution

namespace fluxion::backend::cpu {
bool direct_conv2d(ConvPass, const Conv2dShape&, const float*, const float*, float*, const float*, bool) {
    return false;
}
bool direct_conv2d(DType, ConvPass, const Conv2dShape&, const void*, const void*, void*, const void*, bool) {
    return false;
}
bool direct_conv2d_takes(ConvPass, const Conv2dShape&) { return false; }
}  // namespace fluxion::backend::cpu

#endif

namespace fluxion::backend::cpu {

// oneDNN's bf16 kernels block the channels by 16 and pair them for the bf16 dot product (AMX's tiles
// take 32 at a time), so few input channels fill a fraction of each. LeNet-5's 1 => 6 layer (batch
// 64) on a Zen 5 took 106 µs forward and 304 µs for the input gradient in oneDNN's bf16, 62 and 90
// widened to f32 and run directly, copies included; the weight gradient 64 and 65 (BENCHMARKS.md,
// "Kernel choices"). With AMX, oneDNN's gradient kernels lose to the direct ones on more channels
// too: its 6 => 16 layer's weight and input gradients took 380 and 247 µs per call (ONEDNN_VERBOSE)
// on an Intel Xeon of family 6 model 207, and the direct kernels on 16-bit cells took LeNet-5's bf16
// step from 2.15-2.30 to 2.01-2.14 ms, eager, and from 1.67-1.85 to 1.58-1.73 compiled, in three
// interleaved rounds (BENCHMARKS.md, "Intel Xeon with AMX"). Its forward pass stays in oneDNN: the
// direct forward kernels take at most 3 input channels. Where AMX is there, fluxion's own AMX
// kernels (conv_amx.hpp) take those gradients, and the forward passes of at most 3 channels, before
// the direct kernels do (widen.cpp).
bool bf16_conv_in_onednn(ConvPass pass, const Conv2dShape& s) {
    if (!onednn_bf16_preferred()) return false;
    if (!direct_conv2d_takes(pass, s)) return true;
    const bool amx_gradient = onednn_amx() && pass != ConvPass::forward;
    return !(s.c <= 3 || amx_gradient);
}

}  // namespace fluxion::backend::cpu
