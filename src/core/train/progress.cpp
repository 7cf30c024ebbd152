// progress.cpp — the training loop's progress display and its error for a NaN loss.
#include "fluxion/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>

#include "fluxion/error.hpp"
#include "fluxion/train.hpp"

namespace fluxion {
namespace {

std::string duration_text(double seconds) {
    long s = static_cast<long>(seconds + 0.5);
    char buf[32];
    if (s >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
    return buf;
}

}  // namespace

Progress::Progress(ProgressOptions options)
    : options_(std::move(options)),
      out_(options_.out ? options_.out : &std::cout),
      terminal_(options_.terminal.value_or(!options_.out && isatty(STDOUT_FILENO))),
      shown_(terminal_ || !options_.terminal_only),
      epoch_start_(Clock::now()),
      last_draw_(epoch_start_) {}

Progress::~Progress() {
    if (drawn_) *out_ << "\n" << std::flush;  // an epoch cut short (an exception): keep its line
}

void Progress::step(int epoch, std::size_t step, double loss, std::int64_t items) {
    if (step == 1) epoch_start_ = last_draw_ = Clock::now(), loss_sum_ = 0, items_ = 0, first_items_ = items;
    loss_sum_ += loss;
    items_ += items;
    if (!shown_) return;
    auto since = std::chrono::duration<double>(Clock::now() - last_draw_).count();
    if (since >= (terminal_ ? 0.1 : 10.0)) draw(epoch, step, false);
}

void Progress::end_epoch(int epoch, std::size_t steps) {
    if (shown_ && steps > 0) draw(epoch, steps, true);
}

void Progress::clear() {
    if (!drawn_) return;
    *out_ << "\r\033[K" << std::flush;
    drawn_ = false;
}

void Progress::draw(int epoch, std::size_t step, bool final) {
    last_draw_ = Clock::now();
    double elapsed = std::chrono::duration<double>(last_draw_ - epoch_start_).count();
    // Timed from the end of the first step, so the rate counts the steps (or items) after it.
    bool counting_items = !options_.unit.empty();
    double done = counting_items ? double(items_ - first_items_) : double(step - 1);
    double rate = elapsed > 0 && done > 0 ? done / elapsed : 0;
    double step_rate = elapsed > 0 && step > 1 ? double(step - 1) / elapsed : 0;
    std::ostringstream line;
    line << "epoch " << epoch << "/" << options_.epochs << " ";
    if (options_.steps && terminal_) {
        constexpr int width = 24;
        auto total = double(*options_.steps);
        int filled = total > 0 ? std::min(width, int(width * double(step) / total)) : width;
        line << "[" << std::string(filled, '=') << std::string(width - filled, ' ') << "] ";
    }
    line << step;
    if (options_.steps) line << "/" << *options_.steps;
    line << " steps  ";
    if (rate > 0) {
        char rate_text[48];
        if (counting_items) std::snprintf(rate_text, sizeof rate_text, "%.0f %s/s  ", rate, options_.unit.c_str());
        else std::snprintf(rate_text, sizeof rate_text, "%.1f steps/s  ", rate);
        line << rate_text;
    }
    if (final) line << duration_text(elapsed) << "  ";
    else if (options_.steps && step_rate > 0 && std::int64_t(step) < *options_.steps)
        line << "eta " << duration_text(double(*options_.steps - std::int64_t(step)) / step_rate) << "  ";
    line << "loss " << loss_sum_ / double(step);
    if (terminal_) {
        *out_ << "\r\033[K" << line.str() << (final ? "\n" : "") << std::flush;
        drawn_ = !final;
    } else {
        *out_ << line.str() << "\n" << std::flush;
    }
}

namespace detail {

void throw_not_finite(int epoch, std::size_t step, double loss) {
    std::ostringstream s;
    s << "train: the loss is " << loss << " at epoch " << epoch << ", step " << step
      << "; the model was left as it was before this step. Lower the learning rate, check the data for NaN or "
         "infinite values, or use a stable loss (logitcrossentropy on logits rather than crossentropy after softmax)";
    throw NumericalError(s.str());
}

}  // namespace detail
}  // namespace fluxion
