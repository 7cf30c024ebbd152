#version 450
// unary: S1[i] = op(S0[i]) in the compute type C_T (backend::Unary's codes, semantics of the CPU
// backend's unary.cpp). Integer variants (INTEGER) take neg, abs, square and sign only.
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer Params {
    int n;
    int op;
    int off0;
    int off1;
    C_T a;
    C_T b;
};
#define S0_QUAL readonly
#include "slots.glsl"
#if !INTEGER
#include "math.glsl"
#include "unary_ops.glsl"
#endif

void main() {
    FOR_EACH(i, n) {
        const C_T x = LOAD0(off0 + i);
#if INTEGER
        C_T y = x;
        if (op == 0) y = -x;
        else if (op == 4) y = abs(x);
        else if (op == 5) y = x * x;
        else if (op == 17) y = C_T(x > C_T(0)) - C_T(x < C_T(0));
        STORE1(off1 + i, y);
#else
        STORE1(off1 + i, unary_value(op, x, a, b));
#endif
    }
}
