// dtype.cpp — dtype promotion (the element properties are inline in fluxion/dtype.hpp).
#include "fluxion/dtype.hpp"

namespace fluxion {

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
