// device.cpp — the device entries of the table: whether Vulkan is usable, the devices, synchronising.
#include <algorithm>
#include <cstring>

#include "vulkan/check.hpp"
#include "vulkan/context.hpp"
#include "vulkan/kernels.hpp"
#include "vulkan/stream.hpp"

namespace fluxion::vulkan {

bool functional(char* why, std::size_t why_size) {
    std::lock_guard lock(plugin_mutex());
    const Probe& p = probe();
    if (!p.devices.empty()) return true;
    copy_text(p.reason, why, why_size);
    return false;
}

int device_count() {
    std::lock_guard lock(plugin_mutex());
    return int(probe().devices.size());
}

void synchronize(int device) {
    std::lock_guard lock(plugin_mutex());
    stream(context(device)).finish(Stream::Wait::unlocked);
    check_validation("synchronize");
}

}  // namespace fluxion::vulkan
