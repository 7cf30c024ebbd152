// The CPU backend's table, its single device, working memory and the thread count.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "cpu/fused.hpp"
#include "cpu/gemm_half.hpp"
#include "cpu/instruction_rates.hpp"
#include "cpu/kernels.hpp"
#include "cpu/onednn.hpp"
#include "cpu/openblas.hpp"
#if FLUXION_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif
#include "fluxion/error.hpp"

namespace fluxion::backend::cpu {
namespace {

int thread_count_from_env() {
    const int hardware = std::max(1, int(std::thread::hardware_concurrency()));
    const char* text = std::getenv("FLUXION_NUM_THREADS");
    if (!text || !*text) return hardware;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value < 1 || value > 4096) {
        std::fprintf(stderr,
                     "fluxion: ignoring FLUXION_NUM_THREADS='%s' (expected a whole number from 1 to 4096); "
                     "using %d threads\n",
                     text, hardware);
        return hardware;
    }
    return int(value);
}

void check_device(const char* what, int device) {
    if (device != 0)
        throw DeviceError(std::string(what) + ": CPU:" + std::to_string(device) +
                          " does not exist; the CPU backend has one device, CPU:0");
}

// The value of the first `key : value` line of /proc/cpuinfo with that key, or `otherwise`.
std::string cpuinfo_field(const std::string& key, const std::string& otherwise) {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind(key, 0) != 0) continue;
        const auto colon = line.find(':');
        if (colon == std::string::npos) break;
        const auto start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? otherwise : line.substr(start);
    }
    return otherwise;
}

std::string cpu_vendor() {
    const std::string id = cpuinfo_field("vendor_id", "");
    if (id == "GenuineIntel") return "Intel";
    if (id == "AuthenticAMD") return "AMD";
    return id;
}

// MemAvailable (what can be allocated without swapping), else the kernel's count of free pages.
std::size_t available_memory() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    std::size_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    return std::size_t(sysconf(_SC_AVPHYS_PAGES)) * std::size_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

int threads() {
    static const int count = [] {
        const int n = thread_count_from_env();
        omp_set_num_threads(n);
        openblas::library().set_num_threads(n);
        return n;
    }();
    return count;
}

Scratch::Scratch(std::size_t bytes) : data_(nullptr), owned_(bytes > kKeptScratch) {
    if (owned_) {
        data_ = alloc(0, bytes);
        return;
    }
    struct Kept {
        void* data = nullptr;
        std::size_t size = 0;
        ~Kept() { free(0, data); }
    };
    thread_local Kept kept;
    if (bytes > kept.size) {
        free(0, kept.data);
        kept.data = nullptr;
        kept.size = 0;
        kept.data = alloc(0, bytes);
        kept.size = bytes;
    }
    data_ = kept.data;
}

Scratch::~Scratch() {
    if (owned_) free(0, data_);
}

bool functional(char* why, std::size_t why_size) { return true; }

int device_count() { return 1; }

void device_properties(int device, DeviceProperties* out) {
    check_device("device_properties", device);
    *out = DeviceProperties{};
    std::snprintf(out->name, sizeof out->name, "%s", cpuinfo_field("model name", "CPU").c_str());
    std::snprintf(out->vendor, sizeof out->vendor, "%s", cpu_vendor().c_str());
    out->kind = DeviceKind::cpu;
    out->total_bytes = std::size_t(sysconf(_SC_PHYS_PAGES)) * std::size_t(sysconf(_SC_PAGESIZE));
    out->free_bytes = available_memory();
}

void synchronize(int device) {}

void copy_from_host(int device, void* dst, const void* src, std::size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
}

void copy_to_host(int device, void* dst, const void* src, std::size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
}

void copy_device(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes) {
    if (bytes) std::memcpy(dst, src, bytes);
}

}  // namespace fluxion::backend::cpu

namespace fluxion::backend {

int cpu_threads() { return cpu::threads(); }

std::string cpu_description() {
    __builtin_cpu_init();
    const char* isa = __builtin_cpu_supports("avx512bf16")                              ? "AVX-512 with BF16"
                      : __builtin_cpu_supports("avx512f")                               ? "AVX-512"
                      : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "AVX2 with FMA"
                      : __builtin_cpu_supports("avx")                                   ? "AVX"
                                                                                        : "SSE";
    const char* threads_env = std::getenv("FLUXION_NUM_THREADS");
    const char* wait = std::getenv("OMP_WAIT_POLICY");
    const cpu::openblas::Library& blas = cpu::openblas::library();
    std::string out = "CPU: " + cpu::cpuinfo_field("model name", "unknown model") + " (" + cpu::cpu_vendor() + "), " +
                      std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " logical cores, " + isa +
                      (cpu::onednn_amx() ? ", AMX (tiles enabled by the OS)" : "") + "\n";
    out += "threads: " + std::to_string(cpu::threads()) + " (FLUXION_NUM_THREADS " +
           (threads_env ? std::string("= ") + threads_env : std::string("unset: every core")) +
           "), OpenMP wait policy " + (wait ? wait : "unset (libgomp's default, spinning a while)") + "\n";
    const cpu::SgemmChoice sgemm = cpu::sgemm_choice();
    out += std::string("matrix products: ") +
           (sgemm == cpu::SgemmChoice::by_size
                ? "f32 from 2^" + std::to_string(std::ilogb(cpu::sgemm_onednn_min_macs())) +
                      " multiply-adds in oneDNN's sgemm" +
                      (cpu::onednn_avx512() ? ""
                                            : " (but for up to 256 rows times an untransposed B with rows a multiple "
                                              "of 512 apart)") +
                      ", the rest in "
            : sgemm == cpu::SgemmChoice::onednn ? "f32 in oneDNN's sgemm (FLUXION_SGEMM=onednn), f64 in "
                                                : "") +
           "OpenBLAS, kernel " + blas.core + " (" + blas.chosen + ")\n";
#if FLUXION_HAVE_ONEDNN
    const dnnl_version_t* v = dnnl_version();
    out += "convolutions: oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
           std::to_string(v->patch) + " where measured faster, else fluxion's own kernels or im2col + GEMM\n";
    char rate[160] = "";
    if (const double r = cpu::bf16_dot_rate_over_f32_fma(); r > 0)
        std::snprintf(rate, sizeof rate, "; bf16 dot products measured at %.2fx the f32 FMA's multiply-adds per second",
                      r);
    const std::string why = cpu::onednn_bf16_native() ? std::string(", faster here than oneDNN's bf16 kernels") + rate
                                                      : std::string(" (no bf16 instructions)");
    const std::string kernels = cpu::onednn_amx() ? " on AMX tiles" : "";
    out += cpu::onednn_bf16_preferred()
               ? std::string("bf16 products and convolutions: oneDNN's bf16 kernels") + kernels + rate + "\n"
               : std::string("bf16 convolutions: widened to f32") + why + "\n";
#else
    out += "convolutions: im2col + GEMM and fluxion's own kernels (built without oneDNN)\n";
#endif
    if (!cpu::onednn_bf16_preferred())
        out += cpu::gemm_half_preferred()
                   ? "f16 and bf16 products: converted to f32 as they are packed, in fluxion's AVX2 kernel\n"
                   : "f16 and bf16 products: widened to f32 copies, then the f32 product\n";
    return out;
}

const Backend& cpu_backend() {
    static const Backend table = [] {
        cpu::threads();
        return Backend{
            .abi_version = kAbiVersion,
            .name = "CPU",
            .priority = 0,
            .functional = cpu::functional,
            .device_count = cpu::device_count,
            .device_properties = cpu::device_properties,
            .supports = cpu::supports,
            .synchronize = cpu::synchronize,
            .alloc = cpu::alloc,
            .free = cpu::free,
            .copy_from_host = cpu::copy_from_host,
            .copy_to_host = cpu::copy_to_host,
            .copy_device = cpu::copy_device,
            .fill = cpu::fill,
            .copy_strided = cpu::copy_strided,
            .cast = cpu::cast,
            .index_select = cpu::index_select,
            .index_add = cpu::widen::index_add,
            .unary = cpu::unary,
            .unary_backward = cpu::unary_backward,
            .binary = cpu::binary,
            .where = cpu::where,
            .reduce = cpu::reduce,
            .gemm = cpu::widen::gemm,
            .conv2d = cpu::widen::conv2d,
            .conv2d_backward_input = cpu::widen::conv2d_backward_input,
            .conv2d_backward_weight = cpu::widen::conv2d_backward_weight,
            .pool2d = cpu::widen::pool2d,
            .pool2d_backward = cpu::widen::pool2d_backward,
            .softmax = cpu::widen::softmax,
            .softmax_backward = cpu::widen::softmax_backward,
            .lstm_cell = cpu::lstm_cell,
            .lstm_cell_backward = cpu::lstm_cell_backward,
            .optimiser_step = cpu::widen::optimiser_step,
            .elementwise_chain = cpu::elementwise_chain,
            .conv2d_epilogue = cpu::conv2d_epilogue,
            .pool2d_backward_activation = cpu::pool2d_backward_activation,
            .optimiser_steps = cpu::optimiser_steps,
            // A compiled replay on the CPU is already a loop of direct calls: nothing to record.
            .capture_begin = nullptr,
            .capture_end = nullptr,
            .capture_run = nullptr,
            .capture_free = nullptr,
            .nonfinite_check = cpu::nonfinite_check,
            .mixed_optimiser_steps = cpu::mixed_optimiser_steps,
            .batch_norm = cpu::batch_norm,
            .batch_norm_backward = cpu::batch_norm_backward,
        };
    }();
    return table;
}

}  // namespace fluxion::backend
