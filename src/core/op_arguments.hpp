// op_arguments.hpp — what every op needs before it calls a kernel: argument checks with clear
// messages, broadcasting, and the view descriptions kernels take.
#pragma once
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/registry.hpp"
#include "core/tape.hpp"
#include "fluxion/autodiff.hpp"
#include "core/tensor_impl.hpp"

namespace fluxion::detail {

// The one device shared by all arguments; DeviceError naming both devices otherwise.
Device common_device(const char* op, const std::vector<Tensor>& args);
void require_defined(const char* op, const Tensor& t);
void require_floating(const char* op, const Tensor& t);
// NumPy broadcasting of two shapes; ShapeError naming the op and both shapes otherwise.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// `axis` in [-ndim, ndim) to [0, ndim); ValueError naming the op otherwise. A 0-d tensor has no axis.
int normalize_axis(const char* op, int axis, int ndim);
// The same for ops that, as in PyTorch, also take axis 0 or -1 of a 0-d tensor (reductions,
// softmax): 0 there, which callers treat as the tensor's one element.
int normalize_scalar_axis(const char* op, int axis, int ndim);

backend::Strided view_of(const Tensor& t);
// The view of t broadcast to `shape` (stride 0 on broadcast axes).
backend::Strided broadcast_view(const Tensor& t, const Shape& shape);

// Contiguous in the kernel's sense (a fresh copy when t is a strided view).
Tensor dense(const Tensor& t);

inline const void* cptr(const Tensor& t) { return t.data_ptr(); }
inline void* mptr(const Tensor& t) { return t.data_ptr(); }

}  // namespace fluxion::detail
