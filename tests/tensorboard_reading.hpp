// tensorboard_reading.hpp — a folder of event files as TensorBoard's own code reads it
// (tests/reference/tensorboard_read.py under the python3 on PATH, which needs PyPI's tensorboard),
// or why there is no reading: a reason to skip (not installed) or an error (the reader failed).
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace fx_test {

struct TensorBoardReading {
    nlohmann::json json;  // files, records, scalars, histograms, images, text (see the script)
    std::string skip, error;
};

inline TensorBoardReading read_with_tensorboard(const std::filesystem::path& logdir) {
    if (std::system("python3 -c 'import tensorboard' >/dev/null 2>&1") != 0)
        return {{}, "TensorBoard is not importable by the python3 on PATH (python3 -m pip install tensorboard)", ""};
    const auto out = logdir.parent_path() / (logdir.filename().string() + ".reading.json");
    const std::string script = std::string(FLUXION_SOURCE_DIR) + "/tests/reference/tensorboard_read.py";
    const int status = std::system(("python3 '" + script + "' '" + logdir.string() + "' '" + out.string() + "'").c_str());
    if (status != 0) return {{}, "", "tensorboard_read.py failed (status " + std::to_string(status) + "); see above"};
    TensorBoardReading r;
    std::ifstream(out) >> r.json;
    return r;
}

}  // namespace fx_test
