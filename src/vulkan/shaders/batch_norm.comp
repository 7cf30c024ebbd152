#version 450
// BatchNorm's training pass over x {outer, c, inner} (core/backend.hpp's batch_norm) and, with
// BACKWARD, its gradient: one workgroup per channel (a grid-stride loop over channels), each
// invocation a strided share of the channel's outer·inner values, the shares' sums combined in shared
// memory, as softmax.comp does with a row. So no invocation loops over a whole channel, and one
// dispatch does what the composed pass does in about seven forward and eight backward.
//   forward:  S0 x, S1 weight, S2 bias, S3 y, S4 mean, S5 var, S6 rstd; the mean, then the squared
//             deviations from it (two passes, as the CPU: no cancellation of E[x²] - E[x]²), then
//             y = (x - mean) · (rstd · weight) + bias and, with relu, y < 0 ? 0 : y.
//   backward: S0 x, S1 y (relu's mask), S2 gy, S3 mean, S4 rstd, S5 weight, S6 gx, S7 gweight,
//             S8 gbias; with g = gy (where y > 0 after relu): Σ g and Σ g (x - mean), then
//             gx = (g - Σ g / m - (x - mean) · rstd · (Σ g x̂ / m)) · rstd · weight.
// A slot the call has no tensor for is bound to another of its buffers and never touched: `flags`
// says which are real.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int outer, c, inner, flags;  // FLAG_* below
    int off0, off1, off2, off3, off4, off5, off6, off7, off8;
    C_T eps;
};
const int FLAG_RELU = 1;     // forward: relu after the affine step; backward: S1 holds its y
const int FLAG_AFFINE = 2;   // weight (and forward, bias) given
const int FLAG_GX = 4;       // backward: write gx
const int FLAG_GWEIGHT = 8;  // backward: write gweight
const int FLAG_GBIAS = 16;   // backward: write gbias
#define S0_QUAL readonly
#define S1_QUAL readonly
#define S2_QUAL readonly
#if BACKWARD
#define S3_QUAL readonly
#define S4_QUAL readonly
#define S5_QUAL readonly
#endif
#include "slots.glsl"

shared C_T partial[gl_WorkGroupSize.x];

// Kahan's compensated sum for each invocation's share (`precise`, so that no compiler simplifies the
// compensation away); a channel of a million values summed one by one in f32 would lose about as
// many units in the last place.
struct Kahan {
    C_T sum, lost;
};
void add(inout Kahan k, C_T x) {
    precise const C_T y = x - k.lost;
    precise const C_T t = k.sum + y;
    precise const C_T lost = (t - k.sum) - y;
    k.lost = lost;
    k.sum = t;
}

// The sum of every invocation's `value`, returned to every invocation.
C_T combine(C_T value) {
    const int lid = int(gl_LocalInvocationID.x), wg = int(gl_WorkGroupSize.x);
    partial[lid] = value;
    barrier();
    for (int s = 1; s < wg; s *= 2) {
        if (lid % (2 * s) == 0 && lid + s < wg) partial[lid] = partial[lid] + partial[lid + s];
        barrier();
    }
    const C_T result = partial[0];
    barrier();  // partial is written again by the next combine
    return result;
}

// Where the e-th of channel j's values lies in x: row e / inner of the channel, in block e / inner.
int at(int j, int e) {
    const int o = e / inner;
    return (o * c + j) * inner + (e - o * inner);
}

#if !BACKWARD
// -inf and the negative numbers, not -0 or NaN, decided on the bits: NVIDIA's compiler turns
// `v < 0 ? 0 : v` into max(v, 0), which makes NaN 0 and -0 +0 (unary_ops.glsl's relu, likewise).
bool negative(C_T v) {
#if C_F64
    const uvec2 w = unpackDouble2x32(v);  // x: low word, y: high word
    const uint high = w.y & 0x7fffffffu;
    const bool nan = high > 0x7ff00000u || (high == 0x7ff00000u && w.x != 0u);
    return (w.y & 0x80000000u) != 0u && (high | w.x) != 0u && !nan;
#else
    const uint u = floatBitsToUint(v);
    return u > 0x80000000u && u <= 0xff800000u;
#endif
}
#endif

void main() {
    const int lid = int(gl_LocalInvocationID.x), wg = int(gl_WorkGroupSize.x);
    const int m = outer * inner;
    const bool relu = (flags & FLAG_RELU) != 0, affine = (flags & FLAG_AFFINE) != 0;
    for (int j = int(gl_WorkGroupID.x); j < c; j += int(gl_NumWorkGroups.x)) {
#if BACKWARD
        const C_T mean = LOAD3(off3 + j), rstd = LOAD4(off4 + j);
        Kahan sg = Kahan(C_T(0), C_T(0)), sgc = Kahan(C_T(0), C_T(0));
        for (int e = lid; e < m; e += wg) {
            const int i = at(j, e);
            const C_T g = relu ? (LOAD1(off1 + i) > C_T(0) ? LOAD2(off2 + i) : C_T(0)) : LOAD2(off2 + i);
            add(sg, g);
            add(sgc, g * (LOAD0(off0 + i) - mean));
        }
        const C_T sum_g = combine(sg.sum), sum_gx = combine(sgc.sum) * rstd;
        if (lid == 0 && (flags & FLAG_GWEIGHT) != 0) STORE7(off7 + j, sum_gx);
        if (lid == 0 && (flags & FLAG_GBIAS) != 0) STORE8(off8 + j, sum_g);
        if ((flags & FLAG_GX) != 0) {
            const C_T a = sum_g / C_T(m), bx = sum_gx / C_T(m), k = affine ? rstd * LOAD5(off5 + j) : rstd;
            for (int e = lid; e < m; e += wg) {
                const int i = at(j, e);
                const C_T g = relu ? (LOAD1(off1 + i) > C_T(0) ? LOAD2(off2 + i) : C_T(0)) : LOAD2(off2 + i);
                STORE6(off6 + i, (g - a - (LOAD0(off0 + i) - mean) * rstd * bx) * k);
            }
        }
#else
        Kahan s = Kahan(C_T(0), C_T(0));
        for (int e = lid; e < m; e += wg) add(s, LOAD0(off0 + at(j, e)));
        const C_T mean = combine(s.sum) / C_T(m);
        Kahan q = Kahan(C_T(0), C_T(0));
        for (int e = lid; e < m; e += wg) {
            const C_T d = LOAD0(off0 + at(j, e)) - mean;
            add(q, d * d);
        }
        const C_T var = combine(q.sum) / C_T(m), rstd = C_T(1) / sqrt(var + eps);
        if (lid == 0) {
            STORE4(off4 + j, mean);
            STORE5(off5 + j, var);
            STORE6(off6 + j, rstd);
        }
        const C_T scale = affine ? rstd * LOAD1(off1 + j) : rstd, shift = affine ? LOAD2(off2 + j) : C_T(0);
        for (int e = lid; e < m; e += wg) {
            const int i = at(j, e);
            const C_T y = (LOAD0(off0 + i) - mean) * scale + shift;
            STORE3(off3 + i, relu && negative(y) ? C_T(0) : y);
        }
#endif
    }
}
