// instruction_rates.hpp — this CPU's arithmetic rates, measured rather than looked up by model: the
// choice of a kernel by them holds on CPUs no table knows yet.
#pragma once

namespace fluxion::backend::cpu {

// The rate of AVX-512 BF16's dot product (vdpbf16ps: 32 bf16 products summed into 16 f32 lanes) in
// multiply-adds per second, divided by that of AVX-512's f32 FMA (16 multiply-adds), each timed on
// independent chains that fill the pipelines; measured once, about 0.1 ms. 0 where the CPU lacks
// either. About 2 where a 512-bit FMA takes two cycles and the dot product one (AMD Zen 4); 0.5
// where two FMA ports run beside a dot product that takes two cycles (Intel's Xeons without AMX).
double bf16_dot_rate_over_f32_fma();

}  // namespace fluxion::backend::cpu
