// precision.hpp — whether f32 GEMMs and convolutions may use TF32 tensor cores. Off by default, so
// that results match the CPU to f32 rounding; training may turn it on for speed
// (fluxion_cuda_allow_tf32, exports.hpp).
#pragma once

namespace fluxion::cuda {

bool tf32_allowed();
void allow_tf32(bool allowed);

}  // namespace fluxion::cuda
