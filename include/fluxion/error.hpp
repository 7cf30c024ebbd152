// fluxion/error.hpp — the exceptions fluxion throws.
// Every message names the operation, the shapes or devices involved, and the likely fix.
#pragma once
#include <stdexcept>
#include <string>

namespace fluxion {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct ShapeError : Error { using Error::Error; };       // shapes that do not fit together
struct DeviceError : Error { using Error::Error; };      // mixed devices, unknown or missing device
struct DTypeError : Error { using Error::Error; };       // element type not supported by an op
struct ValueError : Error { using Error::Error; };       // a bad argument value (index out of range, ...)
struct IOError : Error { using Error::Error; };          // missing, corrupt or truncated files
struct OutOfMemory : Error { using Error::Error; };      // an allocation failed even after freeing caches
struct NumericalError : Error { using Error::Error; };   // NaN or infinite loss during training

}  // namespace fluxion
