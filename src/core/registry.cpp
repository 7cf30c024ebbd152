// registry.cpp — finds backend plugins (libfluxion-<name>.so) beside libfluxion.so and on
// FLUXION_PLUGIN_PATH, loads them with dlopen and asks each whether it is functional.
#include "core/registry.hpp"

#include "core/tensor_impl.hpp"

#include "fluxion/error.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>

namespace fluxion::detail {
namespace {

namespace fs = std::filesystem;

// Backends fluxion knows by name even when their plugin is absent, so that get_device can say why.
const char* const kKnownPlugins[] = {"CUDA"};

std::string library_dir() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&library_dir), &info) && info.dli_fname)
        return fs::path(info.dli_fname).parent_path().string();
    return {};
}

std::vector<std::string> plugin_dirs() {
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("FLUXION_PLUGIN_PATH")) {
        std::string s = env;
        std::size_t start = 0;
        while (start <= s.size()) {
            auto end = s.find(':', start);
            if (end == std::string::npos) end = s.size();
            if (end > start) dirs.push_back(s.substr(start, end - start));
            start = end + 1;
        }
    }
    if (auto dir = library_dir(); !dir.empty()) dirs.push_back(dir);
    return dirs;
}

BackendEntry load_plugin(const fs::path& file) {
    BackendEntry e;
    auto stem = file.stem().string();  // libfluxion-cuda
    e.name = stem.substr(std::string("libfluxion-").size());
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        e.why = std::string("cannot load ") + file.string() + ": " + dlerror();
        return e;
    }
    auto entry = reinterpret_cast<backend::EntryFn>(dlsym(handle, backend::kEntrySymbol));
    if (!entry) {
        e.why = file.string() + " does not export " + backend::kEntrySymbol;
        return e;
    }
    e.table = entry(backend::kAbiVersion);
    if (!e.table) {
        e.why = file.string() + " was built for another fluxion version (ABI mismatch)";
        return e;
    }
    e.name = e.table->name;
    char why[512] = {0};
    e.functional = e.table->functional(why, sizeof why);
    e.why = e.functional ? "loaded from " + file.string() : std::string(why);
    return e;
}

std::vector<BackendEntry> discover() {
    std::vector<BackendEntry> found;
    std::set<std::string> seen_files;
    for (const auto& dir : plugin_dirs()) {
        std::error_code ec;
        std::vector<fs::path> files;
        for (const auto& f : fs::directory_iterator(dir, ec)) {
            auto n = f.path().filename().string();
            if (n.rfind("libfluxion-", 0) == 0 && f.path().extension() == ".so") files.push_back(f.path());
        }
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
            if (!seen_files.insert(f.filename().string()).second) continue;  // earlier directories win
            auto e = load_plugin(f);
            auto same = [&](const BackendEntry& o) { return o.name == e.name; };
            if (std::none_of(found.begin(), found.end(), same)) found.push_back(std::move(e));
        }
    }
    for (const char* known : kKnownPlugins) {
        auto same = [&](const BackendEntry& o) {
            std::string a = o.name, b = known;
            std::transform(a.begin(), a.end(), a.begin(), ::toupper);
            return a == b;
        };
        if (std::none_of(found.begin(), found.end(), same)) {
            std::string lower = known;
            std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
            found.push_back({known, nullptr, false, "plugin libfluxion-" + lower + ".so not found beside libfluxion.so or on FLUXION_PLUGIN_PATH"});
        }
    }
    found.push_back({"CPU", &backend::cpu_backend(), true, "built in"});
    return found;
}

}  // namespace

const std::vector<BackendEntry>& backends() {
    static std::once_flag once;
    static std::vector<BackendEntry> all;
    std::call_once(once, [] { all = discover(); });
    return all;
}

const BackendEntry* find_backend(const std::string& name) {
    if (name == "CPU") return &backends().back();  // no plugin scan needed for the CPU
    for (const auto& e : backends())
        if (e.name == name) return &e;
    return nullptr;
}

const backend::Backend& backend_for(const Device& device) {
    if (device.type == "CPU") return traced(backend::cpu_backend());
    const auto* e = find_backend(device.type);
    if (!e) throw DeviceError("unknown device " + device.str() + "; known backends are listed by fx::supported_devices()");
    if (!e->table || !e->functional) throw DeviceError("device " + device.str() + " is not usable: " + e->why);
    return traced(*e->table);
}

}  // namespace fluxion::detail
