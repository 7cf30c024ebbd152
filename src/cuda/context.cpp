// context.cpp — probing CUDA once, and creating each device's stream and cuBLAS handle on first use.
#include "cuda/context.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "cuda/check.hpp"
#include "cuda/cublas_api.hpp"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

// cuBLAS takes its workspace from here rather than allocating during a call, which keeps its calls
// capturable into CUDA graphs. 32 MiB is what NVIDIA recommends for Hopper.
constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20;

bool driver_installed() {
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver) dlclose(driver);
    return driver != nullptr;
}

std::string runtime_version() {
    return std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
}

std::string reason_for(cudaError_t status) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (status == cudaSuccess || status == cudaErrorNoDevice) {
        if (visible) return std::string("CUDA_VISIBLE_DEVICES=\"") + visible + "\" hides every GPU";
        return "no CUDA-capable GPU was found";
    }
    if (status == cudaErrorInsufficientDriver) {
        if (!driver_installed()) return "no CUDA driver found (libcuda.so.1 cannot be loaded)";
        return "the NVIDIA driver is older than the CUDA " + runtime_version() +
               " runtime of this plugin needs; update the driver";
    }
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(status) + " (" +
           cudaGetErrorName(status) + ")";
}

std::string capability_text(int c) { return std::to_string(c / 10) + "." + std::to_string(c % 10); }

std::string too_old(const Probe& p, int device) {
    return "CUDA:" + std::to_string(device) + " (" + p.names[std::size_t(device)] + ") has compute capability " +
           capability_text(p.capability[std::size_t(device)]) + "; this plugin is built for " +
           capability_text(kMinComputeCapability) + " (Turing) and newer";
}

Probe run_probe() {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0) {
        cudaGetLastError();
        return {0, reason_for(status), {}, {}};
    }
    Probe p{count, "", {}, {}};
    bool any_usable = false;
    for (int d = 0; d < count; ++d) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
            cudaGetLastError();
            return {0, "cudaGetDeviceProperties failed for CUDA:" + std::to_string(d), {}, {}};
        }
        p.capability.push_back(prop.major * 10 + prop.minor);
        p.names.emplace_back(prop.name);
        any_usable = any_usable || p.capability.back() >= kMinComputeCapability;
    }
    // Usable when one GPU is; each older one is refused by name when it is asked for.
    if (!any_usable) return {0, too_old(p, 0), {}, {}};
    // cuBLAS only now that a GPU is there to use it (cublas_api.hpp).
    if (const std::string& why = load_cublas(); !why.empty()) return {0, why, {}, {}};
    return p;
}

Context* create_context(int device) {
    auto* ctx = new Context{.device = device};
    FLUXION_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    FLUXION_CUDA_CHECK(cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, device));
    FLUXION_CUBLAS_CHECK(cublas().create(&ctx->blas));
    FLUXION_CUBLAS_CHECK(cublas().set_stream(ctx->blas, ctx->stream));
    // f16 and bf16 GEMMs sum split-K partial products in f32 too, not in their output type, so that C
    // is rounded once as on the CPU (no effect on f32 and f64).
    FLUXION_CUBLAS_CHECK(cublas().set_math_mode(
        ctx->blas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    void* workspace = nullptr;
    FLUXION_CUDA_CHECK(cudaMalloc(&workspace, kBlasWorkspaceBytes));
    FLUXION_CUBLAS_CHECK(cublas().set_workspace(ctx->blas, workspace, kBlasWorkspaceBytes));
    return ctx;
}

struct Slot {
    std::once_flag once;
    Context* context = nullptr;
};

}  // namespace

const Probe& probe() {
    static const Probe result = run_probe();
    return result;
}

void select_device(int device) {
    select_device_to_list(device);
    const Probe& p = probe();
    if (p.capability[std::size_t(device)] < kMinComputeCapability)
        throw DeviceError("CUDA:" + std::to_string(device) + " is not usable: " + too_old(p, device));
}

void select_device_to_list(int device) {
    const Probe& p = probe();
    const std::string label = "CUDA:" + std::to_string(device);
    if (p.device_count == 0) throw DeviceError(label + " is not usable: " + p.reason);
    if (device < 0 || device >= p.device_count)
        throw DeviceError(label + " does not exist: " + std::to_string(p.device_count) +
                          " CUDA device(s) are visible, CUDA:0 to CUDA:" + std::to_string(p.device_count - 1));
    FLUXION_CUDA_CHECK(cudaSetDevice(device));
}

Context& activate(int device) {
    select_device(device);
    // Contexts live as long as the process: at exit the CUDA runtime may be torn down before
    // static destructors would run, so they are never destroyed.
    static Slot* slots = new Slot[probe().device_count];
    Slot& slot = slots[device];
    std::call_once(slot.once, [&] { slot.context = create_context(device); });
    return *slot.context;
}

namespace {
std::atomic<bool> tf32{false};
}  // namespace

bool tf32_allowed() { return tf32.load(std::memory_order_relaxed); }
void allow_tf32(bool allowed) { tf32.store(allowed, std::memory_order_relaxed); }

}  // namespace fluxion::cuda
