// context.hpp — the state the CUDA backend keeps: whether CUDA works here at all (probed once), per
// device a compute stream and a cuBLAS handle, created on first use, and the TF32 switch.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace fluxion::cuda {

// The oldest GPUs the plugin is built for (src/cuda/CMakeLists.txt, CUDA_ARCHITECTURES): Turing.
constexpr int kMinComputeCapability = 75;  // major * 10 + minor

struct Probe {
    int device_count = 0;
    std::string reason;              // why device_count is 0
    std::vector<int> capability;     // each device's major * 10 + minor
    std::vector<std::string> names;  // each device's name, for the messages
};
const Probe& probe();

struct Context {
    int device = 0;
    cudaStream_t stream = nullptr;  // non-blocking; every kernel and copy on this device runs on it
    cublasHandle_t blas = nullptr;  // bound to `stream`
    int sm_count = 0;
};

// Checks the index and the device's compute capability (fluxion::DeviceError naming them) and makes
// the device current on this thread.
void select_device(int device);
// The same without the capability check: a GPU too old to run kernels is still listed.
void select_device_to_list(int device);
// select_device, then the device's context.
Context& activate(int device);

// Whether f32 GEMMs and convolutions may use TF32 tensor cores: off by default, so that results
// match the CPU to f32 rounding; training may turn it on for speed (fluxion_cuda_allow_tf32,
// exports.hpp). Plugin-wide.
bool tf32_allowed();
void allow_tf32(bool allowed);

}  // namespace fluxion::cuda
