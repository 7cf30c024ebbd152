// slots.glsl — the storage buffers of a shader: slot Sk (k = 0..8) at binding k + 1 when Sk_T is
// defined. LOADk(i) reads element i as stored (8-bit types as uint; f16 and bf16, whether in
// uint16_t or packed in words, as float; u16 as uint), STOREk(i, v) writes it (bool slots store
// v != 0, f16 and bf16 round to nearest even). A shader defines Sk_QUAL as readonly for the slots
// it only reads, which tells synchronization validation (and the driver) that they are not written.
// (Generated once by hand from one pattern; keep the nine blocks alike.)

#ifdef S0_T
#ifndef S0_QUAL
#define S0_QUAL
#endif
#if S0_BYTE
layout(std430, binding = 1) S0_QUAL buffer Slot0 { uint s0[]; };
#define LOAD0(i) BYTE_AT(s0, i)
#if S0_BOOL
#define STORE0(i, v) SET_BYTE(s0, i, ((v) != 0 ? 1u : 0u))
#else
#define STORE0(i, v) SET_BYTE(s0, i, uint(v))
#endif
#elif S0_16BIT
layout(std430, binding = 1) S0_QUAL buffer Slot0 { uint16_t s0[]; };
#define LOAD0(i) S0_FROM_BITS(uint(s0[i]))
#define STORE0(i, v) s0[i] = uint16_t(S0_TO_BITS(S0_T(v)))
#elif S0_PACKED
layout(std430, binding = 1) S0_QUAL buffer Slot0 { uint s0[]; };
#define LOAD0(i) S0_FROM_BITS(HALF_AT(s0, i))
#define STORE0(i, v) SET_HALF(s0, i, S0_TO_BITS(S0_T(v)))
#else
layout(std430, binding = 1) S0_QUAL buffer Slot0 { S0_T s0[]; };
#define LOAD0(i) s0[i]
#define STORE0(i, v) s0[i] = S0_T(v)
#endif
#endif

#ifdef S1_T
#ifndef S1_QUAL
#define S1_QUAL
#endif
#if S1_BYTE
layout(std430, binding = 2) S1_QUAL buffer Slot1 { uint s1[]; };
#define LOAD1(i) BYTE_AT(s1, i)
#if S1_BOOL
#define STORE1(i, v) SET_BYTE(s1, i, ((v) != 0 ? 1u : 0u))
#else
#define STORE1(i, v) SET_BYTE(s1, i, uint(v))
#endif
#elif S1_16BIT
layout(std430, binding = 2) S1_QUAL buffer Slot1 { uint16_t s1[]; };
#define LOAD1(i) S1_FROM_BITS(uint(s1[i]))
#define STORE1(i, v) s1[i] = uint16_t(S1_TO_BITS(S1_T(v)))
#elif S1_PACKED
layout(std430, binding = 2) S1_QUAL buffer Slot1 { uint s1[]; };
#define LOAD1(i) S1_FROM_BITS(HALF_AT(s1, i))
#define STORE1(i, v) SET_HALF(s1, i, S1_TO_BITS(S1_T(v)))
#else
layout(std430, binding = 2) S1_QUAL buffer Slot1 { S1_T s1[]; };
#define LOAD1(i) s1[i]
#define STORE1(i, v) s1[i] = S1_T(v)
#endif
#endif

#ifdef S2_T
#ifndef S2_QUAL
#define S2_QUAL
#endif
#if S2_BYTE
layout(std430, binding = 3) S2_QUAL buffer Slot2 { uint s2[]; };
#define LOAD2(i) BYTE_AT(s2, i)
#if S2_BOOL
#define STORE2(i, v) SET_BYTE(s2, i, ((v) != 0 ? 1u : 0u))
#else
#define STORE2(i, v) SET_BYTE(s2, i, uint(v))
#endif
#elif S2_16BIT
layout(std430, binding = 3) S2_QUAL buffer Slot2 { uint16_t s2[]; };
#define LOAD2(i) S2_FROM_BITS(uint(s2[i]))
#define STORE2(i, v) s2[i] = uint16_t(S2_TO_BITS(S2_T(v)))
#elif S2_PACKED
layout(std430, binding = 3) S2_QUAL buffer Slot2 { uint s2[]; };
#define LOAD2(i) S2_FROM_BITS(HALF_AT(s2, i))
#define STORE2(i, v) SET_HALF(s2, i, S2_TO_BITS(S2_T(v)))
#else
layout(std430, binding = 3) S2_QUAL buffer Slot2 { S2_T s2[]; };
#define LOAD2(i) s2[i]
#define STORE2(i, v) s2[i] = S2_T(v)
#endif
#endif

#ifdef S3_T
#ifndef S3_QUAL
#define S3_QUAL
#endif
#if S3_BYTE
layout(std430, binding = 4) S3_QUAL buffer Slot3 { uint s3[]; };
#define LOAD3(i) BYTE_AT(s3, i)
#if S3_BOOL
#define STORE3(i, v) SET_BYTE(s3, i, ((v) != 0 ? 1u : 0u))
#else
#define STORE3(i, v) SET_BYTE(s3, i, uint(v))
#endif
#elif S3_16BIT
layout(std430, binding = 4) S3_QUAL buffer Slot3 { uint16_t s3[]; };
#define LOAD3(i) S3_FROM_BITS(uint(s3[i]))
#define STORE3(i, v) s3[i] = uint16_t(S3_TO_BITS(S3_T(v)))
#elif S3_PACKED
layout(std430, binding = 4) S3_QUAL buffer Slot3 { uint s3[]; };
#define LOAD3(i) S3_FROM_BITS(HALF_AT(s3, i))
#define STORE3(i, v) SET_HALF(s3, i, S3_TO_BITS(S3_T(v)))
#else
layout(std430, binding = 4) S3_QUAL buffer Slot3 { S3_T s3[]; };
#define LOAD3(i) s3[i]
#define STORE3(i, v) s3[i] = S3_T(v)
#endif
#endif

#ifdef S4_T
#ifndef S4_QUAL
#define S4_QUAL
#endif
#if S4_BYTE
layout(std430, binding = 5) S4_QUAL buffer Slot4 { uint s4[]; };
#define LOAD4(i) BYTE_AT(s4, i)
#if S4_BOOL
#define STORE4(i, v) SET_BYTE(s4, i, ((v) != 0 ? 1u : 0u))
#else
#define STORE4(i, v) SET_BYTE(s4, i, uint(v))
#endif
#elif S4_16BIT
layout(std430, binding = 5) S4_QUAL buffer Slot4 { uint16_t s4[]; };
#define LOAD4(i) S4_FROM_BITS(uint(s4[i]))
#define STORE4(i, v) s4[i] = uint16_t(S4_TO_BITS(S4_T(v)))
#elif S4_PACKED
layout(std430, binding = 5) S4_QUAL buffer Slot4 { uint s4[]; };
#define LOAD4(i) S4_FROM_BITS(HALF_AT(s4, i))
#define STORE4(i, v) SET_HALF(s4, i, S4_TO_BITS(S4_T(v)))
#else
layout(std430, binding = 5) S4_QUAL buffer Slot4 { S4_T s4[]; };
#define LOAD4(i) s4[i]
#define STORE4(i, v) s4[i] = S4_T(v)
#endif
#endif

#ifdef S5_T
#ifndef S5_QUAL
#define S5_QUAL
#endif
#if S5_BYTE
layout(std430, binding = 6) S5_QUAL buffer Slot5 { uint s5[]; };
#define LOAD5(i) BYTE_AT(s5, i)
#if S5_BOOL
#define STORE5(i, v) SET_BYTE(s5, i, ((v) != 0 ? 1u : 0u))
#else
#define STORE5(i, v) SET_BYTE(s5, i, uint(v))
#endif
#elif S5_16BIT
layout(std430, binding = 6) S5_QUAL buffer Slot5 { uint16_t s5[]; };
#define LOAD5(i) S5_FROM_BITS(uint(s5[i]))
#define STORE5(i, v) s5[i] = uint16_t(S5_TO_BITS(S5_T(v)))
#elif S5_PACKED
layout(std430, binding = 6) S5_QUAL buffer Slot5 { uint s5[]; };
#define LOAD5(i) S5_FROM_BITS(HALF_AT(s5, i))
#define STORE5(i, v) SET_HALF(s5, i, S5_TO_BITS(S5_T(v)))
#else
layout(std430, binding = 6) S5_QUAL buffer Slot5 { S5_T s5[]; };
#define LOAD5(i) s5[i]
#define STORE5(i, v) s5[i] = S5_T(v)
#endif
#endif

#ifdef S6_T
#ifndef S6_QUAL
#define S6_QUAL
#endif
#if S6_BYTE
layout(std430, binding = 7) S6_QUAL buffer Slot6 { uint s6[]; };
#define LOAD6(i) BYTE_AT(s6, i)
#if S6_BOOL
#define STORE6(i, v) SET_BYTE(s6, i, ((v) != 0 ? 1u : 0u))
#else
#define STORE6(i, v) SET_BYTE(s6, i, uint(v))
#endif
#elif S6_16BIT
layout(std430, binding = 7) S6_QUAL buffer Slot6 { uint16_t s6[]; };
#define LOAD6(i) S6_FROM_BITS(uint(s6[i]))
#define STORE6(i, v) s6[i] = uint16_t(S6_TO_BITS(S6_T(v)))
#elif S6_PACKED
layout(std430, binding = 7) S6_QUAL buffer Slot6 { uint s6[]; };
#define LOAD6(i) S6_FROM_BITS(HALF_AT(s6, i))
#define STORE6(i, v) SET_HALF(s6, i, S6_TO_BITS(S6_T(v)))
#else
layout(std430, binding = 7) S6_QUAL buffer Slot6 { S6_T s6[]; };
#define LOAD6(i) s6[i]
#define STORE6(i, v) s6[i] = S6_T(v)
#endif
#endif

#ifdef S7_T
#ifndef S7_QUAL
#define S7_QUAL
#endif
#if S7_BYTE
layout(std430, binding = 8) S7_QUAL buffer Slot7 { uint s7[]; };
#define LOAD7(i) BYTE_AT(s7, i)
#if S7_BOOL
#define STORE7(i, v) SET_BYTE(s7, i, ((v) != 0 ? 1u : 0u))
#else
#define STORE7(i, v) SET_BYTE(s7, i, uint(v))
#endif
#elif S7_16BIT
layout(std430, binding = 8) S7_QUAL buffer Slot7 { uint16_t s7[]; };
#define LOAD7(i) S7_FROM_BITS(uint(s7[i]))
#define STORE7(i, v) s7[i] = uint16_t(S7_TO_BITS(S7_T(v)))
#elif S7_PACKED
layout(std430, binding = 8) S7_QUAL buffer Slot7 { uint s7[]; };
#define LOAD7(i) S7_FROM_BITS(HALF_AT(s7, i))
#define STORE7(i, v) SET_HALF(s7, i, S7_TO_BITS(S7_T(v)))
#else
layout(std430, binding = 8) S7_QUAL buffer Slot7 { S7_T s7[]; };
#define LOAD7(i) s7[i]
#define STORE7(i, v) s7[i] = S7_T(v)
#endif
#endif

#ifdef S8_T
#ifndef S8_QUAL
#define S8_QUAL
#endif
#if S8_BYTE
layout(std430, binding = 9) S8_QUAL buffer Slot8 { uint s8[]; };
#define LOAD8(i) BYTE_AT(s8, i)
#if S8_BOOL
#define STORE8(i, v) SET_BYTE(s8, i, ((v) != 0 ? 1u : 0u))
#else
#define STORE8(i, v) SET_BYTE(s8, i, uint(v))
#endif
#elif S8_16BIT
layout(std430, binding = 9) S8_QUAL buffer Slot8 { uint16_t s8[]; };
#define LOAD8(i) S8_FROM_BITS(uint(s8[i]))
#define STORE8(i, v) s8[i] = uint16_t(S8_TO_BITS(S8_T(v)))
#elif S8_PACKED
layout(std430, binding = 9) S8_QUAL buffer Slot8 { uint s8[]; };
#define LOAD8(i) S8_FROM_BITS(HALF_AT(s8, i))
#define STORE8(i, v) SET_HALF(s8, i, S8_TO_BITS(S8_T(v)))
#else
layout(std430, binding = 9) S8_QUAL buffer Slot8 { S8_T s8[]; };
#define LOAD8(i) s8[i]
#define STORE8(i, v) s8[i] = S8_T(v)
#endif
#endif

// AS_STOREDk(v): v as slot k would store it (f16 and bf16 rounded to nearest even; other types
// unchanged), for fused kernels that keep in registers a value the unfused kernels store and read.
#if defined(S0_FROM_BITS) && defined(S0_FLOAT)
#define AS_STORED0(v) S0_FROM_BITS(S0_TO_BITS(float(v)))
#else
#define AS_STORED0(v) (v)
#endif
#if defined(S1_FROM_BITS) && defined(S1_FLOAT)
#define AS_STORED1(v) S1_FROM_BITS(S1_TO_BITS(float(v)))
#else
#define AS_STORED1(v) (v)
#endif
#if defined(S2_FROM_BITS) && defined(S2_FLOAT)
#define AS_STORED2(v) S2_FROM_BITS(S2_TO_BITS(float(v)))
#else
#define AS_STORED2(v) (v)
#endif
#if defined(S3_FROM_BITS) && defined(S3_FLOAT)
#define AS_STORED3(v) S3_FROM_BITS(S3_TO_BITS(float(v)))
#else
#define AS_STORED3(v) (v)
#endif
#if defined(S4_FROM_BITS) && defined(S4_FLOAT)
#define AS_STORED4(v) S4_FROM_BITS(S4_TO_BITS(float(v)))
#else
#define AS_STORED4(v) (v)
#endif
#if defined(S5_FROM_BITS) && defined(S5_FLOAT)
#define AS_STORED5(v) S5_FROM_BITS(S5_TO_BITS(float(v)))
#else
#define AS_STORED5(v) (v)
#endif
