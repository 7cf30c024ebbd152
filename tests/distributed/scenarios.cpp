// scenarios.cpp — whole runs under mpirun that the scripts beside it judge from the outside:
//   scenarios fail throw|exit|hang      rank 1 fails at step 5 of data-parallel training
//   scenarios write DIR                 20 data-parallel steps, then a checkpoint (rank 0 writes)
//   scenarios resume DIR                loads it on any number of ranks, checks it, trains 10 steps
//                                       more and saves the result as DIR/after_<ranks>.safetensors
//   scenarios compare A B               (no mpirun) exits 1 unless A and B hold the same parameters
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include "fluxion/distributed.hpp"
#include "fluxion/fluxion.hpp"

namespace fx = fluxion;
namespace dist = fluxion::distributed;
namespace fs = std::filesystem;

namespace {

auto make_model() { return fx::Chain(fx::Dense(8, 32, fx::tanh), fx::Dense(32, 3)); }
using Model = decltype(make_model());
auto make_optimiser(const Model& model) {
    return fx::setup(fx::OptimiserChain(dist::AverageGradients{}, fx::Adam{.eta = 1e-2}), model);
}
using Optimiser = decltype(make_optimiser(make_model()));

// The same data everywhere; each rank takes its shard of global batches of 64.
fx::DataLoader<std::tuple<fx::Tensor, fx::Tensor>> make_loader(std::uint64_t epoch_seed) {
    fx::seed(7);
    fx::Tensor X = fx::randn({640, 8}), Y = fx::randn({640, 3});
    return fx::DataLoader({X, Y}, {.batchsize = 64 / dist::world_size(), .shuffle = true, .seed = epoch_seed,
                                   .shard = dist::shard()});
}

void steps(Model& model, Optimiser& opt, int count, std::uint64_t epoch_seed, int fail_at = -1,
           const std::string& how = "") {
    auto loader = make_loader(epoch_seed);
    int step = 0;
    for (auto [x, y] : loader) {
        if (step == count) return;
        if (++step == fail_at && dist::rank() == 1) {
            std::fprintf(stderr, "scenarios: rank 1 fails (%s) at step %d\n", how.c_str(), step);
            if (how == "throw") throw std::runtime_error("injected failure on rank 1");
            if (how == "exit") std::exit(3);
            std::this_thread::sleep_for(std::chrono::hours(1));
        }
        auto [loss, grads] = fx::withgradient([&](const Model& m) { return fx::mse(m(x), y); }, model);
        fx::update(opt, model, grads);
    }
}

double largest_difference(const std::map<std::string, fx::Tensor>& a, const std::map<std::string, fx::Tensor>& b) {
    if (a.size() != b.size()) return INFINITY;
    double worst = 0;
    for (const auto& [name, t] : a) {
        auto other = b.find(name);
        if (other == b.end() || other->second.shape() != t.shape()) return INFINITY;
        worst = std::max(worst, fx::max(fx::abs(t - other->second)).item());
    }
    return worst;
}

// Every rank's parameters equal rank 0's, bit for bit.
bool replicas_agree(const Model& model) {
    bool agree = true;
    fx::visit_tensors(model, [&](const std::string&, const fx::Tensor& t) {
        const fx::Tensor hi = dist::allreduce(t, dist::ReduceOp::max), lo = dist::allreduce(t, dist::ReduceOp::min);
        agree = agree && fx::max(hi - lo).item() == 0.0;
    });
    return agree;
}

int fail(const std::string& how) {
    fx::seed(1);
    auto model = dist::broadcast(make_model());
    auto opt = make_optimiser(model);
    steps(model, opt, 10, 3, 5, how);
    std::printf("scenarios: rank %d finished, which it should not have\n", dist::rank());
    return 0;
}

int write(const fs::path& dir) {
    fx::seed(1 + dist::rank());
    auto model = dist::broadcast(make_model());
    auto opt = make_optimiser(model);
    steps(model, opt, 10, 3);
    steps(model, opt, 10, 4);
    dist::save_checkpoint(dir / "checkpoint.safetensors", model, opt, {{"ranks", std::to_string(dist::world_size())}});
    return replicas_agree(model) ? 0 : 1;
}

int resume(const fs::path& dir) {
    fx::seed(50 + dist::rank());  // nothing of this initialisation may survive the load
    auto model = make_model();
    auto opt = make_optimiser(model);
    const auto extra = fx::load_checkpoint(dir / "checkpoint.safetensors", model, opt);
    std::map<std::string, fx::Tensor> saved, loaded;
    for (const auto& [name, t] : fx::state(model)) loaded[name] = t;
    for (const auto& [name, t] : fx::load_state(dir / "checkpoint.safetensors"))
        if (name.starts_with("model.")) saved[name.substr(6)] = t;
    const double off = largest_difference(saved, loaded);
    if (off != 0.0 || extra.at("ranks") != "2" || opt.params[0].t != 20 || !replicas_agree(model)) {
        std::fprintf(stderr, "scenarios: rank %d resumed wrongly (parameters off by %g, %lld steps)\n", dist::rank(),
                     off, static_cast<long long>(opt.params[0].t));
        return 1;
    }
    steps(model, opt, 10, 5);
    if (!replicas_agree(model)) return 1;
    dist::save(dir / ("after_" + std::to_string(dist::world_size()) + ".safetensors"), model);
    return 0;
}

// Different numbers of ranks sum the gradients in different orders: equal to float rounding.
int compare(const fs::path& a, const fs::path& b) {
    const double off = largest_difference(fx::load_state(a), fx::load_state(b));
    std::printf("scenarios: %s and %s differ by at most %g\n", a.c_str(), b.c_str(), off);
    return off < 1e-5 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string what = argc > 1 ? argv[1] : "";
    if (what == "compare" && argc == 4) return compare(argv[2], argv[3]);
    dist::init();
    if (what == "fail" && argc == 3) return fail(argv[2]);
    if (what == "write" && argc == 3) return write(argv[2]);
    if (what == "resume" && argc == 3) return resume(argv[2]);
    std::fprintf(stderr, "usage: scenarios fail throw|exit|hang | write DIR | resume DIR | compare A B\n");
    return 2;
}
