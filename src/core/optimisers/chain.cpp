// chain.cpp — the update of a rule that an OptimiserChain's later modifiers transform, and its
// subtraction (optimisers.hpp's detail::apply).
#include "fluxion/ops.hpp"
#include "fluxion/optimisers.hpp"

namespace fluxion::detail {

Tensor update_of(const Tensor& before, const Tensor& after) { return before - after; }

void subtract_update(Tensor& param, const Tensor& update) { param.copy_(param - update); }

}  // namespace fluxion::detail
