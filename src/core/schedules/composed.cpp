// composed.cpp — Constant, Sequence, Loop, Shifted: schedules made of schedules (ParameterSchedulers' complex.jl).
#include <ostream>

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

}  // namespace fluxion
