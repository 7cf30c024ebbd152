// capture.cpp — CUDA graphs for fx::compile's recorded submissions (capture.hpp). The capture runs on
// the device's own stream in relaxed mode: a kernel that allocates a fresh block (cudaMalloc) may
// be captured; one that synchronises, or frees memory to the driver, ends the capture with an
// error, and the plan then replays call by call (compile/plans.cpp).
#include "cuda/capture.hpp"

#include <memory>
#include <string>
#include <utility>

#include "cuda/allocator.hpp"
#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

// Per device: held by the capturing thread from capture_begin to capture_end.
std::mutex& capture_mutex(int device) {
    static std::mutex* all = new std::mutex[probe().device_count];  // lives as long as the process
    return all[device];
}

struct ThreadCapture {
    int device = -1;
    std::unique_ptr<Recording> recording;
    std::unique_lock<std::mutex> lock;
};
thread_local ThreadCapture current;

std::string label(int device) { return "CUDA:" + std::to_string(device); }

// What a recording owns, given back; not while capturing.
void release(Recording& r) {
    if (r.exec) cudaGraphExecDestroy(r.exec);
    for (void* p : r.pinned) cudaFreeHost(p);
    for (void* block : r.kept) deallocate(r.device, block);
    r = Recording{};
}

}  // namespace

Recording* capturing(int device) { return current.device == device ? current.recording.get() : nullptr; }

void* recording_pinned(Recording& r, std::size_t bytes) {
    r.pinned.reserve(r.pinned.size() + 1);
    void* p = nullptr;
    FLUXION_CUDA_CHECK(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable));
    r.pinned.push_back(p);
    return p;
}

std::unique_lock<std::mutex> exclude_capture(int device) {
    if (current.device == device) return {};
    if (device < 0 || device >= probe().device_count) select_device(device);  // throws the DeviceError
    return std::unique_lock<std::mutex>(capture_mutex(device));
}

void capture_begin(int device) {
    Context& ctx = activate(device);
    if (current.recording)
        throw ValueError("capture_begin on " + label(device) + ": this thread is already capturing on " +
                         label(current.device));
    std::unique_lock<std::mutex> lock(capture_mutex(device));
    FLUXION_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));  // what came before runs as usual
    auto recording = std::make_unique<Recording>();
    recording->device = device;
    FLUXION_CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeRelaxed));
    current.device = device;
    current.recording = std::move(recording);
    current.lock = std::move(lock);
}

void* capture_end(int device) {
    Context& ctx = activate(device);
    if (current.device != device || !current.recording)
        throw ValueError("capture_end on " + label(device) + ": this thread is not capturing there");
    std::unique_ptr<Recording> r = std::move(current.recording);
    std::unique_lock<std::mutex> lock = std::move(current.lock);
    current.device = -1;
    cudaGraph_t graph = nullptr;
    cudaError_t status = cudaStreamEndCapture(ctx.stream, &graph);
    if (status == cudaSuccess) status = cudaGraphInstantiate(&r->exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (status != cudaSuccess) {  // a call during the capture failed: nothing stays recorded
        cudaGetLastError();
        release(*r);
        return nullptr;
    }
    return r.release();
}

void capture_run(int device, void* recording) {
    Context& ctx = activate(device);
    Recording& r = *static_cast<Recording*>(recording);
    // The previous launch has finished (below), so the pinned memory it read is free to refill.
    for (const auto& f : r.on_run) f();
    FLUXION_CUDA_CHECK(cudaGraphLaunch(r.exec, ctx.stream));
    FLUXION_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

void capture_free(int device, void* recording) {
    std::unique_ptr<Recording> r(static_cast<Recording*>(recording));
    select_device(device);
    release(*r);
}

}  // namespace fluxion::cuda
