// torch_reference.hpp — runs one of tests/reference/*.py under Debian's PyTorch (/usr/bin/python3)
// on a JSON input (or none) and returns its JSON output, or why there is none: a reason to skip (PyTorch is
// not importable) or an error (the script failed though PyTorch imports: a bug of ours, not a skip).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace fx_test {

inline std::uint64_t fnv1a(const std::string& s) {
    std::uint64_t h = 1469598103934665603ull;
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return h;
}

inline bool torch_importable() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

struct TorchResults {
    nlohmann::json results;
    std::string skip, error;
    static TorchResults skipped(std::string why) { return {nlohmann::json(), std::move(why), ""}; }
    static TorchResults failed(std::string why) { return {nlohmann::json(), "", std::move(why)}; }
};

inline std::string file_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `script input output` (`script output` where the input is empty) once and caches the output
// in the build folder under a key of the input and the script's text, so that an edited script or
// input never reuses stale results.
inline TorchResults run_torch_script(const std::string& script, const std::string& input,
                                     const std::string& cache_name) {
    std::string script_text = file_text(script);
    if (script_text.empty()) return TorchResults::failed("cannot read " + script);
    // ctest runs each test in its own process: the first to miss the cache computes it, written
    // atomically so that parallel processes can race.
    std::string dir = FLUXION_BINARY_DIR, key = std::to_string(fnv1a(input + '\0' + script_text));
    std::string out = dir + "/" + cache_name + "_torch_" + key + ".json";
    if (!std::ifstream(out)) {
        std::string pid = std::to_string(::getpid());
        std::string in = dir + "/" + cache_name + "_in_" + key + "." + pid + ".json", tmp = out + "." + pid;
        if (!input.empty()) std::ofstream(in) << input;
        int status = std::system(("/usr/bin/python3 " + script + " " + (input.empty() ? "" : in + " ") + tmp).c_str());
        if (!input.empty()) std::remove(in.c_str());
        if (status != 0) {
            std::remove(tmp.c_str());
            if (!torch_importable())
                return TorchResults::skipped(
                    "PyTorch is not importable by /usr/bin/python3 (apt-get install python3-torch)");
            return TorchResults::failed(script + " failed (status " + std::to_string(status) +
                                        ") though PyTorch imports; its traceback is above");
        }
        std::rename(tmp.c_str(), out.c_str());
    }
    TorchResults r;
    std::ifstream(out) >> r.results;
    return r;
}

// Whether the script's results are there to compare with: not where PyTorch is missing (the test
// then relies on the numbers it keeps), and a failure, not a skip, where the script broke.
inline bool ran(const TorchResults& r) {
    if (!r.error.empty()) ADD_FAILURE() << r.error;
    return r.skip.empty() && r.error.empty();
}

// Numbers a test keeps for machines without PyTorch must be the script's, to the relative precision
// they were kept at, so that they cannot drift from the script unnoticed.
inline void expect_kept(const std::vector<double>& kept, const nlohmann::json& script, double rtol,
                        const std::string& what) {
    const auto want = script.is_array() ? script.get<std::vector<double>>() : std::vector{script.get<double>()};
    ASSERT_EQ(kept.size(), want.size()) << what;
    for (std::size_t i = 0; i < kept.size(); ++i)
        EXPECT_NEAR(kept[i], want[i], rtol * std::abs(want[i]) + 1e-15)
            << what << " element " << i << ": the kept number differs from the script's";
}

// Values against the script's, element by element.
inline void expect_close(const std::vector<double>& got, const nlohmann::json& script, double rtol, double atol,
                         const std::string& what) {
    const auto want = script.is_array() ? script.get<std::vector<double>>() : std::vector{script.get<double>()};
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << what << " element " << i;
}

}  // namespace fx_test
