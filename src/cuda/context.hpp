// context.hpp — the state the CUDA backend keeps: whether CUDA works here at all (probed once), and
// per device a compute stream and a cuBLAS handle, created on first use.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace fluxion::cuda {

struct Probe {
    int device_count = 0;
    std::string reason;  // why device_count is 0
};
const Probe& probe();

struct Context {
    int device = 0;
    cudaStream_t stream = nullptr;  // non-blocking; every kernel and copy on this device runs on it
    cublasHandle_t blas = nullptr;  // bound to `stream`
    int sm_count = 0;
};

// Checks the index (fluxion::DeviceError naming it) and makes the device current on this thread.
void select_device(int device);
// select_device, then the device's context.
Context& activate(int device);

}  // namespace fluxion::cuda
