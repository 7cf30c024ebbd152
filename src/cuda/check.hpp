// check.hpp — turns failed CUDA runtime and cuBLAS calls into fluxion::Error exceptions that name
// the call, where it was made, and the library's own message.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace fluxion::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
    if (status != cudaSuccess) throw_cuda_error(status, call, file, line);
}
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call, file, line);
}

}  // namespace fluxion::cuda

#define FLUXION_CUDA_CHECK(call) ::fluxion::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define FLUXION_CUBLAS_CHECK(call) ::fluxion::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: reports a bad launch configuration at once (errors inside the kernel
// surface at the next synchronising call).
#define FLUXION_CUDA_CHECK_LAUNCH(kernel) \
    ::fluxion::cuda::check_cuda(cudaGetLastError(), "launch of " kernel, __FILE__, __LINE__)
