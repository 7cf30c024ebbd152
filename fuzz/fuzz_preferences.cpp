// fuzz_preferences.cpp — libFuzzer target for LocalPreferences.toml: any file must either give the
// [fluxion] gpu_backend (or none) or raise IOError, never crash; and where a file is accepted,
// setting the preference must keep it valid TOML that reads back the value just set.
// Built by fuzz/CMakeLists.txt with clang's -fsanitize=fuzzer,address; see that file for how to run it.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/preferences.hpp"
#include "fluxion/error.hpp"

namespace fs = std::filesystem;

// The preference file lives in the working directory: work in a private temporary folder (in
// /dev/shm where there is one, as every input is written to a file). libFuzzer reads its folders
// and writes crash inputs after this, so every path among its arguments is made absolute first.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
    static std::vector<std::string> args;
    bool artifact_prefix = false;
    for (int i = 0; i < *argc; ++i) {
        std::string a = (*argv)[i];
        const auto eq = a.find('=');
        if (i > 0 && a[0] != '-') a = fs::absolute(a).string();
        for (const char* flag : {"-artifact_prefix", "-exact_artifact_path", "-dict"})
            if (a[0] == '-' && eq != std::string::npos && a.compare(0, eq, flag) == 0)
                a = a.substr(0, eq + 1) + fs::absolute(a.substr(eq + 1)).string();
        artifact_prefix = artifact_prefix || a.rfind("-artifact_prefix=", 0) == 0;
        args.push_back(a);
    }
    if (!artifact_prefix) args.push_back("-artifact_prefix=" + fs::current_path().string() + "/");
    static std::vector<char*> pointers;
    for (auto& a : args) pointers.push_back(a.data());
    pointers.push_back(nullptr);
    *argc = static_cast<int>(args.size());
    *argv = pointers.data();

    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string dir = (base / "fluxion-fuzz-preferences-XXXXXX").string();
    if (!mkdtemp(dir.data()) || chdir(dir.c_str()) != 0) std::abort();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    {
        std::ofstream out(fluxion::detail::kPreferencesFile, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
        if (!out.flush()) std::abort();
    }
    try {
        fluxion::detail::gpu_backend_preference();
    } catch (const fluxion::IOError&) {
        // a clear rejection is the expected outcome for most inputs
    }
    // Setting the preference rewrites the file from its parsed form; the result must read back.
    const std::string value = "Vulkan \"quoted\" \\ \xC3\xA9";
    try {
        fluxion::detail::set_gpu_backend_preference(value);
    } catch (const fluxion::IOError&) {
        return 0;  // a malformed file (or `fluxion` not a section) is refused and left as it is
    }
    try {
        if (fluxion::detail::gpu_backend_preference() != value) std::abort();
    } catch (const fluxion::IOError&) {
        std::abort();  // the file fluxion wrote is one it cannot read
    }
    return 0;
}
