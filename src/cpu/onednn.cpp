#include "cpu/onednn.hpp"

#include <atomic>

#include "cpu/instruction_rates.hpp"

namespace fluxion::backend::cpu {

#if FLUXION_HAVE_ONEDNN

namespace {
std::atomic<std::uint64_t> bf16_runs{0};

// Whether oneDNN runs kernels of `want` or beyond on this CPU. The ISA values are nested bit masks:
// a CPU with AMX has every bit of avx512_core_bf16, which has every bit of avx512_core.
bool onednn_runs(dnnl::cpu_isa want) {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    return (isa & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
}
}  // namespace

void count_onednn_bf16_run() { bf16_runs.fetch_add(1, std::memory_order_relaxed); }

std::uint64_t onednn_bf16_runs() { return bf16_runs.load(std::memory_order_relaxed); }

dnnl::engine& onednn_engine() {
    static dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

void onednn_execute(const dnnl::primitive& p, const dnnl::stream& stream, std::initializer_list<dnnl_exec_arg_t> args) {
    dnnl::error::wrap_c_api(
        dnnl_primitive_execute(p.get(), stream.get(), static_cast<int>(args.size()), std::data(args)),
        "could not execute a primitive");
}

bool onednn_bf16_native() {
    static const bool native = onednn_runs(dnnl::cpu_isa::avx512_core_bf16);
    return native;
}

bool onednn_avx512() {
    static const bool avx512 = onednn_runs(dnnl::cpu_isa::avx512_core);
    return avx512;
}

bool onednn_amx() {
    static const bool amx = onednn_runs(dnnl::cpu_isa::avx512_core_amx);
    return amx;
}

bool onednn_bf16_preferred() {
    static const bool preferred = onednn_bf16_native() && (onednn_amx() || bf16_dot_rate_over_f32_fma() > 1.0);
    return preferred;
}

#else

bool onednn_bf16_native() { return false; }

bool onednn_avx512() { return false; }

bool onednn_amx() { return false; }

bool onednn_bf16_preferred() { return false; }

std::uint64_t onednn_bf16_runs() { return 0; }

#endif

}  // namespace fluxion::backend::cpu
