// outputsize.cpp — the shapes-only tables behind fx::outputsize: a backend's table with every kernel
// replaced by one that returns at once, put in place of the real one by the same thread-local switch
// that fx::compile's recorder uses (core/tensor_impl.hpp), so the ops above run unchanged.
#include "fluxion/outputsize.hpp"

#include <type_traits>

#include "core/backend.hpp"
#include "core/registry.hpp"
#include "core/tensor_impl.hpp"

namespace fluxion::detail {
namespace {

template <class F> struct Idle;
template <class R, class... A> struct Idle<R (*)(A...)> {
    static R run(A...) {
        if constexpr (!std::is_void_v<R>) return R{};
    }
};
// An optional entry stays null.
template <class F> void idle(F& f) {
    if (f) f = &Idle<F>::run;
}

// Every kernel entry, as recording_table.cpp's size check lists them.
static_assert(sizeof(backend::Backend) == 46 * sizeof(void*), "the backend table changed: make its new kernels idle here");

backend::Backend shapes_only_table(const backend::Backend& real) {
    backend::Backend b = real;
    idle(b.fill), idle(b.copy_strided), idle(b.cast), idle(b.index_select), idle(b.index_add);
    idle(b.unary), idle(b.unary_backward), idle(b.binary), idle(b.where), idle(b.reduce), idle(b.gemm);
    idle(b.conv2d), idle(b.conv2d_backward_input), idle(b.conv2d_backward_weight);
    idle(b.pool2d), idle(b.pool2d_backward), idle(b.softmax), idle(b.softmax_backward);
    idle(b.lstm_cell), idle(b.lstm_cell_backward), idle(b.optimiser_step);
    idle(b.elementwise_chain), idle(b.conv2d_epilogue), idle(b.pool2d_backward_activation), idle(b.optimiser_steps);
    idle(b.nonfinite_check), idle(b.mixed_optimiser_steps), idle(b.batch_norm), idle(b.batch_norm_backward);
    return b;
}

thread_local backend::Backend t_tables[2];

}  // namespace

ShapesOnly::ShapesOnly(const Device& device) {
    if (t_recorded_table[0] || t_recorded_table[1])
        throw ValueError("fx::outputsize: not inside a compiled step's trace or another outputsize on this thread");
    const backend::Backend* real[2] = {&backend::cpu_backend(), device.is_cpu() ? nullptr : &backend_for(device)};
    for (int s : {0, 1}) {
        if (!real[s]) continue;
        t_tables[s] = shapes_only_table(*real[s]);
        t_recorded_table[s] = real[s];
        t_recording_table[s] = &t_tables[s];
    }
}

ShapesOnly::~ShapesOnly() {
    for (int s : {0, 1}) t_recorded_table[s] = t_recording_table[s] = nullptr;
}

}  // namespace fluxion::detail
