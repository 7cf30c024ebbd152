// soak.cpp — training for a while with checkpoints and restarts while watching the process's
// resources (issue 15's soak; scripts/soak.sh runs it for 30 minutes, ctest for a short while).
//   soak SECONDS FOLDER
// LeNet-5 on 6,000 Fashion-MNIST images (batch 64, Adam, compiled steps, the loader preparing
// batches in the background), a checkpoint every 20 steps and at the end of every epoch, and after
// every third epoch a restart: model, optimiser, compiled step and data loader made again, and
// loaded from the checkpoint, which holds the loader's epoch counter too (so the data order goes on
// where it stopped). After each epoch it prints resident memory, open file descriptors and threads.
// Once SECONDS have passed it ends the epoch, trains an unbroken run of as many epochs (no
// checkpoints, no restarts, one loader) and compares. It fails (exit 1) when
//   - resident memory grows: the least-squares slope of resident memory over the epochs after the
//     second (allocator caches and oneDNN's plans are warm by then) is above kSlopeBoundKiB per
//     epoch; not checked under AddressSanitizer, whose quarantine grows it,
//   - a file descriptor or a thread is left over (counted after each epoch),
//   - the parameters differ from the unbroken run's in any bit, or its test accuracy differs.
// Exit 77 when the data set is not installed. FLUXION_SOAK_LEAK_KIB=N leaks N KiB per epoch on
// purpose (the test that the slope catches a leak, ctest's reliability.soak_catches_a_leak).
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fluxion/fluxion.hpp>

namespace fx = fluxion;

namespace {

// A leak of this much per epoch or more fails; the fitted slope of runs without one is a few KiB
// per epoch (RELIABILITY.md), and 20 epochs at this slope would be 0.6 MiB.
constexpr double kSlopeBoundKiB = 32;
constexpr std::size_t kFitFrom = 1;  // epoch 2, as an index

// AddressSanitizer keeps freed blocks in a quarantine of up to 256 MiB before reusing them, so
// resident memory grows under it whether or not anything leaks (LeakSanitizer checks leaks there).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCheckResidentMemory = false;
#else
constexpr bool kCheckResidentMemory = true;
#endif
constexpr std::int64_t kImages = 6000, kTestImages = 1000, kBatch = 64;
constexpr int kCheckpointEvery = 20, kRestartEvery = 3;

auto lenet5() {
    return fx::Chain(fx::Conv({5, 5}, 1, 6, fx::relu), fx::MaxPool({2, 2}), fx::Conv({5, 5}, 6, 16, fx::relu),
                     fx::MaxPool({2, 2}), fx::Flatten(), fx::Dense(256, 120, fx::relu), fx::Dense(120, 84, fx::relu),
                     fx::Dense(84, 10));
}
using Model = decltype(lenet5());

struct Resources {
    double rss_mib = 0;
    int fds = 0, threads = 0;
};

Resources resources() {
    Resources r;
    long pages = 0, resident = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    r.rss_mib = double(resident) * double(::sysconf(_SC_PAGESIZE)) / (1 << 20);
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (const dirent* e = ::readdir(d)) r.fds += e->d_name[0] != '.';
        ::closedir(d);
        r.fds -= 1;  // the one opendir holds
    }
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("Threads:", 0) == 0) r.threads = std::atoi(line.c_str() + 8);
    return r;
}

struct Data {
    fx::Tensor X, Y, Xte, Yte;
};

Data data() {
    auto [X, Y] = fx::datasets::fashion_mnist(fx::datasets::Split::Train);
    auto [Xte, Yte] = fx::datasets::fashion_mnist(fx::datasets::Split::Test);
    return {X.slice(0, 0, kImages), Y.slice(0, 0, kImages), Xte.slice(0, 0, kTestImages), Yte.slice(0, 0, kTestImages)};
}

fx::Tensor lossfn(const Model& m, const fx::Tensor& x, const fx::Tensor& y) {
    return fx::logitcrossentropy(m(x), fx::onehot(y, 10));
}

double accuracy(Model& model, const Data& d) {
    fx::NoGrad no_grad;
    fx::testmode(model);
    const double hits = fx::sum(fx::argmax(model(d.Xte), 1) == d.Yte).item();
    fx::automode(model);
    return hits / double(d.Yte.shape(0));
}

template <class Loader> std::map<std::string, std::string> loader_state(const Loader& loader) {
    return {{"loader.epoch", std::to_string(loader.epoch())}};  // epochs begun: the next one's number
}

// One life of the model: made afresh with its own loader, both loaded from `file` when it exists,
// trained for epochs [first, last) with a checkpoint every kCheckpointEvery steps and at the end
// of each epoch (none when `file` is empty), `after_epoch(epoch)` called after each. Returns the model.
template <class Loader, class AfterEpoch>
Model life(Loader& loader, int first, int last, const std::filesystem::path& file, AfterEpoch&& after_epoch) {
    fx::seed(5);
    Model model = lenet5();
    auto opt = fx::setup(fx::Adam{.eta = 1e-3}, model);
    if (!file.empty() && std::filesystem::exists(file)) {
        const auto extra = fx::load_checkpoint(file, model, opt);
        loader.set_epoch(std::stoull(extra.at("loader.epoch")));
        if (loader.epoch() != std::uint64_t(first))
            throw std::runtime_error("the checkpoint's loader is at epoch " + std::to_string(loader.epoch()) +
                                     ", the life starts at " + std::to_string(first));
    }
    auto step = fx::compile(lossfn, model, opt);
    for (int epoch = first; epoch < last; ++epoch) {
        int steps = 0;
        for (auto [x, y] : loader | fx::Device{}) {  // prepared by the loader's background thread
            step(x, y);
            if (!file.empty() && ++steps % kCheckpointEvery == 0) fx::save_checkpoint(file, model, opt, loader_state(loader));
        }
        if (!file.empty()) fx::save_checkpoint(file, model, opt, loader_state(loader));
        after_epoch(epoch);
    }
    return model;
}

// The least-squares slope of resident memory (MiB) over the epochs from index kFitFrom.
double rss_slope_mib(const std::vector<Resources>& seen) {
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (std::size_t e = kFitFrom; e < seen.size(); ++e) {
        const double x = double(e), y = seen[e].rss_mib;
        n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    const double d = n * sxx - sx * sx;
    return d > 0 ? (n * sxy - sx * sy) / d : 0;
}

bool identical(const Model& a, const Model& b) {
    std::vector<fx::Tensor> pa, pb;
    fx::visit_tensors(a, [&](const std::string&, const fx::Tensor& t) { pa.push_back(t); });
    fx::visit_tensors(b, [&](const std::string&, const fx::Tensor& t) { pb.push_back(t); });
    if (pa.size() != pb.size()) return false;
    for (std::size_t i = 0; i < pa.size(); ++i) {
        const auto u = pa[i].to_vector<float>(), v = pb[i].to_vector<float>();
        if (u.size() != v.size() || std::memcmp(u.data(), v.data(), u.size() * sizeof(float)) != 0) return false;
    }
    return true;
}

int soak(double seconds, const std::filesystem::path& folder) {
    const Data d = data();
    const std::filesystem::path file = folder / "soak.safetensors";
    std::filesystem::create_directories(folder);
    std::filesystem::remove(file);
    const fx::DataLoaderOptions loading{.batchsize = kBatch, .shuffle = true, .seed = 9};
    const char* leak_text = std::getenv("FLUXION_SOAK_LEAK_KIB");
    const std::size_t leak_bytes = leak_text ? std::size_t(std::atol(leak_text)) << 10 : 0;
    const auto begin = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(); };
    std::vector<Resources> seen;
    auto watch = [&](int epoch) {
        if (leak_bytes) std::memset(new char[leak_bytes], 1, leak_bytes);  // never freed, on purpose
        seen.push_back(resources());
        const Resources& r = seen.back();
        std::printf("epoch %3d  %7.1f s  resident %7.1f MiB  file descriptors %d  threads %d\n", epoch + 1, elapsed(),
                    r.rss_mib, r.fds, r.threads);
        std::fflush(stdout);
    };
    int epochs = 0;
    Model model = lenet5();
    while (epochs < 3 || elapsed() < seconds) {  // lives of kRestartEvery epochs until the time is up
        fx::DataLoader loader({d.X, d.Y}, loading);  // a new process's loader, set from the checkpoint
        model = life(loader, epochs, epochs + kRestartEvery, file, watch);
        epochs += kRestartEvery;
    }
    const double soaked_accuracy = accuracy(model, d);

    fx::DataLoader unbroken_loader({d.X, d.Y}, loading);
    Model unbroken = life(unbroken_loader, 0, epochs, {}, [](int) {});
    const double unbroken_accuracy = accuracy(unbroken, d);

    const double slope_kib = rss_slope_mib(seen) * 1024;
    int failures = 0;
    auto fail = [&](const std::string& what) {
        std::printf("FAIL: %s\n", what.c_str());
        ++failures;
    };
    const Resources& warm = seen[kFitFrom];
    double highest = 0;
    for (std::size_t e = kFitFrom; e < seen.size(); ++e) {
        highest = std::max(highest, seen[e].rss_mib);
        if (seen[e].fds != warm.fds) fail("epoch " + std::to_string(e + 1) + " has " + std::to_string(seen[e].fds) +
                                          " file descriptors open, epoch 2 had " + std::to_string(warm.fds));
        if (seen[e].threads != warm.threads)
            fail("epoch " + std::to_string(e + 1) + " has " + std::to_string(seen[e].threads) + " threads, epoch 2 had " +
                 std::to_string(warm.threads));
    }
    if (!kCheckResidentMemory)
        std::printf("resident memory not checked: AddressSanitizer's quarantine holds freed blocks\n");
    else if (slope_kib > kSlopeBoundKiB)
        fail("resident memory grows by " + std::to_string(slope_kib) + " KiB per epoch after epoch 2 (fitted; bound " +
             std::to_string(kSlopeBoundKiB) + ")");
    if (!identical(model, unbroken)) fail("the parameters differ from the unbroken run's");
    if (soaked_accuracy != unbroken_accuracy) fail("the test accuracy differs from the unbroken run's");
    std::printf("%d epochs (%d restarts from checkpoints) in %.1f s; resident memory %.1f MiB after epoch 2, at most "
                "%.1f after, fitted slope %+.1f KiB per epoch (bound %.0f); %d file descriptors and %d threads after "
                "every epoch; test accuracy %.2f%%, the unbroken run's %.2f%%, parameters %s\n",
                epochs, epochs / kRestartEvery - 1, elapsed(), warm.rss_mib, highest, slope_kib, kSlopeBoundKiB, warm.fds,
                warm.threads,
                100 * soaked_accuracy, 100 * unbroken_accuracy, identical(model, unbroken) ? "identical" : "DIFFERENT");
    return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: soak SECONDS FOLDER\n");
        return 2;
    }
    const char* folder = std::getenv("FLUXION_DATA");
    if (!std::filesystem::exists(folder && *folder ? folder : "/usr/share/datasets/fashion-mnist")) {
        std::printf("SKIP: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist, or set FLUXION_DATA)\n");
        return 77;
    }
    try {
        return soak(std::atof(argv[1]), argv[2]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
