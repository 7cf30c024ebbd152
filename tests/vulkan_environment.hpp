// vulkan_environment.hpp — where this machine's lavapipe driver and Khronos validation layer are,
// found as Vulkan's loader finds drivers and layers (tests/vulkan_environment.cpp points every test
// program at them), and whether the tests must find Vulkan usable.
#pragma once
#include <string>

namespace fx_test {

// The manifest (JSON) of Mesa's lavapipe: the first file in the loader's driver folders
// ($XDG_CONFIG_DIRS/vulkan/icd.d, /etc/vulkan/icd.d, $XDG_DATA_DIRS/vulkan/icd.d,
// /usr/local/share and /usr/share) whose library is libvulkan_lvp; "" where there is none.
std::string lavapipe_manifest();
// The manifest of VK_LAYER_KHRONOS_validation in the loader's explicit layer folders, or "".
std::string validation_layer_manifest();

// Whether Vulkan is functional here. Where Vulkan must be (this build has the Vulkan plugin, lavapipe
// and the validation layer are installed, and VK_DRIVER_FILES / VK_ICD_FILENAMES name no other
// driver), false also fails the calling test with the plugin's reason, so that the Vulkan evidence
// of the suite cannot quietly turn into skips; elsewhere false only says why in `why`.
bool vulkan_runs(std::string* why = nullptr);
// Whether the conditions above hold: Vulkan must be usable in this run.
bool vulkan_expected();

}  // namespace fx_test
