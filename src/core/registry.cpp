// registry.cpp — finds backend plugins (libfluxion-<name>.so) beside libfluxion.so and on
// FLUXION_PLUGIN_PATH, loads them with dlopen and asks each whether it is functional; maps Flux's
// vendor names to the devices of the backend that serves them.
#include "core/registry.hpp"

#include "core/tensor_impl.hpp"

#include "fluxion/error.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <mutex>
#include <set>

namespace fluxion::detail {
namespace {

namespace fs = std::filesystem;

// Flux's names for the GPUs of a vendor (its AMDGPU.jl and Metal.jl); any backend may serve them.
struct VendorName {
    const char* name;
    const char* vendor;
};
constexpr VendorName kVendorNames[] = {{"AMDGPU", "AMD"}, {"Metal", "Apple"}};

bool same_name(const std::string& a, const std::string& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
               return std::tolower(x) == std::tolower(y);
           });
}

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

std::string searched_dirs() {
    std::string out;
    for (const auto& dir : plugin_dirs()) out += (out.empty() ? "" : ", ") + dir;
    return out.empty() ? "no folder" : out;
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
    e.library = handle;
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

// fluxion's own libraries beside the plugins that are not backends: loading them to look would
// pull MPI or NCCL into every program (and print that they are not plugins).
bool companion_library(const std::string& filename) {
    return filename == "libfluxion-distributed.so" || filename == "libfluxion-nccl.so";
}

std::vector<BackendEntry> discover() {
    std::vector<BackendEntry> found;
    std::set<std::string> seen_files;
    for (const auto& dir : plugin_dirs()) {
        std::error_code ec;
        std::vector<fs::path> files;
        for (const auto& f : fs::directory_iterator(dir, ec)) {
            auto n = f.path().filename().string();
            if (n.rfind("libfluxion-", 0) == 0 && f.path().extension() == ".so" && !companion_library(n))
                files.push_back(f.path());
        }
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
            if (!seen_files.insert(f.filename().string()).second) continue;  // earlier directories win
            auto e = load_plugin(f);
            auto same = [&](const BackendEntry& o) { return same_name(o.name, e.name); };
            if (std::none_of(found.begin(), found.end(), same)) found.push_back(std::move(e));
        }
    }
    // Highest priority first; a plugin that did not load goes last, ties by name.
    auto priority = [](const BackendEntry& e) { return e.table ? e.table->priority : std::numeric_limits<int>::min(); };
    std::stable_sort(found.begin(), found.end(), [&](const BackendEntry& a, const BackendEntry& b) {
        return priority(a) != priority(b) ? priority(a) > priority(b) : a.name < b.name;
    });
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
        if (same_name(e.name, name)) return &e;
    return nullptr;
}

void* plugin_symbol(const BackendEntry& backend, const char* name) {
    return backend.library ? dlsym(backend.library, name) : nullptr;
}

const std::vector<VendorDevices>& vendor_names() {
    static std::once_flag once;
    static std::vector<VendorDevices> all;
    std::call_once(once, [] {
        for (const auto& [name, vendor] : kVendorNames) {
            VendorDevices v{name, vendor, nullptr, {}, {}};
            for (const auto& e : backends()) {
                if (!e.functional) continue;
                for (int i = 0; i < e.table->device_count(); ++i) {
                    backend::DeviceProperties p{};
                    e.table->device_properties(i, &p);
                    if (same_name(p.vendor, vendor) && p.kind != DeviceKind::cpu) v.indices.push_back(i);
                }
                if (!v.indices.empty()) {
                    v.served_by = &e;
                    break;
                }
            }
            if (!v.served_by)
                v.why = std::string("no functional backend reports a GPU of vendor ") + vendor + " (backends found: " +
                        [] {
                            std::string names;
                            for (const auto& e : backends()) names += (names.empty() ? "" : ", ") + e.name;
                            return names;
                        }() + ")";
            all.push_back(std::move(v));
        }
    });
    return all;
}

std::vector<std::string> vendor_name_list() {
    std::vector<std::string> names;
    for (const auto& v : kVendorNames) names.push_back(v.name);
    return names;
}

const VendorDevices* find_vendor_name(const std::string& name) {
    const auto named = [&](const VendorName& v) { return same_name(v.name, name); };
    if (std::none_of(std::begin(kVendorNames), std::end(kVendorNames), named)) return nullptr;  // asks no device
    for (const auto& v : vendor_names())
        if (same_name(v.name, name)) return &v;
    return nullptr;
}

const backend::Backend& backend_for(const Device& device) {
    if (device.type == "CPU") return traced(backend::cpu_backend());
    if (const auto* e = find_backend(device.type)) {
        if (!e->table || !e->functional) throw DeviceError("device " + device.str() + " is not usable: " + e->why);
        return traced(*e->table);
    }
    if (const auto* v = find_vendor_name(device.type)) {
        if (!v->served_by) throw DeviceError("device " + device.str() + " is not usable: " + v->why);
        if (std::find(v->indices.begin(), v->indices.end(), device.index) == v->indices.end())
            throw DeviceError("device " + device.str() + " is not usable: " + v->served_by->name + ":" +
                              std::to_string(device.index) + " is not a GPU of vendor " + v->vendor +
                              "; fx::devices(\"" + v->name + "\") lists those that are");
        return traced(*v->served_by->table);
    }
    throw DeviceError("unknown device " + device.str() + ": " + unknown_backend(device.type));
}

std::string unknown_backend(const std::string& name) {
    return "no plugin libfluxion-*.so in " + searched_dirs() + " provides a backend named \"" + name +
           "\", and it is none of Flux's vendor names; fx::supported_devices() lists those found";
}

backend::DeviceProperties properties(const Device& device) {
    const backend::Backend& table = backend_for(device);
    backend::DeviceProperties p{};
    table.device_properties(device.index, &p);
    return p;
}

}  // namespace fluxion::detail
