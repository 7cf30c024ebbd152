// unary_ops.glsl — the values and gradients of backend::Unary's ops in C_T (float types after
// math.glsl; with INTEGER, i32 and i64), made from the formula table that every backend shares:
// src/core/elementwise_formulas.def, read here through the copy shaders.cmake writes with the LF
// suffix that GLSL's double constants need.
#define T C_T
#if INTEGER
#define W C_T  // GLSL's integer arithmetic wraps

C_T unary_integer(int op, C_T x) {
    switch (op) {
#define FX_UNARY_INTEGER(name, code, value) \
    case code: return value;
#include "elementwise_formulas.def"
    }
    return x;
}
#else
#define FX_K(v) C_T(v)
#define fx_exp t_exp
#define fx_expm1 t_expm1
#define fx_log t_log
#define fx_log1p t_log1p
#define fx_sqrt sqrt
#define fx_abs abs
#define fx_sin t_sin
#define fx_cos t_cos
#define fx_tanh t_tanh
#define fx_erf t_erf
#define fx_pow t_pow
#define FX_FUNCTION C_T
#include "elementwise_formulas.def"

#if !C_F64
// NVIDIA's compiler turns `x < 0 ? 0 : x` into max(x, 0), which makes NaN 0 and -0 +0 (seen on an
// H100, where the CPU and lavapipe keep both); relu and relu6 decide on the bits instead, which it
// cannot fold so. negative: -inf and the negative numbers, not -0 or NaN; above(x, c): x > c >= 0.
bool negative(float x) {
    const uint u = floatBitsToUint(x);
    return u > 0x80000000u && u <= 0xff800000u;
}
bool above(float x, float c) {
    const uint u = floatBitsToUint(x);
    return u > floatBitsToUint(c) && u <= 0x7f800000u;
}
#define FX_UNARY(name, code, reads, api, value, gradient) const int UNARY_##name = code;
#include "elementwise_formulas.def"
#endif

C_T unary_value(int op, C_T x, C_T a, C_T b) {
#if !C_F64
    if (op == UNARY_relu) return negative(x) ? 0.0 : x;
    if (op == UNARY_relu6) return negative(x) ? 0.0 : (above(x, 6.0) ? 6.0 : x);
#endif
    switch (op) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    case code: return value;
#include "elementwise_formulas.def"
    }
    return T_NAN;
}

// gx = gy * d op(x) / dx, with y = op(x) where that is cheaper.
C_T unary_gradient(int op, C_T x, C_T y, C_T gy, C_T a, C_T b) {
    switch (op) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    case code: return gradient;
#include "elementwise_formulas.def"
    }
    return T_NAN;
}
#endif
#undef T
