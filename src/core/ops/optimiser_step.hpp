// optimiser_step.hpp — one fused optimiser step on a parameter tensor through its backend
// (for the optimisers; see the formulas beside the kernels in src/cpu/optimiser.cpp).
#pragma once
#include <functional>

#include "core/backend.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion::detail {

// param, grad and the state tensors must share device, dtype and shape; state2 may be empty.
void optimiser_step(backend::Optimiser rule, Tensor& param, const Tensor& grad, Tensor& state1, Tensor& state2,
                    Tensor& state3, const backend::OptimiserStep& hp);

// Runs `run` with optimiser_step recording its hyper-parameters into `hp` instead of running a
// kernel (fx::compile's replays take a rule's current values so); whether it was called.
bool capture_optimiser_step(backend::OptimiserStep& hp, const std::function<void()>& run);
// The same, also telling which rule's kernel it was.
bool capture_optimiser_step(backend::OptimiserStep& hp, backend::Optimiser& rule, const std::function<void()>& run);

}  // namespace fluxion::detail
