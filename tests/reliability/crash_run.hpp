// crash_run.hpp — the training run that the crash test kills and resumes: a fixed model, data and
// optimiser, so that a run resumed from any checkpoint can be compared bit for bit with an
// unbroken run (tests/test_io_crash.cpp and its writer, tests/reliability/checkpoint_writer.cpp).
#pragma once
#include "fluxion/fluxion.hpp"
#include "fluxion/io.hpp"
#include "fluxion/layers.hpp"

namespace crash_run {

namespace fx = fluxion;

// About 8,600 parameters: with Adam's two moments a checkpoint is ~100 KiB, so a kill often lands
// while one is being written.
inline auto make_model() {
    fx::seed(1);
    return fx::Chain(fx::Dense(32, 128, fx::relu), fx::Dense(128, 32));
}
using Model = decltype(make_model());
using Optimiser = fx::OptimiserState<fx::Adam>;

inline Optimiser make_optimiser(Model& model) { return fx::setup(fx::Adam{.eta = 0.01}, model); }

struct Data {
    fx::Tensor x, y;
};

inline Data data() {
    fx::seed(7);
    return {fx::randn({16, 32}), fx::randn({16, 32})};
}

inline void step(Model& model, Optimiser& opt, const Data& d) {
    auto [loss, grads] = fx::withgradient([&](const Model& m) { return fx::mean(fx::square(m(d.x) - d.y)); }, model);
    fx::update(opt, model, grads);
}

// Every parameter of the model, in visit order, as one vector.
inline std::vector<float> parameters(const Model& model) {
    std::vector<float> all;
    for (const auto& [name, t] : fx::state(model)) {
        const auto v = t.to_vector<float>();
        all.insert(all.end(), v.begin(), v.end());
    }
    return all;
}

}  // namespace crash_run
