// stream.hpp — recording work for a device's queue. Kernels and copies are recorded into one
// command buffer and submitted in a batch when the host needs a result (synchronize, copy_to_host)
// or the staging memory of the batch is full; the host then waits on the batch's fence. Between
// two commands a memory barrier is recorded only when the second touches a buffer the first wrote,
// or writes one the first read (buffer granularity), so independent kernels may overlap.
//
// A stream can also capture (fx::compile's recorded submissions): between begin_capture and
// end_capture, commands go to a command buffer of their own and staging memory comes from the
// recording's own host-visible buffer, so that the recording can be submitted again and again;
// what must be redone on the host before each submission (re-reading the host source of an
// upload, recomputing an optimiser's parameters) is registered with on_run. A capture belongs to
// the thread that began it: other threads' work meanwhile (a data loader's upload of the next
// batch) goes to the batch as usual and runs once.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <initializer_list>
#include <thread>
#include <vector>

#include "vulkan/context.hpp"

namespace fluxion::vulkan {

struct Access {
    VkBuffer buffer;
    bool write;
};

// Host-visible memory valid until the batch it was taken for has run.
struct Staged {
    VkBuffer buffer;
    VkDeviceSize offset;
    void* host;
};

// Commands recorded into one command buffer, with the buffers touched since its last barrier
// (a few at a time: flat lists, whose capacity stays, so that recording allocates nothing).
struct Commands {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    bool recording = false;
    std::vector<VkBuffer> read, written;
};

// Host-visible memory for storage-buffer reads and transfers, mapped.
struct HostBuffer {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    char* host = nullptr;
};

// A captured submission: its commands, its own staging memory (parameter blocks, uploads), what
// the host redoes before each submission, and the scratch memory its kernels use.
struct Recording {
    Commands commands;
    HostBuffer staging;
    std::size_t used = 0;
    std::vector<std::function<void()>> on_run;
    std::vector<void*> kept;
};

class Stream {
public:
    explicit Stream(Context& ctx);

    // The command buffer, begun, after the barrier the accesses need.
    VkCommandBuffer record(const Access* accesses, std::size_t n);
    VkCommandBuffer record(std::initializer_list<Access> accesses) { return record(accesses.begin(), accesses.size()); }
    // `bytes` of staging memory aligned for storage buffers; submits and waits for the batch
    // first when the batch's staging memory is full (while capturing: fluxion::ValueError when the
    // recording's is). `bytes` is at most capacity().
    Staged stage(std::size_t bytes);
    std::size_t capacity() const { return capacity_; }
    // Submits the batch (if any) and waits until the device has run it. A capture in progress
    // is not submitted.
    void finish();

    // ---- capturing ----
    void begin_capture();
    std::unique_ptr<Recording> end_capture();  // null if nothing was captured
    // True on the capturing thread while a capture is in progress.
    bool capturing() const { return capture_ != nullptr && std::this_thread::get_id() == capture_thread_; }
    // While capturing: f runs before every submission of the recording (ignored otherwise).
    void on_run(std::function<void()> f);
    // While capturing: device memory (a kernel's scratch) the recording uses; freed with it.
    void keep(void* device_ptr);
    // Finishes the batch, runs the recording's host work, submits it and waits.
    void run(Recording& r);
    void free(std::unique_ptr<Recording> r);

private:
    void submit_and_wait(VkCommandBuffer cmd);
    Commands& current();

    Context& ctx_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    Commands batch_;
    VkFence fence_ = VK_NULL_HANDLE;
    VkBuffer staging_ = VK_NULL_HANDLE;
    VkDeviceMemory staging_memory_ = VK_NULL_HANDLE;
    char* staging_host_ = nullptr;
    std::size_t capacity_ = 0, used_ = 0;
    std::unique_ptr<Recording> capture_;
    std::thread::id capture_thread_;
};

Stream& stream(Context& ctx);

}  // namespace fluxion::vulkan
