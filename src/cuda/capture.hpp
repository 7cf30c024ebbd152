// capture.hpp — fx::compile's recorded submissions on CUDA: a phase of a compiled step captured from
// the device's stream into a CUDA graph once, then launched whole at every replay (backend.hpp,
// "recorded submissions").
//
// While a thread captures, the kernels it launches on the device's stream go into the graph. What
// the graph must redo on the host before each launch (re-reading the source of an upload,
// recomputing an optimiser step's hyper-parameters) is registered with on_run and reads into
// pinned memory the recording owns; device memory a captured kernel used (scratch) is kept by the
// recording instead of returning to the cache. Other threads' copies (a data loader's uploads) wait
// until the capture ends, so that none of them joins the graph. (C++17: the .cu files include this.)
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

namespace fluxion::cuda {

struct Recording {
    int device = 0;
    cudaGraphExec_t exec = nullptr;
    std::vector<std::function<void()>> on_run;
    std::vector<void*> pinned;  // host memory from cudaHostAlloc
    std::vector<void*> kept;    // device blocks from allocate()
};

// The recording this thread is capturing on `device`, or null.
Recording* capturing(int device);
// Pinned host memory that lives as long as the recording.
void* recording_pinned(Recording& r, std::size_t bytes);
// Held by a copy for its duration: waits while another thread captures on `device` (the empty lock
// on the capturing thread itself).
std::unique_lock<std::mutex> exclude_capture(int device);

void capture_begin(int device);
void* capture_end(int device);
void capture_run(int device, void* recording);
void capture_free(int device, void* recording);

}  // namespace fluxion::cuda
