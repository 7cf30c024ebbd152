// dtype.cpp — the CUDA plugin's message for an element type a kernel lacks.
#include "cuda/dtype.hpp"

#include <string>

#include "fluxion/error.hpp"

namespace fluxion::cuda {

void throw_unsupported(const char* op, DType t, const char* supported) {
    throw DTypeError(std::string(op) + " on CUDA does not support " + fluxion::name(t) + " (supported: " + supported +
                     "); convert with fx::cast");
}

}  // namespace fluxion::cuda
