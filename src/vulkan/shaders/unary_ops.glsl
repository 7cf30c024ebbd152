// unary_ops.glsl — the values and gradients of backend::Unary's ops in C_T (after math.glsl).
// Codes: neg 0, exp 1, log 2, sqrt 3, abs 4, square 5, sin 6, cos 7, tanh 8, sigmoid 9, relu 10,
// leakyrelu 11, elu 12, gelu 13, softplus 14, swish 15, clamp 16, sign 17, recip 18, pow_scalar 19,
// gelu_erf 20.
const C_T GELU_K = C_T(0.79788456080286535588LF), GELU_C = C_T(0.044715LF);
const C_T INV_SQRT2 = C_T(0.70710678118654752440LF), INV_SQRT_2PI = C_T(0.39894228040143267794LF);

C_T unary_value(int op, C_T x, C_T a, C_T b) {
    switch (op) {
        case 0: return -x;
        case 1: return t_exp(x);
        case 2: return t_log(x);
        case 3: return sqrt(x);
        case 4: return abs(x);
        case 5: return x * x;
        case 6: return t_sin(x);
        case 7: return t_cos(x);
        case 8: return t_tanh(x);
        case 9: return t_sigmoid(x);
        case 10: return x < C_T(0) ? C_T(0) : x;
        case 11: return x > C_T(0) ? x : a * x;
        case 12: return x > C_T(0) ? x : a * t_expm1(x);
        case 13: return C_T(0.5) * x * (C_T(1) + t_tanh(GELU_K * (x + GELU_C * x * x * x)));
        case 14: return t_log1p(t_exp(-abs(x))) + (x > C_T(0) ? x : C_T(0));
        case 15: return x * t_sigmoid(x);
        case 16: return x < a ? a : (x > b ? b : x);
        case 17: return x > C_T(0) ? C_T(1) : (x < C_T(0) ? C_T(-1) : x);
        case 18: return C_T(1) / x;
        case 19: return t_pow(x, a);
        default: return C_T(0.5) * x * (C_T(1) + t_erf(x * INV_SQRT2));
    }
}

// gx = gy * d op(x) / dx, with y = op(x) where that is cheaper.
C_T unary_gradient(int op, C_T x, C_T y, C_T gy, C_T a, C_T b) {
    switch (op) {
        case 0: return -gy;
        case 1: return gy * y;
        case 2: return gy / x;
        case 3: return gy / (C_T(2) * y);
        case 4: return x > C_T(0) ? gy : (x < C_T(0) ? -gy : C_T(0));
        case 5: return C_T(2) * x * gy;
        case 6: return gy * t_cos(x);
        case 7: return -gy * t_sin(x);
        case 8: return gy * (C_T(1) - y * y);
        case 9: return gy * y * (C_T(1) - y);
        case 10: return x > C_T(0) ? gy : C_T(0);
        case 11: return x > C_T(0) ? gy : a * gy;
        case 12: return x > C_T(0) ? gy : gy * (y + a);
        case 13: {
            const C_T t = t_tanh(GELU_K * (x + GELU_C * x * x * x));
            const C_T du = GELU_K * (C_T(1) + C_T(3) * GELU_C * x * x);
            return gy * (C_T(0.5) * (C_T(1) + t) + C_T(0.5) * x * (C_T(1) - t * t) * du);
        }
        case 14: return gy * t_sigmoid(x);
        case 15: {
            const C_T s = t_sigmoid(x);
            return gy * (s + y * (C_T(1) - s));
        }
        case 16: return (a <= x && x <= b) ? gy : C_T(0);
        case 17: return C_T(0);
        case 18: return -gy * y * y;
        case 19: return a == C_T(0) ? C_T(0) : gy * a * t_pow(x, a - C_T(1));
        default: return gy * (C_T(0.5) * (C_T(1) + t_erf(x * INV_SQRT2)) + x * INV_SQRT_2PI * t_exp(C_T(-0.5) * x * x));
    }
}
