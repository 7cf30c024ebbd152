// supports.cpp — the CUDA table's capability query: the element types each kernel is instantiated
// for (the dispatchers of dtype_dispatch.cuh, and the checks of the cuBLAS and cuDNN calls). f16 and
// bf16 run wherever f32 does, computed in f32.
#include <cstdio>
#include <initializer_list>

#include "cuda/dtype.hpp"
#include "cuda/kernels.hpp"

namespace fluxion::cuda {
namespace {

using backend::Op;

// A set of dtypes as bits (1 << code), with the list the error message shows.
struct Types {
    unsigned bits;
    const char* text;
};

constexpr unsigned bits_of(std::initializer_list<DType> types) {
    unsigned bits = 0;
    for (DType t : types) bits |= 1u << static_cast<unsigned>(t);
    return bits;
}

Types types_of(Op op) {
    using enum DType;
    switch (op) {
        case Op::fill:
        case Op::copy_strided:
        case Op::cast:
        case Op::index_select:
        case Op::where: return {bits_of({f32, f64, i32, i64, u8, boolean, f16, bf16}), "every dtype"};
        case Op::index_add: return {bits_of({f32, f64, f16, bf16, i32, i64, u8}), "f32, f64, f16, bf16, i32, i64, u8"};
        case Op::unary:
            return {bits_of({f32, f64, f16, bf16, i32, i64}),
                    "f32, f64, f16, bf16; neg, abs, square and sign also i32, i64"};
        case Op::binary:
        case Op::reduce:
            return {bits_of({f32, f64, f16, bf16, i32, i64, u8, boolean}), "f32, f64, f16, bf16, i32, i64, u8, bool"};
        default: return {bits_of({f32, f64, f16, bf16}), "f32, f64, f16, bf16"};
    }
}

}  // namespace

bool supports(int device, Op op, DType t, char* why, std::size_t why_size) {
    const Types types = types_of(op);
    if (types.bits & (1u << static_cast<unsigned>(t))) return true;
    if (why && why_size > 0)
        std::snprintf(why, why_size, "CUDA:%d: %s has no kernel for %s (supported: %s)", device, name(op),
                      fluxion::name(t), types.text);
    return false;
}

}  // namespace fluxion::cuda
