// math.glsl — the elementary functions in the compute type C_T. GLSL has exp, log, sin, cos,
// tanh and pow for float only, so f64 kernels get their own: argument reduction plus a series
// accurate to about one unit in the last place (fdlibm's splits of ln 2 and pi / 2).
#if C_F64
#define T_INF packDouble2x32(uvec2(0u, 0x7ff00000u))
#define T_NAN packDouble2x32(uvec2(0u, 0x7ff80000u))
const double LN2_HI = 6.93147180369123816490e-01LF, LN2_LO = 1.90821492927058770002e-10LF;
const double PIO2_HI = 1.57079632673412561417e+00LF, PIO2_LO = 6.07710050650619224932e-11LF;

double t_exp(double x) {
    if (isnan(x)) return x;
    if (x > 709.8LF) return T_INF;
    if (x < -745.2LF) return 0.0LF;
    const double k = roundEven(x * 1.44269504088896338700LF);
    precise const double r = (x - k * LN2_HI) - k * LN2_LO;  // |r| <= ln 2 / 2; in this order, unfused
    double p = 1.0LF / 6227020800.0LF;                // 1/13!
    const double inv[13] = {1.0LF, 1.0LF, 1.0LF / 2.0LF, 1.0LF / 6.0LF, 1.0LF / 24.0LF, 1.0LF / 120.0LF, 1.0LF / 720.0LF,
                            1.0LF / 5040.0LF, 1.0LF / 40320.0LF, 1.0LF / 362880.0LF, 1.0LF / 3628800.0LF,
                            1.0LF / 39916800.0LF, 1.0LF / 479001600.0LF};
    for (int i = 12; i >= 0; --i) p = p * r + inv[i];
    const int e = int(k);
    return ldexp(ldexp(p, e / 2), e - e / 2);  // in two steps: 2^e alone may not be a double
}

// e^x - 1 without cancellation near 0.
double t_expm1(double x) {
    if (abs(x) >= 0.5LF) return t_exp(x) - 1.0LF;
    double p = 0.0LF, f = 1.0LF;
    double terms[18];
    for (int i = 1; i <= 18; ++i) {
        f /= double(i);
        terms[i - 1] = f;
    }
    for (int i = 17; i >= 0; --i) p = p * x + terms[i];
    return p * x;
}

double t_log(double x) {
    if (isnan(x) || x < 0.0LF) return T_NAN;
    if (x == 0.0LF) return -T_INF;
    if (isinf(x)) return x;
    int e;
    double m = frexp(x, e);  // [0.5, 1)
    if (m < 0.70710678118654752440LF) {
        m *= 2.0LF;
        e -= 1;
    }
    const double s = (m - 1.0LF) / (m + 1.0LF), s2 = s * s;  // |s| <= 0.172
    double p = 1.0LF / 25.0LF;
    for (int i = 11; i >= 0; --i) p = p * s2 + 1.0LF / double(2 * i + 1);
    return double(e) * LN2_HI + (double(e) * LN2_LO + 2.0LF * s * p);
}

// log(1 + x) for small x: log(u) scaled by the rounding of u = 1 + x (`precise`: see the float one).
double t_log1p(double x) {
    precise const double u = 1.0LF + x;
    precise const double d = u - 1.0LF;
    return u == 1.0LF ? x : t_log(u) * (x / d);
}

// sin and cos of r, |r| <= pi / 4.
double sin_kernel(double r) {
    const double r2 = r * r;
    double p = 0.0LF, f = 1.0LF;
    double c[9];
    for (int i = 0; i < 9; ++i) {  // (-1)^i / (2i + 1)!
        c[i] = f;
        f = -f / double((2 * i + 2) * (2 * i + 3));
    }
    for (int i = 8; i >= 0; --i) p = p * r2 + c[i];
    return r * p;
}
double cos_kernel(double r) {
    const double r2 = r * r;
    double p = 0.0LF, f = 1.0LF;
    double c[10];
    for (int i = 0; i < 10; ++i) {  // (-1)^i / (2i)!
        c[i] = f;
        f = -f / double((2 * i + 1) * (2 * i + 2));
    }
    for (int i = 9; i >= 0; --i) p = p * r2 + c[i];
    return p;
}
// x = k pi/2 + r; returns r and the quadrant k mod 4 (accurate for |x| up to about 1e5).
double reduce_pio2(double x, out int quadrant) {
    const double k = roundEven(x * 0.63661977236758134308LF);
    quadrant = int(mod(k, 4.0LF));
    precise const double r = (x - k * PIO2_HI) - k * PIO2_LO;
    return r;
}
double t_sin(double x) {
    if (isinf(x) || isnan(x)) return T_NAN;
    int q;
    const double r = reduce_pio2(x, q);
    return q == 0 ? sin_kernel(r) : q == 1 ? cos_kernel(r) : q == 2 ? -sin_kernel(r) : -cos_kernel(r);
}
double t_cos(double x) {
    if (isinf(x) || isnan(x)) return T_NAN;
    int q;
    const double r = reduce_pio2(x, q);
    return q == 0 ? cos_kernel(r) : q == 1 ? -sin_kernel(r) : q == 2 ? -cos_kernel(r) : sin_kernel(r);
}
#else
#define T_INF uintBitsToFloat(0x7f800000u)
#define T_NAN uintBitsToFloat(0x7fc00000u)
// Vulkan lets GLSL's exp be off by 3 + 2|x| units in the last place (28 at x = 88 on lavapipe):
// reduced here, x = k ln 2 + r with ln 2 split in two (Cephes's expf), e^r from its minimax
// polynomial on |r| <= ln 2 / 2, scaled by 2^k in two steps (2^k alone may not be a float).
float t_exp(float x) {
    if (isnan(x)) return x;
    if (x > 88.72283935546875) return T_INF;
    if (x < -103.972084045410) return 0.0;
    const float k = roundEven(x * 1.44269504088896341);
    precise const float r = (x - k * 0.693359375) - k * -2.12194440e-4;
    float p = 1.9875691500e-4;
    p = p * r + 1.3981999507e-3;
    p = p * r + 8.3334519073e-3;
    p = p * r + 4.1665795894e-2;
    p = p * r + 1.6666665459e-1;
    p = p * r + 5.0000001201e-1;
    const float e = 1.0 + r + r * r * p;
    const int ki = int(k);
    return ldexp(ldexp(e, ki / 2), ki - ki / 2);
}
float t_expm1(float x) { return abs(x) < 1e-3 ? x + 0.5 * x * x + x * x * x / 6.0 : t_exp(x) - 1.0; }
// Vulkan bounds GLSL's log near 1 only absolutely (2^-21 on [0.5, 2]), so the logarithm of a number
// near 1 may be off by much of its value: NVIDIA's, on an H100, put log1p(1.1e-6) 10% off through
// log(1 + x). Here x = m 2^e with m in [sqrt(1/2), sqrt(2)), and log m from Cephes's logf minimax
// polynomial in f = m - 1, ln 2 split in two as in t_exp: about one unit in the last place.
float t_log(float x) {
    if (isnan(x) || x < 0.0) return T_NAN;
    if (x == 0.0) return -T_INF;
    if (isinf(x)) return x;
    float scale = 0.0;
    if (x < 1.17549435e-38) {  // subnormal: made normal first
        x *= 16777216.0;
        scale = -24.0;
    }
    int e;
    float m = frexp(x, e);  // x = m 2^e, m in [0.5, 1)
    if (m < 0.707106781186547524) {
        e -= 1;
        m = m + m;
    }
    const float f = m - 1.0;  // exact
    const float z = f * f;
    float p = 7.0376836292e-2;
    p = p * f - 1.1514610310e-1;
    p = p * f + 1.1676998740e-1;
    p = p * f - 1.2420140846e-1;
    p = p * f + 1.4249322787e-1;
    p = p * f - 1.6668057665e-1;
    p = p * f + 2.0000714765e-1;
    p = p * f - 2.4999993993e-1;
    p = p * f + 3.3333331174e-1;
    const float k = float(e) + scale;
    precise const float y = f * z * p + k * -2.12194440e-4 - 0.5 * z;
    precise const float r = f + y;
    return r + k * 0.693359375;
}
// log(1 + x): for |x| < 1/32 its series (six terms: 2^-30 relative error), else the logarithm of
// u = 1 + x times x / (u - 1), which corrects u's rounding (Kahan's; `precise`, since a driver that
// folds (1 + x) - 1 into x, as lavapipe's did, loses the correction).
float t_log1p(float x) {
    if (abs(x) < 0.03125)
        return x * (1.0 + x * (-0.5 + x * (1.0 / 3.0 + x * (-0.25 + x * (0.2 + x * (-1.0 / 6.0))))));
    precise const float u = 1.0 + x;
    precise const float d = u - 1.0;
    return isinf(u) ? t_log(u) : t_log(u) * (x / d);
}
// Vulkan bounds the error of GLSL's sin and cos only on [-pi, pi], and loosely (2^-11); NVIDIA's
// drivers reduce larger arguments coarsely (sin(226.2) off by 3e-5, seen on an H100). So the
// reduction is done here, with pi / 2 split in three (the first part exact for k below 2^16), and
// the minimax polynomials of Cephes's sinf and cosf on [-pi/4, pi/4]: a few units in the last place
// for |x| up to about 1e5, as the f64 path.
float sin_kernel(float r) {
    const float r2 = r * r;
    return abs(r) < 1e-4 ? r : r + r * r2 * (-1.6666654611e-1 + r2 * (8.3321608736e-3 + r2 * -1.9515295891e-4));
}
float cos_kernel(float r) {
    const float r2 = r * r;
    return 1.0 - 0.5 * r2 + r2 * r2 * (4.166664568298827e-2 + r2 * (-1.388731625493765e-3 + r2 * 2.443315711809948e-5));
}
float reduce_pio2(float x, out int quadrant) {
    const float k = roundEven(x * 0.636619772367581343);
    quadrant = int(k) & 3;
    precise float r = ((x - k * 1.5703125) - k * 4.837512969970703125e-4) - k * 7.54978995489188216e-8;
    return r;
}
float t_sin(float x) {
    if (isinf(x) || isnan(x)) return T_NAN;
    if (abs(x) < 1e-4) return x;  // -0 stays -0
    int q;
    const float r = reduce_pio2(x, q);
    return q == 0 ? sin_kernel(r) : q == 1 ? cos_kernel(r) : q == 2 ? -sin_kernel(r) : -cos_kernel(r);
}
float t_cos(float x) {
    if (isinf(x) || isnan(x)) return T_NAN;
    int q;
    const float r = reduce_pio2(x, q);
    return q == 0 ? cos_kernel(r) : q == 1 ? -sin_kernel(r) : q == 2 ? -cos_kernel(r) : sin_kernel(r);
}
#endif

C_T t_tanh(C_T x) {
    const C_T e = t_expm1(C_T(-2) * abs(x));  // in (-1, 0]
    const C_T t = -e / (C_T(2) + e);
    return isnan(x) ? x : (x < C_T(0) ? -t : t);
}

// x^a, with a negative base allowed for whole exponents (as std::pow).
C_T t_pow(C_T x, C_T a) {
    if (a == C_T(0)) return C_T(1);
    if (x == C_T(0)) return a > C_T(0) ? C_T(0) : T_INF;
    const C_T r = t_exp(a * t_log(abs(x)));
    if (x > C_T(0)) return r;
    if (floor(a) != a) return T_NAN;
    return mod(a, C_T(2)) == C_T(0) ? r : -r;
}

// erf(x): its Maclaurin series below |x| = 2 (terms stay under 2.5, so little cancellation), else
// 1 - erfc(|x|) with erfc from its continued fraction, evaluated from the 80th term back (enough
// for f64 from |x| = 2 on). GLSL has no erf at all.
C_T t_erf(C_T x) {
    const C_T ax = abs(x);
    if (isnan(x)) return x;
    if (ax < C_T(2)) {
        const C_T x2 = x * x;
        C_T term = x, sum = x;  // term_n = (-1)^n x^(2n+1) / n!
        for (int n = 1; n < 48; ++n) {
            term *= -x2 / C_T(n);
            sum += term / C_T(2 * n + 1);
        }
        return sum * C_T(1.12837916709551257390LF);  // 2 / sqrt(pi)
    }
    C_T f = ax;
    for (int k = 80; k >= 1; --k) f = ax + C_T(0.5) * C_T(k) / f;
    const C_T erfc = t_exp(-ax * ax) * C_T(0.56418958354775628695LF) / f;  // 1 / sqrt(pi)
    return x < C_T(0) ? erfc - C_T(1) : C_T(1) - erfc;
}

