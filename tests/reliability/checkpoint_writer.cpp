// checkpoint_writer.cpp — a training process that the crash test SIGKILLs at random moments.
//   checkpoint_writer FILE STEPS
// Resumes from FILE when it exists, then trains to STEPS, saving a checkpoint (extra "step") after
// every step. It writes one byte to stdout once set up, so that the test kills it while it trains.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "reliability/crash_run.hpp"

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: checkpoint_writer FILE STEPS\n");
        return 2;
    }
    const std::filesystem::path file = argv[1];
    const int steps = std::atoi(argv[2]);
    const auto d = crash_run::data();
    auto model = crash_run::make_model();
    auto opt = crash_run::make_optimiser(model);
    int done = 0;
    if (std::filesystem::exists(file)) done = std::stoi(fluxion::load_checkpoint(file, model, opt).at("step"));
    if (::write(STDOUT_FILENO, "r", 1) != 1) return 3;
    for (int s = done + 1; s <= steps; ++s) {
        crash_run::step(model, opt, d);
        fluxion::save_checkpoint(file, model, opt, {{"step", std::to_string(s)}});
    }
    return 0;
}
