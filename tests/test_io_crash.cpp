// test_io_crash.cpp — crash safety of checkpoints: a training process that saves a checkpoint after
// every step is SIGKILLed at random moments and restarted from its file, again and again. After
// every kill the file must load and hold a complete checkpoint of some step the unbroken run went
// through (never torn, never older than the last one seen), and the run, resumed after every kill,
// must end bit for bit where an unbroken run ends. FLUXION_CRASH_KILLS sets the number of kills
// (scripts/crash_checkpoints.sh runs 5000; CTest runs 400, in a few seconds). And a kill at each
// phase of a save in turn (FLUXION_DEBUG_KILL_SAVE), where the file's content is known exactly.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "reliability/crash_run.hpp"
#include "test_io_support.hpp"

namespace {

using io_test::ScratchDir;
constexpr int kSteps = 60;

struct Outcome {
    bool killed = false;  // false: the writer reached kSteps and exited by itself
    int status = 0;
};

// Starts the writer and, once it is training, SIGKILLs it after `delay` (unless it ends first);
// without a delay, waits for it to end by itself.
Outcome run_writer(const std::filesystem::path& file, std::optional<std::chrono::microseconds> delay) {
    int ready[2];
    if (::pipe(ready) != 0) throw std::runtime_error("pipe failed");
    const std::string steps = std::to_string(kSteps);
    const pid_t pid = ::fork();
    if (pid == 0) {  // only async-signal-safe calls between fork and exec
        ::dup2(ready[1], STDOUT_FILENO);
        ::close(ready[0]);
        ::close(ready[1]);
        ::execl(FLUXION_CHECKPOINT_WRITER, FLUXION_CHECKPOINT_WRITER, file.c_str(), steps.c_str(),
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(ready[1]);
    char byte = 0;
    const bool started = ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    Outcome outcome;
    int status = 0;
    if (!delay || !started) {
        ::waitpid(pid, &status, 0);
        outcome.status = status;
        return outcome;
    }
    std::this_thread::sleep_for(*delay);
    if (::waitpid(pid, &status, WNOHANG) == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        outcome.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        if (outcome.killed) return outcome;
    }
    outcome.status = status;
    return outcome;
}

int kills_wanted() {
    const char* v = std::getenv("FLUXION_CRASH_KILLS");
    return v ? std::atoi(v) : 400;
}

// The unbroken run's parameters after every step: the reference for each checkpoint.
std::vector<std::vector<float>> unbroken_run() {
    const auto d = crash_run::data();
    auto model = crash_run::make_model();
    auto opt = crash_run::make_optimiser(model);
    std::vector<std::vector<float>> after{crash_run::parameters(model)};
    for (int s = 1; s <= kSteps; ++s) {
        crash_run::step(model, opt, d);
        after.push_back(crash_run::parameters(model));
    }
    return after;
}

TEST(IOCrash, CheckpointsSurviveSigkillAtRandomMomentsAndTheResumedRunMatches) {
    const auto after = unbroken_run();

    ScratchDir dir;
    const auto file = dir / "run.safetensors";
    std::mt19937 random(12345);
    // A save takes ~1 ms here: delays up to a few steps land before, inside and after saves.
    std::uniform_int_distribution<int> delay_us(0, 8000);
    const int wanted = kills_wanted();
    int kills = 0, completed_runs = 0, last_step = 0;
    while (kills < wanted) {
        const Outcome outcome = run_writer(file, std::chrono::microseconds(delay_us(random)));
        if (!outcome.killed) {
            ASSERT_TRUE(WIFEXITED(outcome.status) && WEXITSTATUS(outcome.status) == 0)
                << "the writer failed by itself (status " << outcome.status << ") after " << kills << " kills";
        } else {
            ++kills;
        }
        if (!std::filesystem::exists(file)) {
            ASSERT_EQ(last_step, 0) << "the checkpoint vanished after kill " << kills;
            continue;
        }
        auto loaded = crash_run::make_model();
        auto loaded_opt = crash_run::make_optimiser(loaded);
        std::map<std::string, std::string> extra;
        ASSERT_NO_THROW(extra = fx::load_checkpoint(file, loaded, loaded_opt)) << "after kill " << kills;
        const int step = std::stoi(extra.at("step"));
        ASSERT_GE(step, last_step) << "an older checkpoint came back after kill " << kills;
        ASSERT_LE(step, kSteps);
        ASSERT_EQ(loaded_opt.params[0].t, step);
        ASSERT_EQ(crash_run::parameters(loaded), after[static_cast<std::size_t>(step)])
            << "checkpoint of step " << step << " differs from the unbroken run, after kill " << kills;
        last_step = step;
        if (step == kSteps) {  // this run is complete and matches: start a new one
            ++completed_runs;
            std::filesystem::remove(file);
            last_step = 0;
        }
    }
    // Finish the interrupted run: it must end where the unbroken run ends.
    const Outcome last = run_writer(file, std::nullopt);
    ASSERT_FALSE(last.killed);
    auto resumed = crash_run::make_model();
    auto resumed_opt = crash_run::make_optimiser(resumed);
    EXPECT_EQ(std::stoi(fx::load_checkpoint(file, resumed, resumed_opt).at("step")), kSteps);
    EXPECT_EQ(crash_run::parameters(resumed), after.back());
    std::printf("crash test: %d SIGKILLs survived, %d interrupted runs completed and matched\n", kills,
                completed_runs + 1);
}

// The phases of a save, in order, at which FLUXION_DEBUG_KILL_SAVE=PHASE:N makes the writer
// SIGKILL itself during its Nth save (src/core/io/atomic_file.cpp), and whether the new checkpoint
// is the file's after a kill there: only once the rename has happened.
struct Phase {
    const char* name;
    bool replaced;
};
constexpr Phase kPhases[] = {{"written", false}, {"synced", false}, {"closed", false}, {"renamed", true}};

// A kill at each phase of a save, deterministically: after the data is written (not yet fsynced),
// after the fsync, between the close and the rename, and after the rename (before the folder's
// fsync). The file then holds the previous complete checkpoint, or the new one once renamed; the
// temporary file of the killed writer is removed by the next save, and the resumed run ends where
// the unbroken run ends.
TEST(IOCrash, AKillAtEachPhaseOfASaveLeavesACompleteCheckpoint) {
    const auto after = unbroken_run();
    for (const Phase& phase : kPhases) {
        SCOPED_TRACE(phase.name);
        ScratchDir dir;
        const auto file = dir / "run.safetensors";
        constexpr int kKilledSave = 3;
        ::setenv("FLUXION_DEBUG_KILL_SAVE", (std::string(phase.name) + ":" + std::to_string(kKilledSave)).c_str(), 1);
        const Outcome killed = run_writer(file, std::nullopt);
        ::unsetenv("FLUXION_DEBUG_KILL_SAVE");
        ASSERT_TRUE(WIFSIGNALED(killed.status) && WTERMSIG(killed.status) == SIGKILL)
            << "the writer was not killed at " << phase.name << " (status " << killed.status << ")";
        const int want = phase.replaced ? kKilledSave : kKilledSave - 1;
        auto loaded = crash_run::make_model();
        auto loaded_opt = crash_run::make_optimiser(loaded);
        std::map<std::string, std::string> extra;
        ASSERT_NO_THROW(extra = fx::load_checkpoint(file, loaded, loaded_opt));
        EXPECT_EQ(std::stoi(extra.at("step")), want);
        EXPECT_EQ(crash_run::parameters(loaded), after[static_cast<std::size_t>(want)]);
        int temporaries = 0;
        for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
            temporaries += entry.path().filename().string().rfind(".run.safetensors.tmp-", 0) == 0;
        EXPECT_EQ(temporaries, phase.replaced ? 0 : 1) << "the killed writer's temporary file";

        const Outcome resumed = run_writer(file, std::nullopt);
        ASSERT_TRUE(WIFEXITED(resumed.status) && WEXITSTATUS(resumed.status) == 0) << resumed.status;
        auto final_model = crash_run::make_model();
        auto final_opt = crash_run::make_optimiser(final_model);
        EXPECT_EQ(std::stoi(fx::load_checkpoint(file, final_model, final_opt).at("step")), kSteps);
        EXPECT_EQ(crash_run::parameters(final_model), after.back());
        for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
            EXPECT_EQ(entry.path().filename(), "run.safetensors") << "left behind after the resumed run";
    }
}

}  // namespace
