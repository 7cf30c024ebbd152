// supports.cpp — the CPU table's capability query: the element types each kernel is instantiated
// for (the dispatchers of dispatch.hpp that the kernels call, f16 and bf16 through widen.cpp).
#include <cstdio>

#include "cpu/dispatch.hpp"
#include "cpu/kernels.hpp"

namespace fluxion::backend::cpu {
namespace {

bool listed(DType t, std::initializer_list<DType> types) {
    for (DType u : types)
        if (u == t) return true;
    return false;
}

// The types of dispatch_float, dispatch_numeric, dispatch_plain; nullptr for every type.
const char* supported_types(Op op) {
    switch (op) {
        case Op::fill:
        case Op::copy_strided:
        case Op::cast:
        case Op::index_select:
        case Op::where: return nullptr;
        case Op::index_add: return kNumericTypes;
        case Op::unary: return "f32, f64, f16, bf16, i32, i64";  // the integers for neg, abs, square, sign only
        case Op::binary:
        case Op::reduce: return kPlainTypes;  // bool not for sub, div, pow, sum, mean
        default: return kFloatTypes;
    }
}

bool runs(Op op, DType t) {
    using enum DType;
    switch (op) {
        case Op::fill:
        case Op::copy_strided:
        case Op::cast:
        case Op::index_select:
        case Op::where: return true;
        case Op::index_add: return listed(t, {f32, f64, f16, bf16, i32, i64, u8});
        case Op::unary: return listed(t, {f32, f64, f16, bf16, i32, i64});
        case Op::binary:
        case Op::reduce: return listed(t, {f32, f64, f16, bf16, i32, i64, u8, boolean});
        default: return listed(t, {f32, f64, f16, bf16});
    }
}

}  // namespace

bool supports(int device, Op op, DType t, char* why, std::size_t why_size) {
    if (runs(op, t)) return true;
    if (why && why_size > 0)
        std::snprintf(why, why_size, "CPU:%d: %s has no kernel for %s (supported: %s)", device, name(op), name(t),
                      supported_types(op));
    return false;
}

}  // namespace fluxion::backend::cpu
