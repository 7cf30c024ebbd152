#version 450
// softmax / log-softmax along the middle axis of {outer, n, inner}: one workgroup per row (o, i)
// (a grid-stride loop over rows), each invocation a strided share of the row, the workgroup's
// partial results combined in shared memory. So no invocation loops over a whole row: long rows
// are split across the workgroup (and lavapipe's limit of 65,535 loop iterations per invocation,
// past which it silently stops looping, is not reached).
//   softmax: y = exp(x - m) / s; log-softmax: y = (x - m) - log(s); m = max(x), s = sum(exp(x - m)).
//   (x - m) first, as the CPU does: m + log(s) would round away the small differences of large x.
// BACKWARD: S0 = y, S1 = gy, S2 = gx; softmax gx = y (gy - sum(gy y)), log gx = gy - exp(y) sum(gy).
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int outer, n, inner, log_;
    int off0, off1, off2;
};
#define S0_QUAL readonly
#if BACKWARD
#define S1_QUAL readonly
#endif
#include "slots.glsl"
#include "math.glsl"

shared C_T partial[gl_WorkGroupSize.x];

// The largest of a and b, NaN if either is (the CPU's max propagates NaN; GLSL's max need not).
C_T nan_max(C_T a, C_T b) { return isnan(a) || a > b ? a : b; }

// Kahan's compensated sum, for each invocation's share of a row: thousands of terms of one sign
// summed one by one lose up to (terms) units in the last place, pairwise on the CPU about log(terms).
// `precise`, so that no compiler simplifies the compensation away.
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

// The workgroup's combination of every invocation's `value` (sum, or max when `maximum`), returned
// to every invocation.
C_T combine(C_T value, bool maximum) {
    const int lid = int(gl_LocalInvocationID.x), wg = int(gl_WorkGroupSize.x);
    partial[lid] = value;
    barrier();
    for (int s = 1; s < wg; s *= 2) {
        if (lid % (2 * s) == 0 && lid + s < wg)
            partial[lid] = maximum ? nan_max(partial[lid], partial[lid + s]) : partial[lid] + partial[lid + s];
        barrier();
    }
    const C_T result = partial[0];
    barrier();  // partial is written again by the next combine
    return result;
}

void main() {
    const int lid = int(gl_LocalInvocationID.x), wg = int(gl_WorkGroupSize.x);
    for (int row = int(gl_WorkGroupID.x); row < outer * inner; row += int(gl_NumWorkGroups.x)) {
        const int base = (row / inner) * n * inner + row % inner;
#if BACKWARD
        Kahan part = Kahan(C_T(0), C_T(0));
        for (int j = lid; j < n; j += wg) {
            const int at = base + j * inner;
            add(part, log_ != 0 ? LOAD1(off1 + at) : LOAD1(off1 + at) * LOAD0(off0 + at));
        }
        const C_T total = combine(part.sum, false);
        for (int j = lid; j < n; j += wg) {
            const int at = base + j * inner;
            const C_T y = LOAD0(off0 + at), gy = LOAD1(off1 + at);
            STORE2(off2 + at, log_ != 0 ? gy - t_exp(y) * total : y * (gy - total));
        }
#else
        C_T part = LOAD0(off0 + base);  // every invocation starts from the row's first element
        for (int j = lid; j < n; j += wg) part = nan_max(part, LOAD0(off0 + base + j * inner));
        const C_T m = combine(part, true);
        Kahan sum = Kahan(C_T(0), C_T(0));
        for (int j = lid; j < n; j += wg) add(sum, t_exp(LOAD0(off0 + base + j * inner) - m));
        const C_T s = combine(sum.sum, false), log_s = t_log(s);
        for (int j = lid; j < n; j += wg) {
            const int at = base + j * inner;
            const C_T x = LOAD0(off0 + at);
            STORE1(off1 + at, log_ != 0 ? (x - m) - log_s : t_exp(x - m) / s);
        }
#endif
    }
}
