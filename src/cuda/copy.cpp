// copy.cpp — copies between the host and devices, and between devices. Host-to-device copies go
// through two pinned staging buffers in turn, so the caller's memory is free again on return while
// the DMA runs on the compute stream, and filling one buffer overlaps the transfer of the other.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "cuda/capture.hpp"
#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "cuda/kernels.hpp"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

constexpr std::size_t kStagingBytes = std::size_t{8} << 20;

struct Staging {
    std::once_flag created;
    std::mutex mutex;
    void* buffer[2] = {};
    cudaEvent_t drained[2] = {};  // recorded after the copy that last read the buffer
    std::size_t next = 0;         // the buffer the next chunk goes through, across calls
};

// Staging buffers live as long as the process (see activate() in context.cpp for why).
Staging& staging(int device) {
    static Staging* all = new Staging[probe().device_count];
    Staging& s = all[device];
    std::call_once(s.created, [&] {
        for (int i = 0; i < 2; ++i) {
            FLUXION_CUDA_CHECK(cudaHostAlloc(&s.buffer[i], kStagingBytes, cudaHostAllocPortable));
            FLUXION_CUDA_CHECK(cudaEventCreateWithFlags(&s.drained[i], cudaEventDisableTiming));
        }
    });
    return s;
}

cudaEvent_t record_event(cudaStream_t stream) {
    cudaEvent_t event = nullptr;
    FLUXION_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    FLUXION_CUDA_CHECK(cudaEventRecord(event, stream));
    return event;
}

}  // namespace

void copy_from_host(int device, void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    Context& ctx = activate(device);
    if (Recording* r = capturing(device)) {
        // Captured: the graph copies from pinned memory of its own, refilled from `src` before each launch.
        void* pinned = recording_pinned(*r, bytes);
        std::memcpy(pinned, src, bytes);
        FLUXION_CUDA_CHECK(cudaMemcpyAsync(dst, pinned, bytes, cudaMemcpyHostToDevice, ctx.stream));
        r->on_run.push_back([pinned, src, bytes] { std::memcpy(pinned, src, bytes); });
        return;
    }
    auto exclusion = exclude_capture(device);
    Staging& s = staging(device);
    std::lock_guard lock(s.mutex);
    auto* to = static_cast<char*>(dst);
    const auto* from = static_cast<const char*>(src);
    // The buffers alternate across calls too: a small copy then waits only for the copy before the
    // previous one, not for the previous one itself (which is queued behind the compute stream's
    // work), so a loader thread can stage one batch while the last is still waiting its turn.
    for (std::size_t offset = 0; offset < bytes; offset += kStagingBytes) {
        const std::size_t slot = s.next, size = std::min(kStagingBytes, bytes - offset);
        s.next = 1 - s.next;
        FLUXION_CUDA_CHECK(cudaEventSynchronize(s.drained[slot]));
        std::memcpy(s.buffer[slot], from + offset, size);
        FLUXION_CUDA_CHECK(
            cudaMemcpyAsync(to + offset, s.buffer[slot], size, cudaMemcpyHostToDevice, ctx.stream));
        FLUXION_CUDA_CHECK(cudaEventRecord(s.drained[slot], ctx.stream));
    }
}

void copy_to_host(int device, void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    Context& ctx = activate(device);
    if (capturing(device))
        throw ValueError("copy_to_host on CUDA:" + std::to_string(device) +
                         ": a recorded submission cannot read results on the host");
    auto exclusion = exclude_capture(device);
    FLUXION_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream));
    FLUXION_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

void copy_device(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    if (dst_device == src_device) {
        Context& ctx = activate(dst_device);
        auto exclusion = exclude_capture(dst_device);
        FLUXION_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream));
        return;
    }
    if (capturing(dst_device) || capturing(src_device))
        throw ValueError("copy_device from CUDA:" + std::to_string(src_device) + " to CUDA:" +
                         std::to_string(dst_device) + ": a recorded submission stays on one device");
    auto first = exclude_capture(std::min(dst_device, src_device));  // in index order: no deadlock
    auto second = exclude_capture(std::max(dst_device, src_device));
    // The copy runs on the source's stream, after the destination's earlier work; the destination's
    // stream then waits for it, so later work on either device sees the copied data.
    Context& to = activate(dst_device);
    cudaEvent_t dst_ready = record_event(to.stream);
    Context& from = activate(src_device);
    FLUXION_CUDA_CHECK(cudaStreamWaitEvent(from.stream, dst_ready, 0));
    FLUXION_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, from.stream));
    cudaEvent_t copied = record_event(from.stream);
    FLUXION_CUDA_CHECK(cudaStreamWaitEvent(to.stream, copied, 0));
    // Destroying a pending event is safe: its resources are released once it completes.
    FLUXION_CUDA_CHECK(cudaEventDestroy(dst_ready));
    FLUXION_CUDA_CHECK(cudaEventDestroy(copied));
}

}  // namespace fluxion::cuda
