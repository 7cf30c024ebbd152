// fluxion/detail/mixed_steps.hpp — mixed_precision.hpp's two multi-tensor kernels, where the
// device's backend has them (core/backend.hpp: nonfinite_check, mixed_optimiser_steps). Not part of
// the API: included by mixed_precision.hpp because MixedPrecision is a template over the user's model.
#pragma once
#include <functional>
#include <vector>

#include "fluxion/optimisers.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion::detail {

// A 0-d f32 tensor on the tensors' device: 0 when every element of every tensor, divided by
// `divisor` in its compute type (unless that is 1), is finite, NaN otherwise; one kernel for all.
// An undefined Tensor where the backend has no such kernel or the tensors are not all contiguous
// floating-point tensors of one type on one device (the caller composes the check then).
Tensor nonfinite_fused(const std::vector<Tensor>& tensors, double divisor);

// One step of a rule over f32 `params` (with their optimiser `states`) from 16-bit `grads` of
// the same shapes, each gradient divided by `divisor` first (unless it is 1), the updated
// parameters then rounded into `copies` (the grads' type): one kernel for all, as the widening,
// the rule's own step and the rounding would compute them one by one. `rule_step()` runs the
// rule's step on a probe tensor of the caller's, which tells its backend kernel and
// hyper-parameters (as compiled steps learn them); each state's step count advances. False, with nothing changed, where the backend
// has no such kernel, the rule runs none of the backend's (a rule of the user's own), or the
// tensors do not fit it (not contiguous, another type or device): the caller composes the step then.
bool mixed_update_fused(const std::function<void()>& rule_step, const std::vector<Tensor>& params,
                        const std::vector<Tensor>& grads, const std::vector<ParamState*>& states,
                        const std::vector<Tensor>& copies, double divisor);

}  // namespace fluxion::detail
