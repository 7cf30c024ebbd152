// dtype.cpp — element sizes and names of fluxion's dtypes.
#include "cuda/dtype.hpp"

#include <string>

#include "fluxion/error.hpp"

namespace fluxion::cuda {

std::size_t element_size(DType t) {
    switch (t) {
        case DType::f64:
        case DType::i64: return 8;
        case DType::f32:
        case DType::i32: return 4;
        case DType::f16:
        case DType::bf16: return 2;
        case DType::u8:
        case DType::boolean: return 1;
    }
    throw DTypeError("CUDA: unknown dtype code " + std::to_string(static_cast<int>(t)));
}

const char* dtype_name(DType t) {
    switch (t) {
        case DType::f32: return "f32";
        case DType::f64: return "f64";
        case DType::i32: return "i32";
        case DType::i64: return "i64";
        case DType::u8: return "u8";
        case DType::boolean: return "bool";
        case DType::f16: return "f16";
        case DType::bf16: return "bf16";
    }
    return "unknown";
}

void throw_unsupported(const char* op, DType t, const char* supported) {
    throw DTypeError(std::string(op) + " on CUDA does not support " + dtype_name(t) + " (supported: " + supported +
                     "); convert with fx::cast");
}

}  // namespace fluxion::cuda
