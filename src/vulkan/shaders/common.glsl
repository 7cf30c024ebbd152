// common.glsl — included first by every shader: extensions, byte access and the grid-stride loop.
// Element types come from glslc definitions per slot (shaders.cmake): S0_T, S0_BYTE, S0_BOOL, ...
#extension GL_GOOGLE_include_directive : enable
#if USES_INT64
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif

// 8-bit elements (u8, bool) live in uint words, since 8-bit storage is optional: byte i of a word
// array. Stores change one byte with two atomics, so that neighbours written by other invocations
// survive.
#define BYTE_AT(words, i) ((words[(i) >> 2] >> (uint((i) & 3) * 8u)) & 0xffu)
#define SET_BYTE(words, i, v)                                              \
    {                                                                      \
        const uint shift_ = uint((i) & 3) * 8u;                            \
        atomicAnd(words[(i) >> 2], ~(0xffu << shift_));                    \
        atomicOr(words[(i) >> 2], (uint(v) & 0xffu) << shift_);            \
    }

// for (i = this invocation; i < n; i += all invocations)
#define FOR_EACH(i, n) \
    for (int i = int(gl_GlobalInvocationID.x); i < (n); i += int(gl_NumWorkGroups.x * gl_WorkGroupSize.x))
