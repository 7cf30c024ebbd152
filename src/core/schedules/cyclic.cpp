// cyclic.cpp — the triangle, sine and cosine waves and OneCycle (ParameterSchedulers' cyclic.jl
// formulas): a wave g(t) in [0, 1] scaled to |l0 - l1| above min(l0, l1).
#include <cmath>
#include <numbers>

#include "core/schedules/print.hpp"
#include "fluxion/error.hpp"
#include "fluxion/schedules.hpp"

namespace fluxion {
namespace {

using std::numbers::pi;

double tri(std::int64_t t, std::int64_t period) {
    return (2 / pi) * std::abs(std::asin(std::sin(pi * double(t - 1) / double(period))));
}
double sine(std::int64_t t, std::int64_t period) { return std::abs(std::sin(pi * double(t - 1) / double(period))); }
double cycle(double l0, double l1, double g) { return std::abs(l0 - l1) * g + std::min(l0, l1); }
// The amplitude halves every period.
double halved(std::int64_t t, std::int64_t period) { return std::pow(0.5, double((t - 1) / period)); }

void check(const char* name, std::int64_t t, std::int64_t period) {
    detail::check_step(name, t);
    detail::check_positive(name, "period", period);
}

template <class Wave> std::ostream& print_wave(std::ostream& os, const char* name, const Wave& s) {
    detail::FieldPrinter(os, name)("l0", s.l0)("l1", s.l1)("period", s.period);
    return os;
}

}  // namespace

double Triangle::operator()(std::int64_t t) const {
    check("Triangle", t, period);
    return cycle(l0, l1, tri(t, period));
}
double TriangleDecay2::operator()(std::int64_t t) const {
    check("TriangleDecay2", t, period);
    return cycle(l0, l1, tri(t, period) * halved(t, period));
}
double TriangleExp::operator()(std::int64_t t) const {
    check("TriangleExp", t, period);
    return cycle(l0, l1, tri(t, period) * std::pow(decay, double(t - 1)));
}
double Sin::operator()(std::int64_t t) const {
    check("Sin", t, period);
    return cycle(l0, l1, sine(t, period));
}
double SinDecay2::operator()(std::int64_t t) const {
    check("SinDecay2", t, period);
    return cycle(l0, l1, sine(t, period) * halved(t, period));
}
double SinExp::operator()(std::int64_t t) const {
    check("SinExp", t, period);
    return cycle(l0, l1, sine(t, period) * std::pow(decay, double(t - 1)));
}
double CosAnneal::operator()(std::int64_t t) const {
    check("CosAnneal", t, period);
    const std::int64_t since = restart ? (t - 1) % period : t - 1;
    return cycle(l0, l1, (1 + std::cos(pi * double(since) / double(period))) / 2);
}

// ParameterSchedulers builds it as a Sequence: the rising half-cosine is CosAnneal(maxval, startval,
// warmup, no restart) shifted by warmup steps, the falling one CosAnneal(maxval, endval, warmdown).
double OneCycle::operator()(std::int64_t t) const {
    detail::check_step("OneCycle", t);
    detail::check_positive("OneCycle", "nsteps", nsteps);
    if (!(percent_start > 0 && percent_start < 1))
        throw ValueError("OneCycle: percent_start must be in (0, 1), got " + detail::shortest(percent_start));
    const auto warmup = static_cast<std::int64_t>(std::ceil(double(nsteps) * percent_start));
    const std::int64_t warmdown = nsteps - warmup;
    if (warmdown < 1)
        throw ValueError("OneCycle: nsteps = " + std::to_string(nsteps) + " leaves no step after the warm-up");
    if (t > nsteps)
        throw ValueError("OneCycle: the step t = " + std::to_string(t) + " is past nsteps = " + std::to_string(nsteps));
    const double start = startval.value_or(maxval / 25), end = endval.value_or(maxval / 1e5);
    if (t <= warmup) return CosAnneal{.l0 = maxval, .l1 = start, .period = warmup, .restart = false}(t + warmup);
    return CosAnneal{.l0 = maxval, .l1 = end, .period = warmdown, .restart = false}(t - warmup);
}

std::ostream& operator<<(std::ostream& os, const Triangle& s) { return print_wave(os, "Triangle", s); }
std::ostream& operator<<(std::ostream& os, const TriangleDecay2& s) { return print_wave(os, "TriangleDecay2", s); }
std::ostream& operator<<(std::ostream& os, const Sin& s) { return print_wave(os, "Sin", s); }
std::ostream& operator<<(std::ostream& os, const SinDecay2& s) { return print_wave(os, "SinDecay2", s); }
std::ostream& operator<<(std::ostream& os, const TriangleExp& s) {
    detail::FieldPrinter(os, "TriangleExp")("l0", s.l0)("l1", s.l1)("period", s.period)("decay", s.decay);
    return os;
}
std::ostream& operator<<(std::ostream& os, const SinExp& s) {
    detail::FieldPrinter(os, "SinExp")("l0", s.l0)("l1", s.l1)("period", s.period)("decay", s.decay);
    return os;
}
std::ostream& operator<<(std::ostream& os, const CosAnneal& s) {
    detail::FieldPrinter(os, "CosAnneal")("l0", s.l0)("l1", s.l1)("period", s.period)("restart", s.restart);
    return os;
}
std::ostream& operator<<(std::ostream& os, const OneCycle& s) {
    const double start = s.startval.value_or(s.maxval / 25), end = s.endval.value_or(s.maxval / 1e5);
    detail::FieldPrinter(os, "OneCycle")("nsteps", s.nsteps)("maxval", s.maxval)("startval", start)("endval", end)(
        "percent_start", s.percent_start);
    return os;
}

}  // namespace fluxion
