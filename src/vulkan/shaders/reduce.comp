#version 450
// reduce: src S0 {outer, n, inner} -> dst S1 {outer, inner}. One workgroup per output element (a
// grid-stride loop over outputs): each invocation folds a strided share of the n inputs, then the
// workgroup combines the partial results in shared memory. Ops: sum 0, mean 1, max 2, min 3,
// argmax 4, argmin 5 (ARG variants: S1 is i64, the index of the first extreme; a NaN wins).
// SUBGROUP variants add sums within subgroups first (subgroupAdd), then the subgroups' sums.
#include "common.glsl"
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int outer;
    int n;
    int inner;
    int op;
    int off0;
    int off1;
};
#define S0_QUAL readonly
#include "slots.glsl"

shared C_T partial[gl_WorkGroupSize.x];
shared int where_[gl_WorkGroupSize.x];

#if C_FLOAT
bool is_nan(C_T x) { return isnan(x); }
#else
bool is_nan(C_T x) { return false; }
#endif

// Whether (x at index i) replaces (best at index j) for max (greater) or min.
bool beats(C_T x, int i, C_T best, int j, bool greater) {
    if (j < 0) return true;
    if (is_nan(best)) return is_nan(x) && i < j;
    if (is_nan(x)) return true;
    if (x == best) return i < j;
    return greater ? x > best : x < best;
}

void main() {
    const int lid = int(gl_LocalInvocationID.x), wg = int(gl_WorkGroupSize.x);
    const bool extreme = op >= 2, greater = op == 2 || op == 4;
    for (int out_ = int(gl_WorkGroupID.x); out_ < outer * inner; out_ += int(gl_NumWorkGroups.x)) {
        const int o = out_ / inner, i = out_ % inner;
        const int base = off0 + o * n * inner + i;
        C_T acc = C_T(0);
        int at = -1;
        for (int j = lid; j < n; j += wg) {
            const C_T x = C_T(LOAD0(base + j * inner));
            if (!extreme) acc += x;
            else if (beats(x, j, acc, at, greater)) {
                acc = x;
                at = j;
            }
        }
#if SUBGROUP && !ARG
        if (!extreme) {
            acc = subgroupAdd(acc);
            if (subgroupElect()) partial[gl_SubgroupID] = acc;
            barrier();
            if (lid == 0) {
                C_T total = C_T(0);
                for (int s = 0; s < int(gl_NumSubgroups); ++s) total += partial[s];
                STORE1(off1 + out_, op == 1 ? total / C_T(n) : total);
            }
            barrier();
            continue;
        }
#endif
        partial[lid] = acc;
        where_[lid] = at;
        barrier();
        for (int s = 1; s < wg; s *= 2) {
            if (lid % (2 * s) == 0 && lid + s < wg) {
                if (!extreme) partial[lid] += partial[lid + s];
                else if (where_[lid + s] >= 0 && beats(partial[lid + s], where_[lid + s], partial[lid], where_[lid], greater)) {
                    partial[lid] = partial[lid + s];
                    where_[lid] = where_[lid + s];
                }
            }
            barrier();
        }
        if (lid == 0) {
#if ARG
            STORE1(off1 + out_, int64_t(where_[0]));
#else
            STORE1(off1 + out_, op == 1 ? partial[0] / C_T(n) : partial[0]);
#endif
        }
        barrier();
    }
}
