// exports.hpp — what libfluxion-vulkan.so exports besides the backend table: memory statistics of
// the caching allocator, the uploads on the transfer queue, the validation message count, and a deliberate validation error that
// proves the validation hook works. Programs reach them with dlsym on the loaded plugin.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/backend.hpp"

#define FLUXION_VULKAN_EXPORT __attribute__((visibility("default")))

extern "C" {

// The Vulkan backend's table (name "Vulkan"), or null when abi_version is not the plugin's.
FLUXION_VULKAN_EXPORT const fluxion::backend::Backend* fluxion_backend_entry(int abi_version);

// Bytes of `device` held by the caching allocator (as fluxion_cuda_memory_stats). Returns false,
// leaving the outputs alone, when the device does not exist or Vulkan is unusable.
FLUXION_VULKAN_EXPORT bool fluxion_vulkan_memory_stats(int device, std::size_t* allocated, std::size_t* reserved,
                                                       std::size_t* peak);

// Waits for the device, then returns the cached (free) blocks to the driver.
FLUXION_VULKAN_EXPORT void fluxion_vulkan_empty_cache(int device);

// Messages the validation layer has reported since the process started (0 when validation is off:
// FLUXION_VULKAN_VALIDATION=1 turns it on, synchronization validation included).
FLUXION_VULKAN_EXPORT std::uint64_t fluxion_vulkan_validation_messages();

// Uploads submitted on the transfer queue of `device` so far (0 where it has none, see
// Context::transfer_queue, or does not exist).
FLUXION_VULKAN_EXPORT std::uint64_t fluxion_vulkan_transfer_uploads(int device);

// For tests of the validation hook only: makes an invalid Vulkan call on `device` (a buffer of
// size 0), which the validation layer reports when it is on. The device stays usable.
FLUXION_VULKAN_EXPORT void fluxion_vulkan_debug_invalid_call(int device);

}  // extern "C"
