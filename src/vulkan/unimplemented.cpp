// unimplemented.cpp — the table entries the Vulkan backend does not run yet (issue 11): each
// raises fluxion::DTypeError naming the op and the device, as an unsupported type does.
#include <string>

#include "fluxion/error.hpp"
#include "vulkan/context.hpp"
#include "vulkan/kernels.hpp"

namespace fluxion::vulkan {

namespace {
[[noreturn]] void missing(int device, const char* op) {
    std::lock_guard lock(plugin_mutex());
    throw DTypeError(std::string(op) + " is not implemented on " + context(device).label() + " yet");
}
}  // namespace

void index_select(int device, DType, std::int64_t, std::int64_t, std::int64_t, const void*, const std::int64_t*,
                  std::int64_t, void*) { missing(device, "index_select"); }
void index_add(int device, DType, std::int64_t, std::int64_t, std::int64_t, const void*, const std::int64_t*,
               std::int64_t, void*) { missing(device, "index_add"); }
void unary(int device, Unary, DType, std::int64_t, const void*, void*, double, double) { missing(device, "unary"); }
void unary_backward(int device, Unary, DType, std::int64_t, const void*, const void*, const void*, void*, double,
                    double) { missing(device, "unary_backward"); }
void binary(int device, Binary, DType, const Strided*, const void*, const Strided*, const void*, void*) {
    missing(device, "binary");
}
void where(int device, DType, const Strided*, const void*, const Strided*, const void*, const Strided*, const void*,
           void*) { missing(device, "where"); }
void reduce(int device, Reduce, DType, std::int64_t, std::int64_t, std::int64_t, const void*, void*) {
    missing(device, "reduce");
}
void softmax(int device, bool, DType, std::int64_t, std::int64_t, std::int64_t, const void*, void*) {
    missing(device, "softmax");
}
void softmax_backward(int device, bool, DType, std::int64_t, std::int64_t, std::int64_t, const void*, const void*,
                      void*) { missing(device, "softmax_backward"); }
void gemm(int device, DType, bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const void*, std::int64_t,
          std::int64_t, const void*, std::int64_t, std::int64_t, double, void*, std::int64_t, std::int64_t,
          std::int64_t) { missing(device, "gemm"); }
void conv2d(int device, DType, const Conv2dShape*, const void*, const void*, void*) { missing(device, "conv2d"); }
void conv2d_backward_input(int device, DType, const Conv2dShape*, const void*, const void*, void*) {
    missing(device, "conv2d_backward_input");
}
void conv2d_backward_weight(int device, DType, const Conv2dShape*, const void*, const void*, void*) {
    missing(device, "conv2d_backward_weight");
}
void pool2d(int device, Pool, DType, const Pool2dShape*, const void*, void*) { missing(device, "pool2d"); }
void pool2d_backward(int device, Pool, DType, const Pool2dShape*, const void*, const void*, const void*, void*) {
    missing(device, "pool2d_backward");
}
void optimiser_step(int device, Optimiser, DType, std::int64_t, void*, const void*, void*, void*,
                    const OptimiserStep*) { missing(device, "optimiser_step"); }

}  // namespace fluxion::vulkan
