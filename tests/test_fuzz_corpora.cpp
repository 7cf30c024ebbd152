// The seed corpora of the IDX and preference fuzz targets (fuzz/corpus/idx, fuzz/corpus/preferences;
// fuzz/seed_corpus.py writes them) through the library's own readers: files named valid_* are
// accepted, every other one is refused with an IOError, and none crashes. The fuzzers' regression
// check, as test_io_malformed.cpp is for the safetensors corpus.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include "core/preferences.hpp"
#include "fluxion/datasets.hpp"
#include "fluxion/error.hpp"

namespace {
namespace fs = std::filesystem;

// Runs read on every file of fuzz/corpus/`name`; returns how many there were.
std::size_t check_corpus(const std::string& name, const std::function<void(const fs::path&)>& read) {
    const fs::path corpus = fs::path(FLUXION_SOURCE_DIR) / "fuzz" / "corpus" / name;
    EXPECT_TRUE(fs::is_directory(corpus)) << corpus;
    if (!fs::is_directory(corpus)) return 0;
    std::size_t files = 0;
    for (const auto& entry : fs::directory_iterator(corpus)) {
        const std::string file = entry.path().filename().string();
        SCOPED_TRACE(file);
        ++files;
        const bool valid = file.rfind("valid_", 0) == 0;
        try {
            read(entry.path());
            EXPECT_TRUE(valid) << "accepted a file the corpus marks invalid";
        } catch (const fluxion::IOError& e) {
            EXPECT_FALSE(valid) << e.what();
        }
    }
    return files;
}

TEST(FuzzCorpora, IdxSeedsReadOrAreRefusedClearly) {
    const std::size_t files = check_corpus("idx", [](const fs::path& p) { (void)fluxion::datasets::read_idx(p); });
    EXPECT_GE(files, 21u);
}

TEST(FuzzCorpora, PreferenceSeedsReadOrAreRefusedClearly) {
    const fs::path dir = fs::temp_directory_path() / ("fluxion_fuzz_corpora_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path old = fs::current_path();
    fs::current_path(dir);
    const std::size_t files = check_corpus("preferences", [&](const fs::path& p) {
        fs::copy_file(p, dir / fluxion::detail::kPreferencesFile, fs::copy_options::overwrite_existing);
        (void)fluxion::detail::gpu_backend_preference();
    });
    fs::current_path(old);
    fs::remove_all(dir);
    EXPECT_GE(files, 16u);
}

}  // namespace
