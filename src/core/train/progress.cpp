// progress.cpp — the training loop's progress display and its error for a NaN loss.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "fluxion/train.hpp"

namespace fluxion::detail {
namespace {

std::string duration_text(double seconds) {
    long s = static_cast<long>(seconds + 0.5);
    char buf[32];
    if (s >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
    return buf;
}

}  // namespace

TrainProgress::TrainProgress(const TrainOptions& options, std::optional<std::size_t> steps)
    : options_(options),
      steps_(steps),
      out_(options.out ? options.out : &std::cout),
      terminal_(!options.out && isatty(STDOUT_FILENO)),
      epoch_start_(Clock::now()),
      last_draw_(epoch_start_) {}

void TrainProgress::step(int epoch, std::size_t step, double loss) {
    if (step == 1) epoch_start_ = last_draw_ = Clock::now(), loss_sum_ = 0;
    loss_sum_ += loss;
    if (!options_.progress) return;
    auto since = std::chrono::duration<double>(Clock::now() - last_draw_).count();
    if (since >= (terminal_ ? 0.1 : 10.0)) draw(epoch, step, false);
}

void TrainProgress::end_epoch(int epoch, std::size_t steps) {
    if (options_.progress && steps > 0) draw(epoch, steps, true);
}

void TrainProgress::draw(int epoch, std::size_t step, bool final) {
    last_draw_ = Clock::now();
    double elapsed = std::chrono::duration<double>(last_draw_ - epoch_start_).count();
    double rate = elapsed > 0 ? double(step) / elapsed : 0;
    std::ostringstream line;
    line << "epoch " << epoch << "/" << options_.epochs << " ";
    if (steps_ && terminal_) {
        constexpr int width = 24;
        int filled = *steps_ ? int(width * double(step) / double(*steps_)) : width;
        line << "[" << std::string(filled, '=') << std::string(width - filled, ' ') << "] ";
    }
    line << step;
    if (steps_) line << "/" << *steps_;
    char rate_text[32];
    std::snprintf(rate_text, sizeof rate_text, "%.1f", rate);
    line << " steps  " << rate_text << " steps/s  ";
    if (final) line << duration_text(elapsed) << "  ";
    else if (steps_ && rate > 0) line << "eta " << duration_text(double(*steps_ - step) / rate) << "  ";
    line << "loss " << loss_sum_ / double(step);
    if (terminal_) *out_ << "\r\033[K" << line.str() << (final ? "\n" : "") << std::flush;
    else *out_ << line.str() << "\n" << std::flush;
}

void throw_not_finite(int epoch, std::size_t step, double loss) {
    std::ostringstream s;
    s << "train: the loss is " << loss << " at epoch " << epoch << ", step " << step
      << "; the model was left as it was before this step. Lower the learning rate, check the data for NaN or "
         "infinite values, or use a stable loss (logitcrossentropy on logits rather than crossentropy after softmax)";
    throw NumericalError(s.str());
}

}  // namespace fluxion::detail
