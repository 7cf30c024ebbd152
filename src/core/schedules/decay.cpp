// decay.cpp — Step, Exp, Poly, Inv: a start value times a decay factor of t (ParameterSchedulers' decay.jl formulas).
#include <cmath>

#include "core/schedules/print.hpp"
#include "fluxion/error.hpp"
#include "fluxion/schedules.hpp"

namespace fluxion {

double Step::operator()(std::int64_t t) const {
    detail::check_step("Step", t);
    if (step_sizes.empty()) throw ValueError("Step: step_sizes is empty; give one step size or several");
    for (auto size : step_sizes) detail::check_positive("Step", "each of step_sizes", size);
    std::int64_t passed = 0;
    if (step_sizes.size() == 1) {
        passed = (t - 1) / step_sizes[0];
    } else {
        std::int64_t sum = 0;
        for (auto size : step_sizes)
            if (t > (sum += size)) ++passed;
    }
    return start * std::pow(decay, double(passed));
}

double Exp::operator()(std::int64_t t) const {
    detail::check_step("Exp", t);
    return start * std::pow(decay, double(t - 1));
}

double Poly::operator()(std::int64_t t) const {
    detail::check_step("Poly", t);
    detail::check_positive("Poly", "max_iter", max_iter);
    if (t > max_iter)
        throw ValueError("Poly: the step t = " + std::to_string(t) + " is past max_iter = " + std::to_string(max_iter));
    return start * std::pow(1 - double(t - 1) / double(max_iter), degree);
}

double Inv::operator()(std::int64_t t) const {
    detail::check_step("Inv", t);
    return start / std::pow(1 + double(t - 1) * decay, degree);
}

std::ostream& operator<<(std::ostream& os, const Step& s) {
    std::string sizes;
    for (auto size : s.step_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(size);
    detail::FieldPrinter(os, "Step")("start", s.start)("decay", s.decay).put("step_sizes", "[" + sizes + "]");
    return os;
}
std::ostream& operator<<(std::ostream& os, const Exp& s) {
    detail::FieldPrinter(os, "Exp")("start", s.start)("decay", s.decay);
    return os;
}
std::ostream& operator<<(std::ostream& os, const Poly& s) {
    detail::FieldPrinter(os, "Poly")("start", s.start)("degree", s.degree)("max_iter", s.max_iter);
    return os;
}
std::ostream& operator<<(std::ostream& os, const Inv& s) {
    detail::FieldPrinter(os, "Inv")("start", s.start)("decay", s.decay)("degree", s.degree);
    return os;
}

}  // namespace fluxion
