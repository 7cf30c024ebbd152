// openblas.hpp — OpenBLAS, opened on first use with its kernel chosen from the CPU's features.
//
// OpenBLAS picks its kernels once, when it is loaded, from a table of processor models; a model it
// does not know (every Xeon newer than its release, many virtual machines) gets its generic SSE3
// kernel ("Prescott"), 9 times slower on AVX-512 machines. Only the variable OPENBLAS_CORETYPE,
// read at that moment, overrides it. So libfluxion does not link OpenBLAS: it sets the variable
// from the CPU's own feature bits (unless the user set it) and then opens the library.
#pragma once
#include <cblas.h>

#include <string>

namespace fluxion::backend::cpu::openblas {

struct Library {
    decltype(&cblas_sgemm) sgemm = nullptr;
    decltype(&cblas_dgemm) dgemm = nullptr;
    decltype(&openblas_set_num_threads) set_num_threads = nullptr;
    std::string core;    // the kernel OpenBLAS runs (openblas_get_corename: "SkylakeX", "Haswell", ...)
    std::string chosen;  // how: "from the CPU's features (avx512f, ...)" or "OPENBLAS_CORETYPE set by the user"
};

// The library, opened on the first call (fluxion::Error naming the library where it cannot be).
const Library& library();

// The core type this CPU's features call for: "Cooperlake" (AVX-512 with BF16), "SkylakeX"
// (AVX-512), "Zen" (AMD with AVX2), "Haswell" (AVX2 and FMA), or "" (older: OpenBLAS's own choice).
std::string core_for_this_cpu();

}  // namespace fluxion::backend::cpu::openblas
