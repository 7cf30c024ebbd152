#version 450
// binary: S2[i] = S0[view a(i)] op S1[view b(i)] over the shared shape, S2 contiguous (out view 2).
// Codes of backend::Binary: add 0, sub 1, mul 2, div 3, pow 4, maximum 5, minimum 6, eq 7, ne 8,
// lt 9, le 10, gt 11, ge 12; COMPARE variants write bool and take 7..12 only.
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
C_T apply(C_T x, C_T y) {
    switch (op) {
        case 0: return x + y;
        case 1: return x - y;
        case 2: return x * y;
#if C_FLOAT
        case 3: return x / y;
        case 4: return t_pow(x, y);
        case 5: return (x > y || isnan(x)) ? x : y;  // NaN wins
        default: return (x < y || isnan(x)) ? x : y;
#else
        case 3: return y == C_T(0) ? C_T(0) : x / y;  // integer division by zero is 0, as on the CPU
        case 4: {  // by squaring; a negative exponent truncates 1 / x^|y| as division does
            if (y < C_T(0)) return x == C_T(1) ? C_T(1) : (x == C_T(-1) ? ((y & C_T(1)) != C_T(0) ? C_T(-1) : C_T(1)) : C_T(0));
            C_T r = C_T(1), base = x, e = y;
            while (e > C_T(0)) {
                if ((e & C_T(1)) != C_T(0)) r *= base;
                base *= base;
                e >>= 1;
            }
            return r;
        }
        case 5: return max(x, y);
        default: return min(x, y);
#endif
    }
}
#else
bool apply(C_T x, C_T y) {
    switch (op) {
        case 7: return x == y;
        case 8: return x != y;
        case 9: return x < y;
        case 10: return x <= y;
        case 11: return x > y;
        default: return x >= y;
    }
}
#endif

void main() {
    FOR_EACH(i, n) {
        int a, b;
        STRIDED_OFFSET(a, i, 0);
        STRIDED_OFFSET(b, i, 1);
#if COMPARE
        STORE2(off2 + i, apply(C_T(LOAD0(off0 + a)), C_T(LOAD1(off1 + b))) ? 1u : 0u);
#else
        STORE2(off2 + i, apply(C_T(LOAD0(off0 + a)), C_T(LOAD1(off1 + b))));
#endif
    }
}
