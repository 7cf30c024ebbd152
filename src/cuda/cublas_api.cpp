// cublas_api.cpp — finding cuBLAS and its functions at run time.
#include "cuda/cublas_api.hpp"

#include <dlfcn.h>

#include <type_traits>

namespace fluxion::cuda {

namespace {

constexpr const char* kLibrary = "libcublas.so.13";

CublasApi api{};

// Fills `api`, or returns why it cannot be.
std::string load() {
    // Kept loaded for the life of the process. Looked up as the plugin's own dependencies would be:
    // LD_LIBRARY_PATH, then the plugin's RUNPATH (the toolkit it was built with), then the system's.
    void* library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!library) return std::string("cuBLAS cannot be loaded (") + dlerror() + "); install cuBLAS for CUDA 13";
    std::string missing;
    auto find = [&](auto& function, const char* symbol) {
        function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, symbol));
        if (!function) missing += std::string(missing.empty() ? "" : ", ") + symbol;
    };
    find(api.create, "cublasCreate_v2");
    find(api.set_stream, "cublasSetStream_v2");
    find(api.set_math_mode, "cublasSetMathMode");
    find(api.set_workspace, "cublasSetWorkspace_v2");
    find(api.gemm_strided_batched, "cublasGemmStridedBatchedEx_64");
    find(api.status_name, "cublasGetStatusName");
    find(api.status_string, "cublasGetStatusString");
    if (!missing.empty()) return std::string(kLibrary) + " lacks " + missing + "; install cuBLAS for CUDA 13";
    return "";
}

}  // namespace

const std::string& load_cublas() {
    static const std::string failure = load();
    return failure;
}

const CublasApi& cublas() { return api; }

}  // namespace fluxion::cuda
