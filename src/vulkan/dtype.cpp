// dtype.cpp — element sizes and names of fluxion's dtypes.
#include "vulkan/dtype.hpp"

#include <string>

#include "fluxion/error.hpp"

namespace fluxion::vulkan {

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
    throw DTypeError("Vulkan: unknown dtype code " + std::to_string(static_cast<int>(t)));
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

}  // namespace fluxion::vulkan
