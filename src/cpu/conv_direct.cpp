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
// inlined into the loops that pick it, the input gradient's tiles ran 25% slower. Built where the
// compiler targets AVX2 with FMA; elsewhere direct_conv2d declines and oneDNN or im2col computes
// every convolution.
#include "cpu/conv_direct.hpp"

#if defined(__AVX2__) && defined(__FMA__)

#include <immintrin.h>

#include <algorithm>
#include <type_traits>

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

// A tile of accumulators set to zero (unrolled, so that the tile stays in registers).
template <int A, int B>
[[gnu::always_inline]] inline void zero(__m256 (&tile)[A][B]) {
    #pragma GCC unroll 32
    for (auto& row : tile)
        #pragma GCC unroll 32
        for (auto& a : row) a = _mm256_setzero_ps();
}

// ---- forward ----

// y[n][k0, k0 + KB)[oy][·] for every oy; the row is NV vectors wide.
template <int KB, int NV>
[[gnu::noinline]] void forward_tile(const Conv2dShape& s, const float* x, const float* w, const float* bias, bool relu,
                                    float* y, int64_t n, int64_t k0) {
    const int64_t crs = s.c * s.r * s.s;
    for (int64_t oy = 0; oy < s.oh; ++oy) {
        __m256 acc[KB][NV];
        zero(acc);
        for (int64_t c = 0; c < s.c; ++c) {
            for (int64_t ky = 0; ky < s.r; ++ky) {
                const float* in = x + ((n * s.c + c) * s.h + oy + ky) * s.w;
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
        // The bias after the sum, as the eager broadcast add does it, so both give the same bits.
        #pragma GCC unroll 32
        for (int k = 0; k < KB; ++k) {
            float* out = y + ((n * s.k + k0 + k) * s.oh + oy) * s.ow;
            const __m256 b = bias ? _mm256_set1_ps(bias[k0 + k]) : _mm256_setzero_ps();
            #pragma GCC unroll 32
            for (int j = 0; j < NV; ++j) {
                __m256 r = bias ? _mm256_add_ps(acc[k][j], b) : acc[k][j];
                // relu as the eager x < 0 ? 0 : x, which keeps NaN and -0 (max would not).
                if (relu) r = _mm256_andnot_ps(_mm256_cmp_ps(r, _mm256_setzero_ps(), _CMP_LT_OQ), r);
                _mm256_storeu_ps(out + j * kLanes, r);
            }
        }
    }
}

template <int NV>
void forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, bool relu, float* y) {
    const int64_t blocks = (s.k + kAccumulators / NV - 1) / (kAccumulators / NV), kb = (s.k + blocks - 1) / blocks;
    const int64_t work = s.n * s.k * s.oh * s.ow * s.c * s.r * s.s;
    parallel_for(s.n * blocks, team_for(work), [&](int64_t first, int64_t last) {
        for (int64_t task = first; task < last; ++task) {
            const int64_t n = task / blocks, k0 = task % blocks * kb;
            with_constant<kAccumulators / NV>(std::min(kb, s.k - k0), [&](auto tile) {
                forward_tile<tile.value, NV>(s, x, w, bias, relu, y, n, k0);
            });
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
template <int KB, int S>
[[gnu::noinline]] void weight_tile(const Conv2dShape& s, const float* x, const float* gy, float* gw, int64_t k0,
                                   int64_t c, int64_t ky) {
    __m256 acc[KB][S];
    zero(acc);
    const int64_t ohw = s.oh * s.ow;
    for (int64_t n = 0; n < s.n; ++n) {
        for (int64_t oy = 0; oy < s.oh; ++oy) {
            const float* in = x + ((n * s.c + c) * s.h + oy + ky) * s.w;
            const float* g = gy + (n * s.k + k0) * ohw + oy * s.ow;
            for (int64_t ox = 0; ox < s.ow; ox += kLanes) {
                __m256 gv[KB];
                #pragma GCC unroll 32
                for (int k = 0; k < KB; ++k) gv[k] = _mm256_loadu_ps(g + k * ohw + ox);
                #pragma GCC unroll 32
                for (int kx = 0; kx < S; ++kx) {
                    __m256 v = _mm256_loadu_ps(in + ox + kx);
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
        for (int kx = 0; kx < S; ++kx) gw[(((k0 + k) * s.c + c) * s.r + ky) * S + kx] = sum_lanes(acc[k][kx]);
}

template <int S>
void backward_weight(const Conv2dShape& s, const float* x, const float* gy, float* gw) {
    // Every filter of the tile needs its output gradient in a register too.
    const int64_t most = kAccumulators / (S + 1), blocks = (s.k + most - 1) / most, kb = (s.k + blocks - 1) / blocks;
    const int64_t tasks = blocks * s.c * s.r, work = s.n * s.k * s.oh * s.ow * s.c * s.r * S;
    parallel_for(tasks, team_for(work), [&](int64_t first, int64_t last) {
        for (int64_t task = first; task < last; ++task) {
            const int64_t ky = task % s.r, c = task / s.r % s.c, k0 = task / (s.r * s.c) * kb;
            with_constant<kAccumulators / (S + 1)>(std::min(kb, s.k - k0), [&](auto tile) {
                weight_tile<tile.value, S>(s, x, gy, gw, k0, c, ky);
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
// channel), pixel vector v at[v] after it.
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
template <int NSEG>
void col2im_rows(const Conv2dShape& s, const ColumnLayout& layout, const float* columns, float* gx) {
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
            _mm256_storeu_ps(gx + iy * s.w + start[j], _mm256_add_ps(even[j], odd[j]));
    }
}

void backward_input(const Conv2dShape& s, const float* gy, const float* w, float* gx) {
    const int64_t rs = s.r * s.s, per_row = s.ow / kLanes, vectors = s.oh * per_row;
    // A channel's rows in equal tiles of at most 6 (5 of 5 for 5×5 rather than 6, 6, 6, 6 and 1).
    const int64_t tiles = (rs + 5) / 6, rb = (rs + tiles - 1) / tiles;
    const ColumnLayout layout(s);
    const int64_t size = layout.size(s), image_in = s.k * s.oh * s.ow, plane = s.h * s.w;
    const int64_t work = s.n * s.k * s.oh * s.ow * s.c * rs;
    parallel_for(s.n, team_for(work), [&](int64_t first, int64_t last) {
        const Scratch scratch(std::size_t(size) * sizeof(float) + std::size_t(rs + vectors) * sizeof(int64_t));
        float* columns = scratch.as<float>();
        std::fill(columns, columns + size, 0.0f);  // the margins stay zero
        auto* row = reinterpret_cast<int64_t*>(columns + size);
        int64_t* at = row + rs;
        for (int64_t r = 0; r < rs; ++r) row[r] = layout.row(s, r);
        for (int64_t v = 0; v < vectors; ++v) at[v] = v / per_row * s.s * layout.width + v % per_row * kLanes;
        for (int64_t n = first; n < last; ++n) {
            const float* g = gy + n * image_in;
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
                    col2im_rows<segments.value>(s, layout, columns, gx + (n * s.c + c) * plane);
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

bool direct_conv2d(ConvPass pass, const Conv2dShape& s, const float* a, const float* b, float* out,
                   const float* bias, bool relu) {
    if (!direct_conv2d_takes(pass, s)) return false;
    switch (pass) {
        case ConvPass::forward:
            with_constant<4>(s.ow / kLanes, [&](auto vectors) { forward<vectors.value>(s, a, b, bias, relu, out); });
            break;
        case ConvPass::backward_weight:
            with_constant<kMaxWidth>(s.s, [&](auto width) { backward_weight<width.value>(s, a, b, out); });
            break;
        case ConvPass::backward_input: backward_input(s, a, b, out); break;
    }
    return true;
}

}  // namespace fluxion::backend::cpu

#else  // no AVX2 with FMA: oneDNN or im2col computes every convolution

namespace fluxion::backend::cpu {
bool direct_conv2d(ConvPass, const Conv2dShape&, const float*, const float*, float*, const float*, bool) {
    return false;
}
bool direct_conv2d_takes(ConvPass, const Conv2dShape&) { return false; }
}  // namespace fluxion::backend::cpu

#endif
