// dtype_dispatch.cuh — maps a run-time DType to the C++ element type a kernel is instantiated for.
// Each dispatcher calls `f(T{})` with the matching type, or throws fluxion::DTypeError naming `op`.
// Few sets, so that few kernels are instantiated and the plugin compiles quickly.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/dtype.hpp"

namespace fluxion::cuda {

// f32, f64: the types of the floating-point kernels.
template <class F> void dispatch_floating(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::f32: return f(float{});
        case DType::f64: return f(double{});
        default: throw_unsupported(op, t, "f32, f64");
    }
}

// f32, f64, i32, i64: unary ops that also take integers.
template <class F> void dispatch_signed(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::f32: return f(float{});
        case DType::f64: return f(double{});
        case DType::i32: return f(std::int32_t{});
        case DType::i64: return f(std::int64_t{});
        default: throw_unsupported(op, t, "f32, f64, i32, i64");
    }
}

// f32, f64, i32, i64, u8: types that add up (index_add).
template <class F> void dispatch_numeric(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::u8: return f(std::uint8_t{});
        default: return dispatch_signed(t, op, static_cast<F&&>(f));
    }
}

// The numeric types and bool: elementwise arithmetic, comparisons, reductions.
template <class F> void dispatch_plain(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::f32: return f(float{});
        case DType::f64: return f(double{});
        case DType::i32: return f(std::int32_t{});
        case DType::i64: return f(std::int64_t{});
        case DType::u8: return f(std::uint8_t{});
        case DType::boolean: return f(bool{});
        default: throw_unsupported(op, t, "f32, f64, i32, i64, u8, bool");
    }
}

// Every type (fill, casts).
template <class F> void dispatch_all(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::f16: return f(__half{});
        case DType::bf16: return f(__nv_bfloat16{});
        default: return dispatch_plain(t, op, static_cast<F&&>(f));
    }
}

// An unsigned integer of the element's size: for kernels that only move elements.
template <class F> void dispatch_bytes(DType t, F&& f) {
    switch (itemsize(t)) {
        case 1: return f(std::uint8_t{});
        case 2: return f(std::uint16_t{});
        case 4: return f(std::uint32_t{});
        default: return f(std::uint64_t{});
    }
}

}  // namespace fluxion::cuda
