// fluxion/progress.hpp — the progress display of a training loop. fx::train shows it; a loop of
// your own shows the same one through a Progress:
//
//   fx::Progress progress({.epochs = 8, .steps = loader.size(), .unit = "images", .terminal_only = true});
//   for (int epoch = 1; epoch <= 8; ++epoch) {
//       std::size_t step = 0;
//       for (auto [x, y] : loader | dev) progress.step(epoch, ++step, train_step(x, y), x.shape(0));
//       progress.clear();                  // or progress.end_epoch(epoch, step) to keep a final line
//       std::printf("epoch %d ...\n", epoch);
//   }
//
// On a terminal: one line redrawn in place at most ten times a second — epoch, a bar and steps
// done/total when the number of steps is known, the rate, the time left, and the running mean loss
// of the epoch. Elsewhere (a file, a pipe, a stream passed as `out`): a plain line every 10 seconds
// and one per epoch, or nothing at all with `terminal_only`. The rate counts from the end of an
// epoch's first step, so it leaves out whatever the loop did between epochs.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

namespace fluxion {

struct ProgressOptions {
    int epochs = 1;
    std::optional<std::int64_t> steps{};  // steps per epoch, when known: the bar and the time left
    std::string unit{};                   // what step()'s `items` counts ("images"); the rate is in it
    std::ostream* out = nullptr;          // stdout unless set
    std::optional<bool> terminal{};       // redraw in place; default: `out` is unset and stdout is a terminal
    bool terminal_only = false;           // nothing unless redrawing (for a loop that logs its epochs)
};

class Progress {
public:
    explicit Progress(ProgressOptions options);
    ~Progress();
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    // After step `step` (1-based) of `epoch` with that step's loss and, when counting a unit, its items.
    void step(int epoch, std::size_t step, double loss, std::int64_t items = 0);
    // After the epoch's last step: the epoch's final line (on a terminal, the finished bar stays).
    void end_epoch(int epoch, std::size_t steps);
    // Erases the line being redrawn, if any, so that the loop can print its own (nothing elsewhere).
    void clear();
    bool redraws() const { return terminal_; }

private:
    using Clock = std::chrono::steady_clock;
    void draw(int epoch, std::size_t step, bool final);

    ProgressOptions options_;
    std::ostream* out_;
    bool terminal_;
    bool shown_;          // whether anything is printed at all
    bool drawn_ = false;  // a line is on the terminal, not ended
    Clock::time_point epoch_start_, last_draw_;
    double loss_sum_ = 0;
    std::int64_t items_ = 0, first_items_ = 0;
};

}  // namespace fluxion
