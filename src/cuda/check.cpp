// check.cpp — the messages of failed CUDA runtime and cuBLAS calls, and of element types a kernel lacks
// (dtype.hpp).
#include "cuda/check.hpp"

#include <cstring>
#include <string>

#include "cuda/cublas_api.hpp"
#include "cuda/dtype.hpp"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {
std::string where(const char* call, const char* file, int line) {
    const char* base = std::strrchr(file, '/');
    return std::string(call) + " (" + (base ? base + 1 : file) + ":" + std::to_string(line) + ")";
}
}  // namespace

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
    // Reset the runtime's last error, so that the next call is not blamed for this one (a sticky
    // error, a fault inside a kernel, cannot be reset and stays in every later call's status).
    cudaGetLastError();
    throw Error("CUDA: " + where(call, file, line) + " failed: " + cudaGetErrorString(status) + " (" +
                cudaGetErrorName(status) + ")");
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
    const CublasApi& api = cublas();  // loaded: a cuBLAS call has failed
    throw Error("cuBLAS: " + where(call, file, line) + " failed: " + api.status_string(status) + " (" +
                api.status_name(status) + ")");
}

void throw_unsupported(const char* op, DType t, const char* supported) {
    throw DTypeError(std::string(op) + " on CUDA does not support " + fluxion::name(t) + " (supported: " + supported +
                     "); convert with fx::cast");
}

}  // namespace fluxion::cuda
