#version 450
// pool2d_backward: S3[n, c, y, x] = the sum of S2 (gy) over the windows holding cell (y, x): for
// max, only from windows whose first cell (row by row) equal to the output S1 (y; the first NaN
// when it is NaN) is this cell; for mean, gy / divisor. S0 is x. A gather per input cell. With
// act >= 0, S0 is the output of that activation, whose gradient (reading only its output) then
// applies to the sum, rounded first as the unfused kernel would store it.
#include "common.glsl"
layout(local_size_x_id = 0) in;
#include "pool_params.glsl"
#define S0_QUAL readonly
#define S1_QUAL readonly
#define S2_QUAL readonly
#include "slots.glsl"
#include "math.glsl"
#include "unary_ops.glsl"

bool same(C_T a, C_T b) { return a == b || (isnan(a) && isnan(b)); }

void main() {
    FOR_EACH(i, N * C * H * W) {
        const int x = i % W, y = (i / W) % H, plane = i / (W * H);
        // Outputs whose window [o * stride - pad, + K) holds y: o in [ceil((y + pad - K + 1) / stride), (y + pad) / stride].
        const int oy_lo = max(0, (y + pad_h - KH + stride_h) / stride_h), oy_hi = min(OH - 1, (y + pad_h) / stride_h);
        const int ox_lo = max(0, (x + pad_w - KW + stride_w) / stride_w), ox_hi = min(OW - 1, (x + pad_w) / stride_w);
        C_T g = C_T(0);
        for (int oy = oy_lo; oy <= oy_hi; ++oy)
            for (int ox = ox_lo; ox <= ox_hi; ++ox) {
                const int o = (plane * OH + oy) * OW + ox;
                if (op == 1) {
                    g += LOAD2(off2 + o) / C_T(mean_divisor(oy, ox));
                    continue;
                }
                const C_T best = LOAD1(off1 + o);
                const int y0 = oy * stride_h - pad_h, x0 = ox * stride_w - pad_w;
                int first = -1;
                for (int yy = max(y0, 0); yy < min(y0 + KH, H) && first < 0; ++yy)
                    for (int xx = max(x0, 0); xx < min(x0 + KW, W); ++xx)
                        if (same(LOAD0(off0 + plane * H * W + yy * W + xx), best)) {
                            first = yy * W + xx;
                            break;
                        }
                if (first == y * W + x) g += LOAD2(off2 + o);
            }
        if (act >= 0) {
            const C_T activated = C_T(LOAD0(off0 + i));
            g = unary_gradient(act, activated, activated, AS_STORED3(g), C_T(0), C_T(0));
        }
        STORE3(off3 + i, g);
    }
}
