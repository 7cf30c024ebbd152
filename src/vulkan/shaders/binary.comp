#version 450
// binary: S2[i] = S0[view a(i)] op S1[view b(i)] over the shared shape, S2 contiguous (out view 2).
// Codes of backend::Binary: add 0, sub 1, mul 2, div 3, pow 4, maximum 5, minimum 6, eq 7, ne 8,
// lt 9, le 10, gt 11, ge 12; COMPARE variants write bool and take 7..12 only. The formulas are
// src/core/elementwise_formulas.def's.
#include "common.glsl"
#include "strided.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n;
    int ndim;
    int op;
    int off0;
    int off1;
    int off2;
    int shape[MAX_DIMS];
    int strides[3 * MAX_DIMS];
};
#define S0_QUAL readonly
#define S1_QUAL readonly
#include "slots.glsl"
#if C_FLOAT && !COMPARE
#include "math.glsl"
#endif

#if !COMPARE
#include "binary_ops.glsl"
#else
// The comparisons of core/elementwise_formulas.def.
#define T C_T
#define W C_T
bool apply(C_T a, C_T b) {
    switch (op) {
#define FX_COMPARE(name, code, value) \
    case code: return value;
#include "elementwise_formulas.def"
    }
    return false;
}
#undef T
#undef W
#endif

void main() {
    FOR_EACH(i, n) {
        int a, b;
        STRIDED_OFFSET(a, i, 0);
        STRIDED_OFFSET(b, i, 1);
#if COMPARE
        STORE2(off2 + i, apply(C_T(LOAD0(off0 + a)), C_T(LOAD1(off1 + b))) ? 1u : 0u);
#else
        STORE2(off2 + i, binary_value(op, C_T(LOAD0(off0 + a)), C_T(LOAD1(off1 + b))));
#endif
    }
}
