// fluxion/info.hpp — what fluxion runs on here, as PyTorch's torch.__config__.show(): for bug
// reports and benchmark tables.
#pragma once
#include <string>

namespace fluxion {

// Lines of text: fluxion's version; the CPU's model, cores and widest vector instructions; the
// threads and OpenMP's wait policy; the matrix-product library and the kernel it runs, and how that
// kernel was chosen; the convolution library; every GPU backend found, with its devices or why it
// cannot be used.
std::string info();

}  // namespace fluxion
