// fluxion/capabilities.hpp — the words in which a backend describes its devices and kernels:
// the kind of processor a device is, and the kernels whose element types fx::supports reports.
// Plain C++17, as the backends' own sources (CUDA's .cu files) include it too.
#pragma once

namespace fluxion {

// What kind of processor a device is. The default GPU never is a `cpu`-kind device (lavapipe,
// SwiftShader: a GPU API emulated on the CPU, slower than the CPU backend); such a device is used
// only when its backend is named.
enum class DeviceKind : int { discrete_gpu, integrated_gpu, virtual_gpu, cpu, other };
const char* name(DeviceKind kind);  // "discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other"

// The kernels every backend implements, for fx::supports.
enum class Op : int {
    fill, copy_strided, cast, index_select, index_add, unary, unary_backward, binary, where,
    reduce, gemm, conv2d, conv2d_backward_input, conv2d_backward_weight, pool2d, pool2d_backward,
    softmax, softmax_backward, optimiser_step,
};
// "gemm", "conv2d_backward_input", ...; inline because plugins, which do not link libfluxion, use it too.
constexpr const char* name(Op op) {
    constexpr const char* kNames[] = {
        "fill", "copy_strided", "cast", "index_select", "index_add", "unary", "unary_backward", "binary", "where",
        "reduce", "gemm", "conv2d", "conv2d_backward_input", "conv2d_backward_weight", "pool2d", "pool2d_backward",
        "softmax", "softmax_backward", "optimiser_step",
    };
    const int i = static_cast<int>(op);
    return i >= 0 && i <= static_cast<int>(Op::optimiser_step) ? kNames[i] : "unknown op";
}

}  // namespace fluxion
