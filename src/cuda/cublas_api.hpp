// cublas_api.hpp — cuBLAS, loaded at run time with dlopen("libcublas.so.13") once a GPU is found,
// so that a process on a machine without one never maps cuBLAS (about 200 MiB and 0.15 s of start-up
// per process, measured here). Only cuBLAS's header is used at build time, for its types; the
// functions come from dlsym.
#pragma once
#include <cublas_v2.h>

#include <string>

namespace fluxion::cuda {

struct CublasApi {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetMathMode) set_math_mode;
    decltype(&cublasSetWorkspace_v2) set_workspace;
    decltype(&cublasGemmStridedBatchedEx_64) gemm_strided_batched;
    decltype(&cublasGetStatusName) status_name;
    decltype(&cublasGetStatusString) status_string;
};

// Loads cuBLAS once; returns "" or why it cannot be loaded (the CUDA backend is then not functional:
// every matrix product needs it).
const std::string& load_cublas();
// The loaded API. Only called once load_cublas() succeeded (probe() makes that so for every device).
const CublasApi& cublas();

}  // namespace fluxion::cuda
