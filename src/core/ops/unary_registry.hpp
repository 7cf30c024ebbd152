// unary_registry.hpp — what core/elementwise_formulas.def says about each backend::Unary beyond its
// formulas: which of x and y its gradient reads, and its name.
#pragma once
#include <atomic>

#include "core/backend.hpp"

namespace fluxion::detail {

enum class GradientReads { X, Y, XY, NONE };

// For measuring only (tests/test_tape_memory.cpp): while true, the tape keeps both x and y of every
// unary op, as it did before the registry said what each gradient reads.
extern std::atomic<bool> tape_keeps_x_and_y;

constexpr GradientReads gradient_reads(backend::Unary op) {
    switch (op) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    case backend::Unary::name: return GradientReads::reads;
#include "core/elementwise_formulas.def"
        default: return GradientReads::XY;
    }
}

constexpr const char* unary_name(backend::Unary op) {
    switch (op) {
#define FX_UNARY(name, code, reads, api, value, gradient) \
    case backend::Unary::name: return #name;
#include "core/elementwise_formulas.def"
        default: return "?";
    }
}

}  // namespace fluxion::detail
