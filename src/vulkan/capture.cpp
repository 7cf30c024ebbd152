// capture.cpp — the table's recorded submissions (fx::compile's replays as one command buffer):
// the device's stream captures between capture_begin and capture_end (stream.hpp).
#include <memory>

#include "vulkan/check.hpp"
#include "vulkan/context.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/stream.hpp"

namespace fluxion::vulkan {

void capture_begin(int device) {
    std::lock_guard lock(plugin_mutex());
    Stream& s = stream(context(device));
    s.finish();  // what came before runs as usual
    s.begin_capture();
}

void* capture_end(int device) {
    std::lock_guard lock(plugin_mutex());
    Stream& s = stream(context(device));
    return s.end_capture().release();
}

void capture_run(int device, void* recording) {
    std::lock_guard lock(plugin_mutex());
    Stream& s = stream(context(device));
    s.run(*static_cast<Recording*>(recording));
    check_validation("a recorded submission");
}

void capture_free(int device, void* recording) {
    std::lock_guard lock(plugin_mutex());
    stream(context(device)).free(std::unique_ptr<Recording>(static_cast<Recording*>(recording)));
}

}  // namespace fluxion::vulkan
