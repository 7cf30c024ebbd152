// recorder.hpp — tracing one step for fx::compile (docs/ARCHITECTURE.md, "Compiled steps"). While a
// Recorder is active on a thread, the kernels of two tables run through recording tables
// (recording_table.cpp): the CPU's (host-side work such as random numbers) and the table of the
// model's device when that is not the CPU. Each kernel runs as usual and is also kept as a prepared
// call, its pointer arguments written down as references to buffers: a step input, memory allocated
// during the trace, or a fixed address (parameters, optimiser state, anything that existed before the
// trace and outlives it). Memory is told apart by space: the host's, and the device's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "core/backend.hpp"
#include "fluxion/tensor.hpp"

namespace fluxion::detail {

// Where one pointer argument of a recorded call points.
struct BufferRef {
    enum class Kind : std::uint8_t { fixed, input, traced };
    Kind kind = Kind::fixed;
    std::size_t index = 0;   // the input's or the traced buffer's number
    std::uintptr_t offset = 0;  // bytes from the buffer's start; the address itself when fixed
};

// The two memory spaces of a trace: the host's, and the model's device's (the same when that is the CPU).
enum Space : int { kHost = 0, kDevice = 1 };

// A kernel with its arguments bound; it takes its pointers, in recording order, from `ptrs`.
using PreparedCall = std::function<void(void* const* ptrs)>;

// What a call is, for the fusion pass (fusion.cpp), which merges runs of calls into the fused
// entries of their table; every other call is opaque (std::monostate). Only the arguments fusion
// looks at are kept.
struct OptimiserCall {
    backend::Optimiser rule;
    DType t;
    std::int64_t n;
    const backend::OptimiserStep* hp;  // the recorder's (then the plan's) copy, set before each replay
};
struct Conv2dCall {
    DType t;
    backend::Conv2dShape shape;
};
struct GemmCall {
    DType t;
    std::int64_t m, n, ldc, batch;
};
struct BinaryCall {
    backend::Binary op;
    DType t;
    backend::Strided a, b;
};
struct UnaryCall {
    backend::Unary op;
    DType t;
    std::int64_t n;
    double a, b;
};
struct UnaryBackwardCall {
    backend::Unary op;
    DType t;
    std::int64_t n;
    double a, b;
};
struct PoolBackwardCall {
    backend::Pool op;
    DType t;
    backend::Pool2dShape shape;
};
using Kernel = std::variant<std::monostate, OptimiserCall, Conv2dCall, GemmCall, BinaryCall, UnaryCall,
                            UnaryBackwardCall, PoolBackwardCall>;

struct RecordedCall {
    PreparedCall run;
    std::size_t first = 0;  // its pointer arguments are refs[first, first + count)
    std::size_t count = 0;
    int space = 0;          // whose table it calls: the host's (kHost) or the device's (kDevice)
    bool download = false;  // a copy from the device to host memory
    Kernel kernel = {};     // what it is, where fusion may merge it with its neighbours
    const backend::Backend* table = nullptr;  // a described call's table (untraced) and device
    int device = 0;
};

// Memory allocated while tracing; the calls that touch it give its lifetime.
struct TracedBuffer {
    int space = kHost;
    std::uintptr_t base = 0;
    std::size_t bytes = 0;
    std::int64_t first_use = -1, last_use = -1;  // call indices
    bool freed = false;
};

class Recorder {
public:
    // Starts recording the kernels this thread runs on the CPU and on `device`; `inputs` are the
    // step's arguments, on `device`.
    Recorder(std::vector<Tensor> inputs, const Device& device);
    ~Recorder();  // stops recording
    void stop();  // stops recording; what was recorded stays
    Recorder(const Recorder&) = delete;
    Recorder& operator=(const Recorder&) = delete;

    // The space of memory on `device`, or -1 for a device the trace does not follow.
    int space_of(const Device& device) const;
    void on_alloc(int space, const void* ptr, std::size_t bytes);
    void on_free(int space, const void* ptr, std::size_t bytes);
    // Appends a call whose pointer arguments are `ptrs`, all in `space` (after it has run eagerly).
    // `kernel` says what the call is (a call of `space`'s table on `device` that fusion may merge), or nothing.
    void record(int space, std::initializer_list<const void*> ptrs, PreparedCall run, Kernel kernel = {},
                int device = 0);
    void record(int space, const std::vector<const void*>& ptrs, PreparedCall run, Kernel kernel = {},
                int device = 0);
    struct Pointer {
        const void* ptr;
        int space;
    };
    // The same for a copy of `space`'s table whose arguments lie in both spaces.
    void record(int space, std::initializer_list<Pointer> ptrs, PreparedCall run, bool download = false);
    // Optimiser calls keep their hyper-parameters here, so that replays can advance the step count.
    backend::OptimiserStep* keep(const backend::OptimiserStep& hp);
    BufferRef resolve(int space, const void* ptr) const;

    std::vector<Tensor> inputs;
    Device device;  // the inputs' and the model's
    std::vector<RecordedCall> calls;
    std::vector<BufferRef> refs;
    std::vector<TracedBuffer> buffers;
    std::vector<std::unique_ptr<backend::OptimiserStep>> optimiser_steps;  // in recording order
    // Memory from before the trace that a call used and the step then freed: a replay would use it
    // after it is gone, so such a step cannot be compiled.
    bool freed_fixed = false;
    // Work the step did outside every recorded call that a replay would skip (refuse_replay).
    std::string refused;

private:
    void add_ref(std::int64_t call, int space, const void* ptr);
    std::map<std::uintptr_t, std::size_t> live_[2];  // per space: base address -> traced buffer, while allocated
    backend::Backend tables_[2];                     // the recording tables (recording_table.cpp)
};

// The recorder active on this thread, or null.
Recorder* active_recorder();

// Records a write to host memory made outside the backend (data generated on the host), so that
// a replay redoes it: `write(dst)` runs now and at every replay. Without a trace, only runs it.
void host_write(void* dst, std::function<void(void*)> write);

// Says that the step being traced (if any) did work a replay cannot redo, and why: the trace then
// makes no plan, and fx::compile runs such steps eagerly or explains (the first reason is kept).
void refuse_replay(const std::string& why);

// The table that runs `real`'s kernels and records them, their memory in `space` (recording_table.cpp).
backend::Backend recording_table(int space, const backend::Backend& real);

}  // namespace fluxion::detail
