#version 450
// col2im: S1[image, c, h, w] = the sum of the column entries of S0 that im2col copied from that
// input cell: a gather, one invocation per input cell (no atomics, deterministic).
#include "common.glsl"
layout(local_size_x_id = 0) in;
#include "conv_params.glsl"
#define S0_QUAL readonly
#include "slots.glsl"

void main() {
    const int P = OH * OW, rows = C * R * S;
    FOR_EACH(i, images * C * H * W) {
        const int w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, image = i / (W * H * C);
        C_T sum = C_T(0);
        for (int kh = 0; kh < R; ++kh) {
            const int hh = h + pad_h - kh * dil_h;
            if (hh < 0 || hh % stride_h != 0 || hh / stride_h >= OH) continue;
            for (int kw = 0; kw < S; ++kw) {
                const int ww = w + pad_w - kw * dil_w;
                if (ww < 0 || ww % stride_w != 0 || ww / stride_w >= OW) continue;
                const int row = (c * R + kh) * S + kw;
                sum += LOAD0(off0 + (image * rows + row) * P + (hh / stride_h) * OW + ww / stride_w);
            }
        }
        STORE1(off1 + i, sum);
    }
}
