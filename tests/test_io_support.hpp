// test_io_support.hpp — what the io tests share: a scratch folder per test, error capture, a file
// size limit for failing writes, and a small MLP whose state names are PyTorch's (`layers.0.weight`).
#pragma once
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "fluxion/fluxion.hpp"
#include "fluxion/io.hpp"
#include "fluxion/layers.hpp"

namespace fx = fluxion;

namespace io_test {

// A fresh folder, removed with everything in it when the test ends.
class ScratchDir {
public:
    ScratchDir() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = std::filesystem::temp_directory_path() /
                ("fluxion-io-" + std::to_string(::getpid()) + "-" + (info ? std::string(info->name()) : "test"));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~ScratchDir() {
        std::error_code ignored;
        std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ignored);
        std::filesystem::remove_all(path_, ignored);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
    const std::filesystem::path& path() const { return path_; }
    std::vector<std::string> entries() const {
        std::vector<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
        return names;
    }

private:
    std::filesystem::path path_;
};

inline std::string file_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

// The message of the fx::IOError that f throws (a test failure if it throws none).
inline std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const fx::IOError& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected fx::IOError";
    return "";
}

// While alive, the kernel refuses to let files grow past `bytes` (RLIMIT_FSIZE, binding even for
// root): writes fail midway with EFBIG, a real failing disk write.
class FileSizeLimit {
public:
    explicit FileSizeLimit(rlim_t bytes) {
        getrlimit(RLIMIT_FSIZE, &saved_);
        previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
        rlimit limited = saved_;
        limited.rlim_cur = bytes;
        setrlimit(RLIMIT_FSIZE, &limited);
    }
    ~FileSizeLimit() {
        setrlimit(RLIMIT_FSIZE, &saved_);
        std::signal(SIGXFSZ, previous_handler_);
    }
    FileSizeLimit(const FileSizeLimit&) = delete;
    FileSizeLimit& operator=(const FileSizeLimit&) = delete;

private:
    rlimit saved_{};
    void (*previous_handler_)(int) = nullptr;
};

// torch.nn.Linear's layout: weight {out, in}, bias {out}; y = x W^T + b.
struct Linear {
    fx::Tensor weight, bias;
    Linear() = default;
    Linear(std::int64_t in, std::int64_t out, fx::TensorOptions o = {})
        : weight(fx::randn({out, in}, o)), bias(fx::randn({out}, o)) {}
    fx::Tensor operator()(const fx::Tensor& x) const { return fx::matmul(x, weight.transpose()) + bias; }
};

// torch.nn.Sequential(Linear, ReLU, Linear, ...), with its layers in `layers`.
struct MLP {
    std::vector<Linear> layers;
    fx::Tensor operator()(fx::Tensor x) const {
        for (std::size_t i = 0; i < layers.size(); ++i) {
            x = layers[i](x);
            if (i + 1 < layers.size()) x = fx::relu(x);
        }
        return x;
    }
};

inline MLP mlp(const std::vector<std::int64_t>& sizes, fx::TensorOptions o = {}) {
    MLP m;
    for (std::size_t i = 0; i + 1 < sizes.size(); ++i) m.layers.emplace_back(sizes[i], sizes[i + 1], o);
    return m;
}

inline std::ostream& operator<<(std::ostream& os, const MLP& m) {
    os << "MLP(";
    for (std::size_t i = 0; i < m.layers.size(); ++i)
        os << (i ? ", " : "") << m.layers[i].weight.shape(1) << " => " << m.layers[i].weight.shape(0);
    return os << ")";
}

}  // namespace io_test

FLUXION_FUNCTOR(io_test::Linear, weight, bias);
FLUXION_FUNCTOR(io_test::MLP, layers);
