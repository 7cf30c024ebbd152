// onednn.hpp — what the CPU backend's oneDNN paths share (conv_onednn.cpp, matmul_onednn.cpp): the
// engine, a primitive's execution, and whether bf16 runs natively on this CPU.
#pragma once
#include <cstdint>

#if FLUXION_HAVE_ONEDNN
#include <initializer_list>
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace fluxion::backend::cpu {

// True when libfluxion is built with oneDNN and oneDNN runs bf16 products with this CPU's own bf16
// instructions (AVX-512 BF16 or AMX). Only then do bf16 matrix products and convolutions go to
// oneDNN; elsewhere oneDNN emulates bf16 arithmetic or has no bf16 kernel, and the widened f32
// path (widen.cpp) runs them.
bool onednn_bf16_native();

// True when oneDNN runs its AVX-512 kernels on this CPU (false without oneDNN).
bool onednn_avx512();

// True when oneDNN runs AMX's tile instructions on this CPU (the OS enables them, as well as the CPU).
bool onednn_amx();

// True where oneDNN's bf16 kernels are also faster than the widened f32 path, so that the table's
// bf16 entries take them: with AMX, and where this CPU's bf16 dot product, measured, does more
// multiply-adds per second than its f32 FMA (bf16_dot_rate_over_f32_fma() > 1: AMD's Zen 4, where
// products ran 2.2x as fast as f32). Not where it does fewer (Intel's Xeons without AMX, or with AMX
// hidden, 0.5: there oneDNN 2.6's bf16 matmul ran at about half f32's rate; BENCHMARKS.md, "Kernel
// choices"). Measured, not looked up by vendor or model, so that it holds on CPUs no table knows.
bool onednn_bf16_preferred();

// The bf16 products and convolutions oneDNN has run in this process. Their results are the widened
// path's to within one rounding, most often bit for bit, so tests count with this that an entry of
// the table took the fast path.
std::uint64_t onednn_bf16_runs();

#if FLUXION_HAVE_ONEDNN
void count_onednn_bf16_run();

dnnl::engine& onednn_engine();

// primitive.execute without the argument map its C++ wrapper builds.
void onednn_execute(const dnnl::primitive& p, const dnnl::stream& stream, std::initializer_list<dnnl_exec_arg_t> args);
#endif

}  // namespace fluxion::backend::cpu
