// vulkan_environment.cpp — linked into every test program: before main, points the Vulkan loader at
// Mesa's lavapipe (a conformant Vulkan on the CPU), whatever GPU drivers are installed, and turns on
// the Khronos validation layer with synchronization validation (src/vulkan/context.cpp), under
// which any validation message fails the test that caused it. Variables already set win, so that
// a run can name another driver (ctest's vulkan.loader_without_driver does).
#include <cstdlib>

namespace {

const bool kVulkanEnvironment = [] {
    setenv("VK_DRIVER_FILES", "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json", 0);
    setenv("FLUXION_VULKAN_VALIDATION", "1", 0);
    return true;
}();

}  // namespace
