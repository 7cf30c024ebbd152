// device_collectives.hpp — collectives that run on a GPU's own memory, between GPUs (NCCL for
// CUDA), supplied by a plugin that libfluxion-distributed loads on first use, so that machines
// without the GPU library never load it. Without the plugin, device tensors go through the host.
#pragma once
#include <cstddef>
#include <vector>

#include "fluxion/distributed.hpp"

namespace fluxion::distributed::detail {

struct DeviceCollectives {
    // All tensors defined, non-empty and on one device of the plugin's type, in the same order and
    // shapes on every rank. Return new tensors on that device; mean has been checked to be floating.
    std::vector<Tensor> (*allreduce)(const std::vector<Tensor>& tensors, ReduceOp op, std::size_t bucket_bytes);
    std::vector<Tensor> (*broadcast)(const std::vector<Tensor>& tensors, int root, std::size_t bucket_bytes);
};

// The collectives for tensors on `device`, or nullptr (the CPU, or no plugin for its backend).
const DeviceCollectives* device_collectives(const Device& device);

}  // namespace fluxion::distributed::detail

// What a plugin exports (libfluxion-nccl.so: "CUDA").
extern "C" const fluxion::distributed::detail::DeviceCollectives* fluxion_device_collectives();
