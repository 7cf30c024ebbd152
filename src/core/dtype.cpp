// dtype.cpp — element type properties and promotion.
#include "fluxion/dtype.hpp"

namespace fluxion {

std::size_t itemsize(DType t) {
    switch (t) {
        case DType::f64: case DType::i64: return 8;
        case DType::f32: case DType::i32: return 4;
        case DType::f16: case DType::bf16: return 2;
        case DType::u8: case DType::boolean: return 1;
    }
    return 0;
}

const char* name(DType t) {
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
    return "?";
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }
bool is_integral(DType t) { return !is_floating(t); }

DType promote(DType a, DType b) {
    if (a == b) return a;
    // Rank: bool < u8 < i32 < i64 < f16/bf16 < f32 < f64 (mixed halves go to f32).
    auto rank = [](DType t) {
        switch (t) {
            case DType::boolean: return 0;
            case DType::u8: return 1;
            case DType::i32: return 2;
            case DType::i64: return 3;
            case DType::f16: case DType::bf16: return 4;
            case DType::f32: return 5;
            case DType::f64: return 6;
        }
        return 0;
    };
    if (rank(a) == 4 && rank(b) == 4) return DType::f32;
    return rank(a) >= rank(b) ? a : b;
}

}  // namespace fluxion
