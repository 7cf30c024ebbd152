// conv_params.glsl — backend::Conv2dShape as the parameter block of im2col.comp and col2im.comp,
// with the images of the chunk and the buffers' element offsets.
layout(std430, binding = 0) readonly buffer Params {
    int N, C, H, W;
    int K, R, S;
    int OH, OW;
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
    int images;
    int off0, off1;
};
