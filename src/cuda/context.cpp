// context.cpp — probing CUDA once, and creating each device's stream and cuBLAS handle on first use.
#include "cuda/context.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "cuda/check.hpp"
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

Probe run_probe() {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status == cudaSuccess && count > 0) return {count, ""};
    cudaGetLastError();
    return {0, reason_for(status)};
}

Context* create_context(int device) {
    auto* ctx = new Context{.device = device};
    FLUXION_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    FLUXION_CUDA_CHECK(cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, device));
    FLUXION_CUBLAS_CHECK(cublasCreate(&ctx->blas));
    FLUXION_CUBLAS_CHECK(cublasSetStream(ctx->blas, ctx->stream));
    void* workspace = nullptr;
    FLUXION_CUDA_CHECK(cudaMalloc(&workspace, kBlasWorkspaceBytes));
    FLUXION_CUBLAS_CHECK(cublasSetWorkspace(ctx->blas, workspace, kBlasWorkspaceBytes));
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

}  // namespace fluxion::cuda
