// allocation_counting.hpp — heap allocations made while a piece of code runs, told apart by who
// made them (allocation_counting.cpp replaces malloc and operator new for the whole test program;
// link it into the tests that use this header). Not available under AddressSanitizer.
#pragma once
#include <cstddef>
#include <string>

namespace allocation_counting {

struct Allocations {
    long ours;                // fluxion, the C++ library, the test
    long libraries;           // OpenBLAS, oneDNN, the Vulkan loader, the drivers, the validation layer
    std::size_t largest = 0;  // bytes of the largest single allocation, by anyone
    std::string ours_from;    // the modules `ours` were made from (the first few), for failure messages
};

void start();
Allocations stop();

// Allocations made by `steps` calls of f after two warm-up calls (a trace and a first replay).
template <class F> Allocations in(int steps, F&& f) {
    f();
    f();
    start();
    for (int i = 0; i < steps; ++i) f();
    return stop();
}

}  // namespace allocation_counting
