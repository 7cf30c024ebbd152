// print.cpp — shortest round-trip numbers and the argument checks shared by the schedules.
#include "core/schedules/print.hpp"

#include <charconv>
#include <sstream>

#include "fluxion/error.hpp"
#include "fluxion/schedules.hpp"

namespace fluxion {
namespace detail {

std::string shortest(double v) {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return {buf, r.ptr};
}

void check_step(const char* schedule, std::int64_t t) {
    if (t < 1) throw ValueError(std::string(schedule) + ": the step t counts from 1, got " + std::to_string(t));
}

void check_positive(const char* schedule, const char* field, std::int64_t value) {
    if (value < 1)
        throw ValueError(std::string(schedule) + ": " + field + " must be at least 1, got " + std::to_string(value));
}

void print_callable(std::ostream& os) { os << "λ"; }

}  // namespace detail

std::ostream& operator<<(std::ostream& os, const Schedule& s) {
    s.impl_->print(os);
    return os;
}

std::string repr(const Schedule& s) {
    std::ostringstream os;
    os << s;
    return os.str();
}

}  // namespace fluxion
