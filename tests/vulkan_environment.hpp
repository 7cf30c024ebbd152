// vulkan_environment.hpp — where this machine's lavapipe driver and Khronos validation layer are,
// found as Vulkan's loader finds drivers and layers (tests/vulkan_environment.cpp points every test
// program at them).
#pragma once
#include <string>

namespace fx_test {

// The manifest (JSON) of Mesa's lavapipe: the first file in the loader's driver folders
// ($XDG_CONFIG_DIRS/vulkan/icd.d, /etc/vulkan/icd.d, $XDG_DATA_DIRS/vulkan/icd.d,
// /usr/local/share and /usr/share) whose library is libvulkan_lvp; "" where there is none.
std::string lavapipe_manifest();
// The manifest of VK_LAYER_KHRONOS_validation in the loader's explicit layer folders, or "".
std::string validation_layer_manifest();

}  // namespace fx_test
