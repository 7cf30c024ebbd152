// recurrent.cpp — the LSTM cell's gate arithmetic for one time step, forward and backward, one
// dispatch each (lstm_cell.comp), in f32 and f64 (the types the LSTM layers give the kernel; f16 and
// bf16 steps are composed).
#include <string>

#include "vulkan/kernels.hpp"
#include "vulkan/launch.hpp"

namespace fluxion::vulkan {

namespace {

// Bytes of `rows` rows of `width` elements at row stride `ld`.
std::size_t strided_bytes(std::int64_t rows, std::int64_t width, std::int64_t ld, std::size_t size) {
    return std::size_t((rows - 1) * ld + width) * size;
}

}  // namespace

void lstm_cell(int device, DType t, std::int64_t n, std::int64_t h, void* gates, std::int64_t ld_gates,
               const void* c_prev, void* c, void* h_out, std::int64_t ld_h) {
    const char* op = "lstm_cell";
    if (n <= 0 || h <= 0) return;
    Launch launch(device, op);
    const std::string type = float_suffix(t, launch.ctx(), op);
    check_count(n * ld_gates, launch.ctx(), op);
    const std::size_t size = itemsize(t), state = std::size_t(n * h) * size;
    const std::int32_t off0 = launch.buffer(gates, strided_bytes(n, 4 * h, ld_gates, size), size, true);
    const std::int32_t off1 = launch.buffer(c_prev, state, size, false);
    const std::int32_t off2 = launch.buffer(c, state, size, true);
    const std::int32_t off3 = launch.buffer(h_out, strided_bytes(n, h, ld_h, size), size, true);
    for (std::int64_t v : {n, h, ld_gates, ld_h, std::int64_t(0), std::int64_t(0)}) launch.param(std::int32_t(v));
    for (std::int32_t o : {off0, off1, off2, off3, 0, 0, 0}) launch.param(o);
    launch.run("lstm_cell_" + type, launch.groups(n * h));
}

void lstm_cell_backward(int device, DType t, std::int64_t n, std::int64_t h, const void* gates, std::int64_t ld_gates,
                        const void* c_prev, const void* c, const void* gh, std::int64_t ld_gh, const void* gh_next,
                        void* gc, void* dgates) {
    const char* op = "lstm_cell_backward";
    if (n <= 0 || h <= 0) return;
    Launch launch(device, op);
    const std::string type = float_suffix(t, launch.ctx(), op);
    check_count(n * ld_gates, launch.ctx(), op);
    const std::size_t size = itemsize(t), state = std::size_t(n * h) * size;
    const std::size_t gate_bytes = strided_bytes(n, 4 * h, ld_gates, size);
    // gates is bound writable: dgates may be the same memory (lstm_cell.comp).
    const std::int32_t off0 = launch.buffer(gates, gate_bytes, size, dgates == gates);
    const std::int32_t off1 = launch.buffer(c_prev, state, size, false);
    const std::int32_t off2 = launch.buffer(c, state, size, false);
    const std::int32_t off3 = launch.buffer(gh, strided_bytes(n, h, ld_gh, size), size, false);
    const std::int32_t off4 = launch.buffer(gh_next ? gh_next : c, state, size, false);  // c: bound, never read
    const std::int32_t off5 = launch.buffer(gc, state, size, true);
    const std::int32_t off6 = launch.buffer(dgates, gate_bytes, size, true);
    for (std::int64_t v : {n, h, ld_gates, std::int64_t(0), ld_gh, std::int64_t(gh_next != nullptr)})
        launch.param(std::int32_t(v));
    for (std::int32_t o : {off0, off1, off2, off3, off4, off5, off6}) launch.param(o);
    launch.run("lstm_cell_backward_" + type, launch.groups(n * h));
}

}  // namespace fluxion::vulkan
