// stream.hpp — recording work for a device's queue. Kernels and copies are recorded into the open
// batch (one command buffer and its staging memory) and submitted when the host needs a result
// (synchronize, copy_to_host) or the batch's staging memory is full. Submissions signal the stream's
// timeline semaphore; a thread that waits for one lets go of the plugin lock meanwhile, and the next
// batch is recorded into another command buffer, so that other threads (a data loader's upload of
// the next batch) record and stage while the device runs a step. Each batch begins with a barrier
// that orders it after the submissions before it; within a batch, a memory barrier is recorded only
// when a command touches a buffer an earlier one wrote, or writes one an earlier one read (buffer
// granularity), so independent kernels may overlap.
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

struct Batch;

// Host-visible memory valid until the batch it was taken for has run.
struct Staged {
    VkBuffer buffer;
    VkDeviceSize offset;
    void* host;
    Batch* batch;  // null while capturing
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
HostBuffer host_buffer(Context& ctx, std::size_t bytes);
void destroy(Context& ctx, HostBuffer& b);

// Commands and the staging memory they read, submitted together: the open batch of a stream, or
// an upload on the transfer queue. In use again once its timeline has reached `value` and no thread
// reads its staging memory any more.
struct Batch {
    Commands commands;
    HostBuffer staging;
    std::size_t used = 0;
    std::uint64_t value = 0;  // signalled when its last submission has run
    int readers = 0;          // threads that wait to read its staging memory
};

// A captured submission: its commands, its own staging memory (parameter blocks, uploads), what
// the host redoes before each submission, the scratch memory its kernels use, and the device
// memory its commands touch (stamped with each submission, see allocator.hpp).
struct Recording {
    Commands commands;
    HostBuffer staging;
    std::size_t used = 0;
    std::vector<std::function<void()>> on_run;
    std::vector<void*> kept;
    std::vector<void*> touched;
};

class Stream {
public:
    explicit Stream(Context& ctx);

    // The command buffer, begun, after the barrier the accesses need.
    VkCommandBuffer record(const Access* accesses, std::size_t n);
    VkCommandBuffer record(std::initializer_list<Access> accesses) { return record(accesses.begin(), accesses.size()); }
    // `bytes` of staging memory aligned for storage buffers; submits the open batch and opens
    // another first when its staging memory is full (while capturing: fluxion::ValueError when the
    // recording's is). `bytes` is at most capacity().
    Staged stage(std::size_t bytes);
    std::size_t capacity() const;
    // The value the stream's timeline reaches when what is recorded now has run.
    std::uint64_t open_value() const { return submitted_ + 1; }
    std::uint64_t submitted() const { return submitted_; }
    VkSemaphore timeline() const { return timeline_; }
    // Submits the open batch, if it holds commands, without waiting.
    void flush();
    enum class Wait { locked, unlocked };
    // Submits the open batch and waits until the device has run every submission so far, the
    // transfer queue's included. Wait::unlocked lets go of the plugin lock meanwhile: only for
    // callers that keep no plugin state across the call.
    void finish(Wait how = Wait::locked);
    // Copies `bytes` of memory staged by this thread (and written by commands recorded since) to
    // `dst` once they have run; submits the batch and waits without the plugin lock.
    void read(const Staged& staged, void* dst, std::size_t bytes);
    // The next submission waits until `semaphore` reaches `value` (an upload on the transfer queue).
    void after(VkSemaphore semaphore, std::uint64_t value);

    // ---- capturing ----
    void begin_capture();
    std::unique_ptr<Recording> end_capture();  // null if nothing was captured
    // True on the capturing thread while a capture is in progress.
    bool capturing() const { return capture_ != nullptr && std::this_thread::get_id() == capture_thread_; }
    // While capturing: f runs before every submission of the recording (ignored otherwise).
    void on_run(std::function<void()> f);
    // While capturing: device memory (a kernel's scratch) the recording uses; freed with it.
    void keep(void* device_ptr);
    // While capturing: a block of device memory (its base) the recording's commands touch.
    void touch(void* device_ptr);
    // Submits the open batch, runs the recording's host work, submits the recording and waits
    // for it without the plugin lock.
    void run(Recording& r);
    void free(std::unique_ptr<Recording> r);

private:
    Batch& open();
    void submit(VkCommandBuffer cmd);
    // Until the timeline reaches `value` (and, with `uploads`, the transfer queue's last upload).
    void wait(std::uint64_t value, Wait how, bool uploads = false);
    Commands& current();

    Context& ctx_;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkSemaphore timeline_ = VK_NULL_HANDLE;
    std::uint64_t submitted_ = 0;
    std::vector<std::unique_ptr<Batch>> batches_;
    Batch* open_ = nullptr;
    VkSemaphore upload_ = VK_NULL_HANDLE;  // the transfer queue's timeline, and the value that
    std::uint64_t upload_value_ = 0;       // the next submission waits for
    std::uint64_t upload_waited_ = 0;      // (the last value a submission waited for)
    std::unique_ptr<Recording> capture_;
    std::thread::id capture_thread_;
};

VkSemaphore timeline_semaphore(Context& ctx);
// Submits `cmd` on `queue`, signalling `signal` at `signal_value`, after `wait` reaches `wait_value`
// at `wait_stages` (no wait when `wait_value` is 0).
void submit_on(VkQueue queue, VkCommandBuffer cmd, VkSemaphore signal, std::uint64_t signal_value, VkSemaphore wait,
               std::uint64_t wait_value, VkPipelineStageFlags wait_stages);
VkCommandBuffer command_buffer(Context& ctx, VkCommandPool pool);
// Shader and transfer writes before, any shader or transfer access after; `stages` limits both
// sides (a batch on the transfer queue has only transfer stages).
void full_barrier(VkCommandBuffer cmd,
                  VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT);

Stream& stream(Context& ctx);

}  // namespace fluxion::vulkan
