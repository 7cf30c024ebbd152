// cudnn_api.cpp — finding cuDNN 9 and its functions at run time.
#include "cuda/cudnn_api.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

constexpr const char* kLibrary = "libcudnn.so.9";

// Fills `api`, or returns why it cannot be.
std::string load(CudnnApi& api) {
    // Kept loaded for the life of the process.
    void* library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!library) return dlerror();
    std::string missing;
    auto find = [&](auto& function, const char* symbol) {
        function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, symbol));
        if (!function) missing += std::string(missing.empty() ? "" : ", ") + symbol;
    };
    find(api.get_error_string, "cudnnGetErrorString");
    find(api.create, "cudnnCreate");
    find(api.set_stream, "cudnnSetStream");
    find(api.create_tensor_descriptor, "cudnnCreateTensorDescriptor");
    find(api.set_tensor_4d_descriptor, "cudnnSetTensor4dDescriptor");
    find(api.create_filter_descriptor, "cudnnCreateFilterDescriptor");
    find(api.set_filter_4d_descriptor, "cudnnSetFilter4dDescriptor");
    find(api.create_convolution_descriptor, "cudnnCreateConvolutionDescriptor");
    find(api.set_convolution_2d_descriptor, "cudnnSetConvolution2dDescriptor");
    find(api.set_convolution_group_count, "cudnnSetConvolutionGroupCount");
    find(api.set_convolution_math_type, "cudnnSetConvolutionMathType");
    find(api.get_forward_algorithm, "cudnnGetConvolutionForwardAlgorithm_v7");
    find(api.get_backward_data_algorithm, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    find(api.get_backward_filter_algorithm, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    find(api.convolution_forward, "cudnnConvolutionForward");
    find(api.convolution_backward_data, "cudnnConvolutionBackwardData");
    find(api.convolution_backward_filter, "cudnnConvolutionBackwardFilter");
    if (!missing.empty()) return std::string(kLibrary) + " lacks " + missing;
    auto optional = [&](auto& function, const char* symbol) {
        function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, symbol));
    };
    optional(api.find_forward_algorithm, "cudnnFindConvolutionForwardAlgorithmEx");
    optional(api.find_backward_data_algorithm, "cudnnFindConvolutionBackwardDataAlgorithmEx");
    optional(api.find_backward_filter_algorithm, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    return "";
}

const CudnnApi* load_once() {
    // Lets the im2col + GEMM path be tested on machines that have cuDNN.
    if (const char* off = std::getenv("FLUXION_CUDA_DISABLE_CUDNN"); off && std::strcmp(off, "0") != 0) {
        std::fprintf(stderr, "fluxion: cuDNN disabled by FLUXION_CUDA_DISABLE_CUDNN; CUDA convolutions use im2col + GEMM.\n");
        return nullptr;
    }
    static CudnnApi api{};
    const std::string failure = load(api);
    if (failure.empty()) return &api;
    std::fprintf(stderr,
                 "fluxion: cuDNN 9 is not usable (%s); CUDA convolutions fall back to im2col + GEMM, which is "
                 "slower. Install cuDNN 9 for CUDA 13 to speed them up.\n",
                 failure.c_str());
    return nullptr;
}

}  // namespace

const CudnnApi* cudnn_api() {
    static const CudnnApi* api = load_once();
    return api;
}

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
    const char* base = std::strrchr(file, '/');
    const CudnnApi* api = cudnn_api();
    throw Error(std::string("cuDNN: ") + call + " (" + (base ? base + 1 : file) + ":" + std::to_string(line) +
                ") failed: " + (api ? api->get_error_string(status) : "") + " (status " +
                std::to_string(static_cast<int>(status)) + ")");
}

}  // namespace fluxion::cuda
