// openblas.cpp — choosing OpenBLAS's kernel from the CPU's feature bits, then opening it.
#include "cpu/openblas.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "fluxion/error.hpp"

namespace fluxion::backend::cpu::openblas {

namespace {

// The OpenMP build of OpenBLAS: found through libfluxion's run path (CMakeLists.txt), or through
// LD_LIBRARY_PATH where the library was moved (a GPU bundle).
constexpr const char* kLibrary = "libopenblas.so.0";

template <class F> F symbol(void* handle, const char* name) {
    void* p = dlsym(handle, name);
    if (!p) throw Error(std::string("OpenBLAS: ") + kLibrary + " has no " + name);
    return reinterpret_cast<F>(p);
}

Library open() {
    Library lib;
    const char* user = std::getenv("OPENBLAS_CORETYPE");
    if (user && *user) {
        lib.chosen = std::string("OPENBLAS_CORETYPE=") + user + ", set by the user";
    } else if (const std::string core = core_for_this_cpu(); !core.empty()) {
        setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
        lib.chosen = "OPENBLAS_CORETYPE=" + core + ", from the CPU's features";
    } else {
        lib.chosen = "OpenBLAS's own choice (no AVX2 on this CPU)";
    }
    void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!handle) throw Error(std::string("OpenBLAS cannot be loaded: ") + dlerror());
    lib.sgemm = symbol<decltype(lib.sgemm)>(handle, "cblas_sgemm");
    lib.dgemm = symbol<decltype(lib.dgemm)>(handle, "cblas_dgemm");
    lib.set_num_threads = symbol<decltype(lib.set_num_threads)>(handle, "openblas_set_num_threads");
    lib.core = symbol<char* (*)()>(handle, "openblas_get_corename")();
    return lib;
}

}  // namespace

std::string core_for_this_cpu() {
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512cd");
    if (avx512) return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return __builtin_cpu_is("amd") ? "Zen" : "Haswell";
    return "";
}

const Library& library() {
    static const Library lib = open();
    return lib;
}

}  // namespace fluxion::backend::cpu::openblas
