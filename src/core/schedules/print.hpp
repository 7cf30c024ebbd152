// print.hpp — how schedules print their fields ("CosAnneal(l0 = 0.1, l1 = 0, period = 100, restart = true)"),
// and the checks of their arguments.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

namespace fluxion::detail {

// The shortest decimal form that reads back as the same double ("0.1", "1e-05").
std::string shortest(double v);

// Prints `Name(a = 1, b = 2)` field by field.
class FieldPrinter {
public:
    FieldPrinter(std::ostream& os, const char* name) : os_(os) { os_ << name << '('; }
    ~FieldPrinter() { os_ << ')'; }
    FieldPrinter(const FieldPrinter&) = delete;
    FieldPrinter& operator=(const FieldPrinter&) = delete;
    FieldPrinter& operator()(const char* field, double v) { return put(field, shortest(v)); }
    FieldPrinter& operator()(const char* field, std::int64_t v) { return put(field, std::to_string(v)); }
    FieldPrinter& operator()(const char* field, bool v) { return put(field, v ? "true" : "false"); }
    FieldPrinter& put(const char* field, const std::string& text) {
        os_ << (first_ ? "" : ", ") << field << " = " << text;
        first_ = false;
        return *this;
    }

private:
    std::ostream& os_;
    bool first_ = true;
};

// ValueError unless t >= 1 ("Exp: the step t is 1-based, got 0").
void check_step(const char* schedule, std::int64_t t);
// ValueError unless value >= 1 ("CosAnneal: period must be at least 1, got 0").
void check_positive(const char* schedule, const char* field, std::int64_t value);

}  // namespace fluxion::detail
