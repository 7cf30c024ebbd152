// vulkan_environment.cpp — linked into every test program: before main, points the Vulkan loader at
// Mesa's lavapipe (a conformant Vulkan on the CPU), whatever GPU drivers are installed, and turns on
// the Khronos validation layer with synchronization validation (src/vulkan/context.cpp), under
// which any validation message fails the test that caused it. Variables already set win, so that
// a run can name another driver (ctest's vulkan.loader_without_driver does). Where this build has
// the Vulkan plugin (FLUXION_TEST_VULKAN_BUILT) and lavapipe runs, the tests must find Vulkan usable.
#include "vulkan_environment.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "fluxion/device.hpp"

namespace fx_test {
namespace {

namespace fs = std::filesystem;

// The loader's search order for `kind` ("icd.d", "explicit_layer.d"), as its documentation gives it.
std::vector<fs::path> loader_folders(const char* kind) {
    std::vector<fs::path> out;
    auto each = [&](const char* variable, const char* fallback) {
        const char* v = std::getenv(variable);
        std::stringstream dirs(v && *v ? v : fallback);
        for (std::string dir; std::getline(dirs, dir, ':');)
            if (!dir.empty()) out.push_back(fs::path(dir) / "vulkan" / kind);
    };
    each("XDG_CONFIG_DIRS", "/etc/xdg");
    out.push_back(fs::path("/etc/vulkan") / kind);
    each("XDG_DATA_DIRS", "/usr/local/share:/usr/share");
    return out;
}

// The first manifest in those folders whose text contains `needle` (the library it names: Mesa
// calls lavapipe's manifest lvp_icd.ARCH.json, or lvp_icd.json, so the name is not relied on).
std::string manifest_with(const char* kind, const std::string& needle) {
    for (const auto& dir : loader_folders(kind)) {
        std::error_code ec;
        std::vector<fs::path> files;
        for (const auto& f : fs::directory_iterator(dir, ec))
            if (f.path().extension() == ".json") files.push_back(f.path());
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
            std::ifstream in(f);
            const std::string text{std::istreambuf_iterator<char>(in), {}};
            if (text.find(needle) != std::string::npos) return f.string();
        }
    }
    return "";
}

// The drivers a run names itself: VK_DRIVER_FILES, or the loader's older name VK_ICD_FILENAMES.
std::string named_drivers() {
    for (const char* variable : {"VK_DRIVER_FILES", "VK_ICD_FILENAMES"})
        if (const char* v = std::getenv(variable); v && *v) return v;
    return "";
}

const bool kVulkanEnvironment = [] {
    if (const std::string lavapipe = lavapipe_manifest(); !lavapipe.empty() && named_drivers().empty())
        setenv("VK_DRIVER_FILES", lavapipe.c_str(), 0);
    setenv("FLUXION_VULKAN_VALIDATION", "1", 0);
    return true;
}();

}  // namespace

std::string lavapipe_manifest() { return manifest_with("icd.d", "libvulkan_lvp"); }
std::string validation_layer_manifest() { return manifest_with("explicit_layer.d", "VK_LAYER_KHRONOS_validation"); }

bool vulkan_expected() {
#ifdef FLUXION_TEST_VULKAN_BUILT
    const std::string lavapipe = lavapipe_manifest();
    return !lavapipe.empty() && !validation_layer_manifest().empty() && named_drivers() == lavapipe;
#else
    return false;
#endif
}

bool vulkan_runs(std::string* why) {
    std::string reason;
    if (fluxion::functional("Vulkan", &reason)) return true;
    if (vulkan_expected())
        ADD_FAILURE() << "the Vulkan plugin is built and lavapipe (" << lavapipe_manifest()
                      << ") and the validation layer are installed, yet Vulkan is not usable: " << reason;
    if (why) *why = reason;
    return false;
}

}  // namespace fx_test
