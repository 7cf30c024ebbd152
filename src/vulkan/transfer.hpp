// transfer.hpp — uploads on the device's transfer queue (Context::transfer_queue), where it has
// one: each upload is a submission of its own that first waits, on the stream's timeline, for the
// last submission that used the destination (Resolved::used_by), and the stream's next submission
// waits for the upload. So a copy engine fills the next step's inputs while the kernels of the
// current step run, and a copy into memory that queued kernels still read waits for them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "vulkan/allocator.hpp"
#include "vulkan/context.hpp"

namespace fluxion::vulkan {

// Copies `bytes` from host memory to `to` (resolved for this upload) on the transfer queue; false,
// doing nothing, where the device has none. The host memory is free again on return.
bool upload(Context& ctx, const Resolved& to, const void* src, std::size_t bytes);
// Submissions on the transfer queue so far.
std::uint64_t transfer_uploads(Context& ctx);

}  // namespace fluxion::vulkan
