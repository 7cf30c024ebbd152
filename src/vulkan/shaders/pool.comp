#version 450
// pool2d: S1[n, c, oy, ox] = max (a NaN wins) or mean of S0's window, padding ignored by max and
// counted as zeros by mean.
#include "common.glsl"
layout(local_size_x_id = 0) in;
#include "pool_params.glsl"
#define S0_QUAL readonly
#include "slots.glsl"

void main() {
    FOR_EACH(i, N * C * OH * OW) {
        const int ox = i % OW, oy = (i / OW) % OH, plane = i / (OW * OH);
        const int y0 = oy * stride_h - pad_h, x0 = ox * stride_w - pad_w;
        const int base = off0 + plane * H * W;
        C_T acc = C_T(0);
        bool any = false;
        for (int y = max(y0, 0); y < min(y0 + KH, H); ++y)
            for (int x = max(x0, 0); x < min(x0 + KW, W); ++x) {
                const C_T v = LOAD0(base + y * W + x);
                if (op == 1) acc += v;
                else if (!any) {
                    acc = v;
                    any = true;
                } else if (!isnan(acc) && (v > acc || isnan(v))) {
                    acc = v;
                }
            }
        if (op == 1) acc /= C_T(mean_divisor(oy, ox));
        STORE1(off1 + i, acc);
    }
}
