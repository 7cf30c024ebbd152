// cudnn_api.hpp — cuDNN, loaded at run time with dlopen("libcudnn.so.9") so that the plugin works
// (with im2col + GEMM convolutions) where cuDNN is not installed. Only cuDNN's header is used at
// build time, for its types; the functions come from dlsym.
#pragma once
#include <cudnn.h>

namespace fluxion::cuda {

struct CudnnApi {
    decltype(&cudnnGetErrorString) get_error_string;
    decltype(&cudnnCreate) create;
    decltype(&cudnnSetStream) set_stream;
    decltype(&cudnnCreateTensorDescriptor) create_tensor_descriptor;
    decltype(&cudnnSetTensor4dDescriptor) set_tensor_4d_descriptor;
    decltype(&cudnnCreateFilterDescriptor) create_filter_descriptor;
    decltype(&cudnnSetFilter4dDescriptor) set_filter_4d_descriptor;
    decltype(&cudnnCreateConvolutionDescriptor) create_convolution_descriptor;
    decltype(&cudnnSetConvolution2dDescriptor) set_convolution_2d_descriptor;
    decltype(&cudnnSetConvolutionGroupCount) set_convolution_group_count;
    decltype(&cudnnSetConvolutionMathType) set_convolution_math_type;
    decltype(&cudnnGetConvolutionForwardAlgorithm_v7) get_forward_algorithm;
    decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) get_backward_data_algorithm;
    decltype(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) get_backward_filter_algorithm;
    // Optional (null where the library lacks them): algorithms measured on the call's own data.
    decltype(&cudnnFindConvolutionForwardAlgorithmEx) find_forward_algorithm;
    decltype(&cudnnFindConvolutionBackwardDataAlgorithmEx) find_backward_data_algorithm;
    decltype(&cudnnFindConvolutionBackwardFilterAlgorithmEx) find_backward_filter_algorithm;
    decltype(&cudnnConvolutionForward) convolution_forward;
    decltype(&cudnnConvolutionBackwardData) convolution_backward_data;
    decltype(&cudnnConvolutionBackwardFilter) convolution_backward_filter;
};

// The loaded API, or null when cuDNN 9 is missing or FLUXION_CUDA_DISABLE_CUDNN is set (to
// anything but 0); the first call that finds it unusable prints one warning on stderr.
const CudnnApi* cudnn_api();

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line);

}  // namespace fluxion::cuda

// `call` is made through the loaded API, e.g. FLUXION_CUDNN_CHECK(api->create(&handle)).
#define FLUXION_CUDNN_CHECK(call)                                                                  \
    do {                                                                                           \
        const cudnnStatus_t fluxion_status = (call);                                               \
        if (fluxion_status != CUDNN_STATUS_SUCCESS)                                                \
            ::fluxion::cuda::throw_cudnn_error(fluxion_status, #call, __FILE__, __LINE__);         \
    } while (0)
