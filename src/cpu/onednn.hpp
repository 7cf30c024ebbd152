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

// True where oneDNN's bf16 kernels are also faster than the widened f32 path, so that the table's
// bf16 entries take them: with AMX, and with AVX-512 BF16 on AMD (Zen 4, whose 512-bit FMAs take two
// cycles, so that one bf16 dot product does twice an f32 FMA's work: products 2.2x as fast as f32
// there). Not on Intel CPUs with AVX-512 BF16 and no AMX (Cooper Lake; Sapphire Rapids where AMX is
// hidden), whose two 512-bit FMA ports keep f32 at the bf16 dot product's arithmetic rate: there
// oneDNN 2.6's bf16 matmul ran at about half f32's rate (BENCHMARKS.md, "Kernel choices").
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
