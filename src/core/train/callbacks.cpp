// callbacks.cpp — the callback adaptors and the stopping rules.
#include "fluxion/callbacks.hpp"

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "fluxion/error.hpp"

namespace fluxion {

void stop() { throw StopTraining(); }

Callback every(std::int64_t n, Callback f) {
    if (n < 1) throw ValueError("every: n must be at least 1, got " + std::to_string(n));
    return [n, f = std::move(f)](const TrainEvent& e) {
        if (!e.epoch_end && e.steps % n == 0) f(e);
    };
}

Callback each_epoch(Callback f) {
    return [f = std::move(f)](const TrainEvent& e) {
        if (e.epoch_end) f(e);
    };
}

Callback throttle(double seconds, Callback f) {
    if (!(seconds >= 0)) throw ValueError("throttle: seconds must be non-negative, got " + std::to_string(seconds));
    using Clock = std::chrono::steady_clock;
    // Shared: a Callback is copied into TrainOptions, and each copy must see the same last call.
    auto last = std::make_shared<std::optional<Clock::time_point>>();
    return [seconds, last, f = std::move(f)](const TrainEvent& e) {
        const auto now = Clock::now();
        if (*last && std::chrono::duration<double>(now - **last).count() < seconds) return;
        *last = now;
        f(e);
    };
}

EarlyStopping::EarlyStopping(int patience, double min_delta) : patience_(patience), min_delta_(min_delta) {
    if (patience < 1) throw ValueError("EarlyStopping: patience must be at least 1, got " + std::to_string(patience));
    if (!(min_delta >= 0)) throw ValueError("EarlyStopping: min_delta must be non-negative, got " + std::to_string(min_delta));
}

bool EarlyStopping::operator()(double score) {
    if (score < best_ - min_delta_) {
        best_ = score;
        waited_ = 0;
        return false;
    }
    return ++waited_ >= patience_;
}

Plateau::Plateau(int width, double min_dist) : width_(width), min_dist_(min_dist) {
    if (width < 1) throw ValueError("Plateau: width must be at least 1, got " + std::to_string(width));
    if (!(min_dist >= 0)) throw ValueError("Plateau: min_dist must be non-negative, got " + std::to_string(min_dist));
}

bool Plateau::operator()(double score) {
    count_ = seen_ && std::abs(score - previous_) < min_dist_ ? count_ + 1 : 0;
    previous_ = score;
    seen_ = true;
    return count_ >= width_;
}

}  // namespace fluxion
