// common.glsl — included first by every shader: extensions, byte access and the grid-stride loop.
// Element types come from glslc definitions per slot (shaders.cmake): S0_T, S0_BYTE, S0_BOOL, ...
#extension GL_GOOGLE_include_directive : enable
#if USES_INT64
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#if USES_16BIT
#extension GL_EXT_shader_16bit_storage : require
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

// 16-bit elements without storageBuffer16BitAccess: half i of a word array, stored the same way.
#define HALF_AT(words, i) ((words[(i) >> 1] >> (uint((i) & 1) * 16u)) & 0xffffu)
#define SET_HALF(words, i, v)                                              \
    {                                                                      \
        const uint shift_ = uint((i) & 1) * 16u;                           \
        atomicAnd(words[(i) >> 1], ~(0xffffu << shift_));                  \
        atomicOr(words[(i) >> 1], (uint(v) & 0xffffu) << shift_);          \
    }

// for (i = this invocation; i < n; i += all invocations)
#define FOR_EACH(i, n) \
    for (int i = int(gl_GlobalInvocationID.x); i < (n); i += int(gl_NumWorkGroups.x * gl_WorkGroupSize.x))

#if USES_HALF
// f16 and bf16 as bits in a uint, converted with integer operations rather than packHalf2x16 and
// OpFConvert, whose rounding GLSL leaves to the implementation: the same steps as the CPU backend's
// src/cpu/half.hpp, so that both round alike bit for bit (to nearest even, NaN kept quiet).
float f16_to_float(uint h) {
    const uint sign = (h & 0x8000u) << 16;
    const uint exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    if (exponent == 0u) {  // zero or subnormal: mantissa * 2^-24, exact in float
        return uintBitsToFloat(sign | floatBitsToUint(float(mantissa) * 5.9604644775390625e-8));
    }
    if (exponent == 31u) return uintBitsToFloat(sign | 0x7f800000u | (mantissa << 13));
    return uintBitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint f16_from_float(float f) {
    const uint x = floatBitsToUint(f);
    const uint sign = (x >> 16) & 0x8000u;
    uint magnitude = x & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu);  // NaN
    if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds to infinity
    // Below the smallest normal half, adding 0.5 leaves round(|f| * 2^24) in the low mantissa bits.
    if (magnitude < 0x38800000u) {
        return sign | (floatBitsToUint(uintBitsToFloat(magnitude) + 0.5) - 0x3f000000u);
    }
    // Re-bias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
    magnitude += 0xc8000fffu + ((magnitude >> 13) & 1u);
    return sign | (magnitude >> 13);
}

float bf16_to_float(uint b) { return uintBitsToFloat(b << 16); }

uint bf16_from_float(float f) {
    const uint x = floatBitsToUint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;  // NaN, kept quiet
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
#endif
