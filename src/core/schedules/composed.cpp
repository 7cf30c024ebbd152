// composed.cpp — Constant, Sequence, Loop, Shifted, Interpolator, Shortened: schedules made of schedules (ParameterSchedulers' complex.jl).
#include <cmath>
#include <ostream>
#include <string>

#include "core/schedules/print.hpp"
#include "fluxion/error.hpp"
#include "fluxion/schedules.hpp"

namespace fluxion {

Schedule::Schedule(double value) : Schedule(Constant{value}) {}

double Sequence::operator()(std::int64_t t) const {
    detail::check_step("Sequence", t);
    if (stages.empty()) throw ValueError("Sequence: no stages; give {schedule, steps} pairs");
    for (const auto& stage : stages) detail::check_positive("Sequence", "each stage's steps", stage.second);
    std::int64_t before = 0;  // steps of the stages before this one
    for (std::size_t i = 0; i + 1 < stages.size(); ++i) {
        if (t <= before + stages[i].second) return stages[i].first(t - before);
        before += stages[i].second;
    }
    return stages.back().first(t - before);  // the last stage continues past its steps
}

double Loop::operator()(std::int64_t t) const {
    detail::check_step("Loop", t);
    detail::check_positive("Loop", "period", period);
    return f((t - 1) % period + 1);
}

double Shifted::operator()(std::int64_t t) const {
    detail::check_step("Shifted", t);
    return schedule(t - 1 + offset);
}

double Interpolator::operator()(std::int64_t t) const {
    detail::check_step("Interpolator", t);
    if (!(rate > 0) || !std::isfinite(rate))
        throw ValueError("Interpolator: rate must be a positive number, got " + detail::shortest(rate));
    // ceil(t / rate) ≥ 1 for t ≥ 1; a step past what an int64 holds is refused rather than wrapped.
    const double inner = std::ceil(double(t) / rate);
    if (inner >= 9.2e18)
        throw ValueError("Interpolator: the step t = " + std::to_string(t) + " divided by rate = " +
                         detail::shortest(rate) + " is past the largest step");
    return schedule(static_cast<std::int64_t>(inner));
}

double Shortened::operator()(std::int64_t t) const {
    detail::check_step("Shortened", t);
    detail::check_positive("Shortened", "nsteps", nsteps);
    if (t > nsteps)
        throw ValueError("Shortened: the step t = " + std::to_string(t) + " is past nsteps = " + std::to_string(nsteps));
    return schedule(t);
}

std::ostream& operator<<(std::ostream& os, const Constant& s) {
    return os << "Constant(" << detail::shortest(s.value) << ')';
}
std::ostream& operator<<(std::ostream& os, const Sequence& s) {
    os << "Sequence(";
    for (std::size_t i = 0; i < s.stages.size(); ++i)
        os << (i ? ", " : "") << s.stages[i].first << " => " << s.stages[i].second;
    return os << ')';
}
std::ostream& operator<<(std::ostream& os, const Loop& s) { return os << "Loop(" << s.f << ", " << s.period << ')'; }
std::ostream& operator<<(std::ostream& os, const Shifted& s) {
    return os << "Shifted(" << s.schedule << ", " << s.offset << ')';
}
std::ostream& operator<<(std::ostream& os, const Interpolator& s) {
    return os << "Interpolator(" << s.schedule << ", " << detail::shortest(s.rate) << ')';
}
std::ostream& operator<<(std::ostream& os, const Shortened& s) {
    return os << "Shortened(" << s.schedule << ", " << s.nsteps << ')';
}

}  // namespace fluxion
