// exports.hpp — what libfluxion-cuda.so exports besides the backend table: memory statistics of
// the caching allocator and the TF32 switch. Programs reach them with dlsym on the loaded plugin;
// the declarations here give their exact types.
#pragma once
#include <cstddef>

#include "core/backend.hpp"

#define FLUXION_CUDA_EXPORT __attribute__((visibility("default")))

extern "C" {

// The CUDA backend's table (name "CUDA"), or null when abi_version is not the plugin's.
FLUXION_CUDA_EXPORT const fluxion::backend::Backend* fluxion_backend_entry(int abi_version);

// Bytes of `device` held by fluxion's caching allocator: handed out to tensors (allocated), taken
// from the driver (reserved = allocated + cached), and the most ever allocated at once (peak).
// Returns false, leaving the outputs alone, when the device does not exist or CUDA is unusable.
FLUXION_CUDA_EXPORT bool fluxion_cuda_memory_stats(int device, std::size_t* allocated, std::size_t* reserved,
                                                   std::size_t* peak);

// Returns the cached (free) blocks of `device` to the driver; throws fluxion::DeviceError for a
// device that does not exist.
FLUXION_CUDA_EXPORT void fluxion_cuda_empty_cache(int device);

// Lets f32 GEMMs and convolutions use TF32 tensor cores (faster, about 10 bits of mantissa).
// Off by default; fx::allow_tf32 calls it.
FLUXION_CUDA_EXPORT void fluxion_allow_tf32(bool allowed);

}  // extern "C"
