// binary_ops.glsl — backend::Binary's arithmetic (add ... minimum) in C_T, made from the formula
// table every backend shares (src/core/elementwise_formulas.def), with GLSL's helpers: its integer
// arithmetic wraps. Included by binary.comp and elementwise_chain.comp.
#define T C_T
#define W C_T
#if C_FLOAT
#define fx_isnan isnan
#define fx_power t_pow
C_T fx_quotient(C_T a, C_T b) { return a / b; }
#else
#define fx_isnan(v) false
C_T fx_quotient(C_T a, C_T b) { return b == C_T(0) ? C_T(0) : a / b; }  // division by zero is 0, as on the CPU

// By squaring; a negative exponent truncates 1 / a^|b| as division does.
C_T fx_power(C_T a, C_T b) {
    if (b < C_T(0)) return a == C_T(1) ? C_T(1) : (a == C_T(-1) ? ((b & C_T(1)) != C_T(0) ? C_T(-1) : C_T(1)) : C_T(0));
    C_T r = C_T(1), base = a, e = b;
    while (e > C_T(0)) {
        if ((e & C_T(1)) != C_T(0)) r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}
#endif

C_T binary_value(int op, C_T a, C_T b) {
    switch (op) {
#define FX_BINARY(name, code, value) \
    case code: return value;
#include "elementwise_formulas.def"
    }
    return C_T(0);
}
#undef T
#undef W
