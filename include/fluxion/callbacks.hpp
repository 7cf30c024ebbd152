// fluxion/callbacks.hpp — what fx::train calls after each step and each epoch (Flux's callbacks,
// throttle, stop, early_stopping and plateau):
//
//   fx::EarlyStopping patience(3);                      // no better score for 3 checks: stop
//   fx::train(lossfn, model, loader, opt, {.epochs = 50, .callbacks = {
//       fx::every(100, [](const fx::TrainEvent& e) { std::cout << e.loss << "\n"; }),
//       fx::each_epoch([&](const fx::TrainEvent& e) { if (patience(-accuracy(model))) fx::stop(); }),
//       fx::throttle(10.0, [&](const fx::TrainEvent&) { fx::save("checkpoint.safetensors", model); }),
//       tb.callback(),                                  // a TensorBoardLogger: losses and epochs
//   }});
//
// fx::stop() ends training after the current step (fx::train returns the losses so far); any
// other exception from a callback propagates, as from the loss.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>

namespace fluxion {

// What a callback sees: after each step, and once more at each epoch's end.
struct TrainEvent {
    int epoch = 1;            // from 1
    std::size_t step = 0;     // within the epoch, from 1 (at the epoch's end: its number of steps)
    std::int64_t steps = 0;   // since training began, from 1
    double loss = 0;          // this step's; at the epoch's end, the epoch's mean
    bool epoch_end = false;
};

using Callback = std::function<void(const TrainEvent&)>;

// Thrown by fx::stop; fx::train catches it (Flux's Flux.stop()).
struct StopTraining : std::exception {
    const char* what() const noexcept override { return "fx::stop() called outside fx::train"; }
};
[[noreturn]] void stop();

// `f` after every n-th step (not at epoch ends); ValueError unless n ≥ 1.
Callback every(std::int64_t n, Callback f);
// `f` at each epoch's end only.
Callback each_epoch(Callback f);
// `f` at most once every `seconds`: the first event, then the first after each interval (Flux.throttle).
Callback throttle(double seconds, Callback f);

// Flux's early_stopping: called with a score each time (lower is better), true once the score has
// not improved on the best by more than min_delta for `patience` calls in a row (the first score
// always counts as an improvement, where Flux's starts from a best of 0).
class EarlyStopping {
public:
    explicit EarlyStopping(int patience, double min_delta = 0);
    bool operator()(double score);

private:
    int patience_, waited_ = 0;
    double min_delta_, best_ = std::numeric_limits<double>::infinity();
};

// Flux's plateau: true once `width` calls in a row each gave a score within min_dist of the one before.
class Plateau {
public:
    explicit Plateau(int width, double min_dist = 1e-6);
    bool operator()(double score);

private:
    int width_, count_ = 0;
    double min_dist_, previous_ = 0;
    bool seen_ = false;
};

}  // namespace fluxion
