// backend.hpp — the one interface every backend implements (ggml's idea): a table of memory,
// copy and kernel functions. The CPU backend is built into libfluxion; every other backend is a
// plugin `libfluxion-<name>.so` exporting `fluxion_backend_entry`, found at run time.
//
// Conventions for kernels: pointers are device pointers of the backend; element counts and
// strides are in elements; unless a parameter says otherwise, buffers are contiguous row-major.
// Kernels are asynchronous on devices that queue work; copies to the host are synchronous.
// A kernel reports an unsupported dtype by throwing fluxion::DTypeError.
#pragma once
#include <string>
#include <cstddef>
#include <cstdint>

#include "fluxion/capabilities.hpp"
#include "fluxion/dtype.hpp"

namespace fluxion::backend {

inline constexpr int kAbiVersion = 8;
inline constexpr int kMaxDims = 8;

// One code per line of core/elementwise_formulas.def, the op registry, whose lines say what the
// parameters a and b are (leakyrelu's slope, elu's and celu's alpha, clamp's and hardtanh's bounds,
// pow_scalar's exponent, softshrink's lambda, trelu's threshold and value).
enum class Unary : int {
#define FX_UNARY(name, code, reads, api, value, gradient) name = code,
#include "core/elementwise_formulas.def"
    count  // one past the last code
};

enum class Binary : int {
    add, sub, mul, div, pow, maximum, minimum,
    eq, ne, lt, le, gt, ge,  // write bool
};

enum class Reduce : int { sum, mean, max, min, argmax, argmin };  // argmax/argmin write i64

enum class Pool : int { max, mean };

// The optimisers' update rules, one per FX_OPTIMISER line of the op registry.
enum class Optimiser : int {
#define FX_OPTIMISER(name, code, states, m, v, w, p) name = code,
#include "core/elementwise_formulas.def"
};

struct Conv2dShape {
    std::int64_t n, c, h, w;        // input  {n, c, h, w}
    std::int64_t k, r, s;           // weight {k, c / groups, r, s}
    std::int64_t oh, ow;            // output {n, k, oh, ow}
    std::int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
};

struct Pool2dShape {
    std::int64_t n, c, h, w, oh, ow;
    std::int64_t kh, kw, stride_h, stride_w, pad_h, pad_w;
};

// Hyper-parameters of one optimiser step; each rule reads the fields it needs.
struct OptimiserStep {
    double eta = 0, rho = 0, beta1 = 0, beta2 = 0, epsilon = 0;
    double decay = 0;             // AdamW's weight decay λ, NAdam's momentum decay ψ
    double lower = 0, upper = 0;  // Rprop's bounds on its step sizes
    std::int64_t t = 0;  // 1-based step count (Adam's bias correction)
};

// One step of an elementwise chain (Backend::elementwise_chain): unary's op (with a and b), or
// binary's arithmetic op (add ... minimum) between the chain's value and another operand of the
// chain's n elements, or one value broadcast; the chain's value on the left or on the right.
struct ElementwiseStep {
    bool binary = false;
    Unary unary_op = Unary::neg;
    double a = 0, b = 0;
    Binary binary_op = Binary::add;
    bool value_first = true;  // value op other, else other op value
    bool other_scalar = false;
};

// What follows a convolution in Backend::conv2d_epilogue: y += bias (one value per output channel,
// a Conv layer's broadcast add), then y = op(y) (unary's op with its parameters a and b).
struct ConvEpilogue {
    bool bias = false;
    bool activation = false;
    Unary op = Unary::relu;
    double a = 0, b = 0;
};

// A strided view of `ndim` dimensions, sizes in `shape`, strides (elements) in `strides`.
struct Strided {
    int ndim;
    std::int64_t shape[kMaxDims];
    std::int64_t strides[kMaxDims];
};

// What kind of processor a device is (fluxion::DeviceKind, public for fx::devices): fx::gpu's
// default never picks a `cpu`-kind device (lavapipe, SwiftShader), the CPU backend is faster there.
using fluxion::DeviceKind;

struct DeviceProperties {
    char name[256];           // "NVIDIA H100 80GB HBM3", "llvmpipe (LLVM 15.0.6, 256 bits)"
    char vendor[64];          // "NVIDIA", "AMD", "Intel", "Apple", "Mesa", ... ("" if unknown)
    DeviceKind kind;
    std::size_t total_bytes;  // device memory
    std::size_t free_bytes;
};

// The kernel entries of the table, for capability queries (fluxion::Op, public for fx::supports).
using fluxion::Op;

struct Backend {
    int abi_version;
    const char* name;  // "CPU", "CUDA", ...
    // Among functional backends with a GPU-kind device, the highest is the default of fx::gpu and
    // get_device(): CUDA 100, Vulkan 50, test plugins 0.
    int priority;

    // ---- devices ----
    // Whether the backend can run here; if not, `why` (may be null) receives a reason.
    bool (*functional)(char* why, std::size_t why_size);
    int (*device_count)();
    void (*device_properties)(int device, DeviceProperties* out);
    // Whether `device` runs `op` on element type `t`; if not, `why` (may be null) receives the
    // reason naming the device and the missing feature, e.g. "Vulkan:0 (llvmpipe) has no
    // shaderFloat64". An entry that handles `t` for some of its variants only (unary exp on i32
    // does not run, unary neg does) answers true; the variant throws DTypeError when called.
    // A null entry means "everything".
    bool (*supports)(int device, Op op, DType t, char* why, std::size_t why_size);
    void (*synchronize)(int device);

    // ---- memory ----
    void* (*alloc)(int device, std::size_t bytes);  // throws fluxion::OutOfMemory
    void (*free)(int device, void* ptr);
    void (*copy_from_host)(int device, void* dst, const void* src, std::size_t bytes);
    void (*copy_to_host)(int device, void* dst, const void* src, std::size_t bytes);
    void (*copy_device)(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes);

    // ---- layout ----
    void (*fill)(int device, DType t, std::int64_t n, void* dst, double value);
    // dst[view of shape with dst strides] = src[view with src strides]; both share `shape`.
    void (*copy_strided)(int device, DType t, const Strided* src_view, const void* src,
                         const std::int64_t* dst_strides, void* dst);
    void (*cast)(int device, DType from, DType to, std::int64_t n, const void* src, void* dst);
    // dst[o, j, i] = src[o, idx[j], i] for src {outer, n_src, inner}, idx {n_idx} (i64), dst {outer, n_idx, inner}
    void (*index_select)(int device, DType t, std::int64_t outer, std::int64_t n_src, std::int64_t inner,
                         const void* src, const std::int64_t* idx, std::int64_t n_idx, void* dst);
    // dst[o, idx[j], i] += src[o, j, i]: the gradient of index_select
    void (*index_add)(int device, DType t, std::int64_t outer, std::int64_t n_dst, std::int64_t inner,
                      const void* src, const std::int64_t* idx, std::int64_t n_idx, void* dst);

    // ---- elementwise ----
    void (*unary)(int device, Unary op, DType t, std::int64_t n, const void* x, void* y, double a, double b);
    // gx = gy * d op(x) / dx, given x and y = op(x)
    void (*unary_backward)(int device, Unary op, DType t, std::int64_t n, const void* x, const void* y,
                           const void* gy, void* gx, double a, double b);
    // out (contiguous, shape of the views) = a op b, a and b broadcast by stride-0 views.
    // `t` is the element type of a and b; comparisons write bool, the rest write t.
    void (*binary)(int device, Binary op, DType t, const Strided* a_view, const void* a,
                   const Strided* b_view, const void* b, void* out);
    // out = cond ? a : b, all three broadcast to the shape of the views; cond is bool.
    void (*where)(int device, DType t, const Strided* c_view, const void* c, const Strided* a_view,
                  const void* a, const Strided* b_view, const void* b, void* out);

    // ---- reductions: src {outer, n, inner} -> dst {outer, inner} ----
    void (*reduce)(int device, Reduce op, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner,
                   const void* src, void* dst);

    // ---- linear algebra ----
    // C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] for b < batch; row-major, op = transpose if set.
    void (*gemm)(int device, DType t, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                 double alpha, const void* a, std::int64_t lda, std::int64_t stride_a, const void* b,
                 std::int64_t ldb, std::int64_t stride_b, double beta, void* c, std::int64_t ldc,
                 std::int64_t stride_c, std::int64_t batch);

    // ---- neural-network kernels ----
    void (*conv2d)(int device, DType t, const Conv2dShape* s, const void* x, const void* w, void* y);
    void (*conv2d_backward_input)(int device, DType t, const Conv2dShape* s, const void* gy, const void* w, void* gx);
    void (*conv2d_backward_weight)(int device, DType t, const Conv2dShape* s, const void* x, const void* gy, void* gw);
    void (*pool2d)(int device, Pool op, DType t, const Pool2dShape* s, const void* x, void* y);
    void (*pool2d_backward)(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                            const void* gy, void* gx);
    // softmax (or log-softmax) along the middle axis of {outer, n, inner}
    void (*softmax)(int device, bool log, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner,
                    const void* x, void* y);
    void (*softmax_backward)(int device, bool log, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner,
                             const void* y, const void* gy, void* gx);

    // ---- recurrent cells (optional; null where a backend has none: the layers then compose the
    // step from the kernels above) ----
    // One LSTM step of n rows and h units. gates {n, 4h} at row stride ld_gates: the pre-activations
    // of the gates i, f, g, o (PyTorch's order), replaced by their activations σ(i), σ(f), tanh(g),
    // σ(o); c_prev and c {n, h}: the cell state before and after (c = σ(f) c_prev + σ(i) tanh(g));
    // h_out {n, h} at row stride ld_h: the output σ(o) tanh(c).
    void (*lstm_cell)(int device, DType t, std::int64_t n, std::int64_t h, void* gates, std::int64_t ld_gates,
                      const void* c_prev, void* c, void* h_out, std::int64_t ld_h);
    // Its gradient, given the activations lstm_cell left in `gates`, c_prev and c: the gradient of
    // h_out is gh (row stride ld_gh) plus gh_next {n, h} when that is not null; gc {n, h} holds the
    // gradient of c and is replaced by that of c_prev; dgates (row stride ld_gates) receives the
    // gradient of the pre-activations.
    void (*lstm_cell_backward)(int device, DType t, std::int64_t n, std::int64_t h, const void* gates,
                               std::int64_t ld_gates, const void* c_prev, const void* c, const void* gh,
                               std::int64_t ld_gh, const void* gh_next, void* gc, void* dgates);

    // ---- optimisers: one fused step over n parameters; state buffers as the rule needs (else null) ----
    void (*optimiser_step)(int device, Optimiser rule, DType t, std::int64_t n, void* param, const void* grad,
                           void* state1, void* state2, void* state3, const OptimiserStep* hp);

    // ---- fused kernels (optional; null where a backend has none) ----
    // fx::compile's fusion (core/compile/fusion.cpp) replaces a run of recorded calls by one of these
    // where the calls' own table has it. Each computes what the calls it stands for compute, in the
    // same order and with the same rounding of every intermediate to t: bit for bit on the CPU, and
    // on a GPU up to how its compiler contracts the same formulas. They take the floating types the
    // device's unfused kernels take (fusion leaves integer calls alone).
    //
    // The calls unary/binary(steps[0]), ..., unary/binary(steps[count - 1]) on n elements, each
    // reading the result of the one before, without the intermediates. ptrs: x, each binary step's
    // other operand in order, y (which no step reads).
    void (*elementwise_chain)(int device, DType t, std::int64_t n, const ElementwiseStep* steps, std::size_t count,
                              void* const* ptrs);
    // conv2d into y, then the epilogue in place on y.
    void (*conv2d_epilogue)(int device, DType t, const Conv2dShape* s, const void* x, const void* w,
                            const void* bias, const ConvEpilogue* e, void* y);
    // pool2d_backward into gx, then unary_backward(act) of it in place, where x, the pool's input, is
    // act's output: act is an op whose gradient reads only its output and takes no parameters (relu,
    // sigmoid, tanh). The full-size gradient between the two is never written on its own.
    void (*pool2d_backward_activation)(int device, Pool op, DType t, const Pool2dShape* s, const void* x,
                                       const void* y, const void* gy, Unary act, void* gx);
    // optimiser_step on `count` tensors of one rule and type: tensor i has n[i] elements, the
    // hyper-parameters *hp[i] and the buffers ptrs[5i .. 5i + 4] (parameter, gradient, state1, state2,
    // state3; null states where the rule keeps none).
    void (*optimiser_steps)(int device, Optimiser rule, DType t, std::size_t count, const std::int64_t* n,
                            const OptimiserStep* const* hp, void* const* ptrs);

    // ---- recorded submissions (optional; null where a backend has none) ----
    // fx::compile replays a plan's device work as one recorded submission where these exist (one
    // Vulkan command buffer, one CUDA graph). Between capture_begin and
    // capture_end the device records the kernels and copies it is given instead of running them;
    // capture_end returns the recording (null after an error: then nothing stays recorded).
    // capture_run waits for earlier work, reads the host memory of the recorded copy_from_host
    // calls again (the same addresses), the optimiser steps' hyper-parameters again (the same
    // OptimiserStep objects), submits the recording and waits until it has run. A recording may
    // not contain copy_to_host. Memory a recorded kernel used (its own scratch included) must
    // outlive the recording.
    void (*capture_begin)(int device);
    void* (*capture_end)(int device);
    void (*capture_run)(int device, void* recording);
    void (*capture_free)(int device, void* recording);

    // ---- mixed precision's multi-tensor kernels (optional; null where a backend has none) ----
    // fx::MixedPrecision calls these once a step where its device's table has them, as PyTorch's
    // GradScaler and fused optimisers do, and otherwise composes the same work from the kernels above
    // (a widening cast, a division and two reductions per gradient, the rule, a rounding cast per
    // parameter), which these compute bit for bit on the CPU.
    //
    // Whether every element of `count` tensors of type t (tensor i: n[i] elements at ptrs[i]),
    // divided by `divisor` in t's compute type (f32 for f16 and bf16) unless it is 1, is finite:
    // writes 0 to the f32 at `flag` if so, NaN otherwise (the loss scale's overflow check).
    void (*nonfinite_check)(int device, DType t, std::size_t count, const std::int64_t* n, const void* const* ptrs,
                            double divisor, void* flag);
    // optimiser_steps on f32 parameters and state from gradients of type t (f16 or bf16): each
    // gradient element widened to f32 and, unless divisor is 1, divided by the f32 divisor, as a cast
    // and a division would; each updated parameter then rounded to t into its copy, as a cast would.
    // ptrs[6i .. 6i + 5]: parameter, gradient, state1, state2, state3 (null where the rule keeps none),
    // copy.
    void (*mixed_optimiser_steps)(int device, Optimiser rule, DType t, std::size_t count, const std::int64_t* n,
                                  const OptimiserStep* const* hp, double divisor, void* const* ptrs);

    // ---- normalisation (optional, ABI 8; null where a backend has none: BatchNorm then composes its
    // training pass from the reductions and elementwise kernels above) ----
    // BatchNorm's training pass over x {outer, c, inner}: per channel j, over its outer·inner values,
    // the mean mean[j], the biased variance var[j] and rstd[j] = 1 / sqrt(var[j] + epsilon); then
    // y = (x - mean[j]) · rstd[j] · weight[j] + bias[j] (weight and bias {c}, or both null: no affine
    // step), and with `relu` y < 0 ? 0 : y (NaN stays NaN, as the relu kernel). mean, var, rstd: {c}.
    void (*batch_norm)(int device, DType t, std::int64_t outer, std::int64_t c, std::int64_t inner, const void* x,
                       const void* weight, const void* bias, double epsilon, bool relu, void* y, void* mean,
                       void* var, void* rstd);
    // Its gradient from the mean and rstd it wrote. With x̂ = (x - mean) · rstd and g = gy, or, where y
    // is not null (the pass had `relu`), gy where y > 0 and 0 elsewhere: per channel gbias[j] = Σ g and
    // gweight[j] = Σ g x̂ over its m = outer·inner values (each may be null), and
    // gx = (g - Σ g / m - x̂ · Σ g x̂ / m) · rstd · weight (gx may be null; weight null: 1).
    void (*batch_norm_backward)(int device, DType t, std::int64_t outer, std::int64_t c, std::int64_t inner,
                                const void* x, const void* y, const void* gy, const void* mean, const void* rstd,
                                const void* weight, void* gx, void* gweight, void* gbias);
};

// What a plugin exports (extern "C"): returns its table, or null if `abi_version` does not match.
using EntryFn = const Backend* (*)(int abi_version);
inline constexpr const char* kEntrySymbol = "fluxion_backend_entry";

const Backend& cpu_backend();  // the built-in CPU table (also reused by the test plugin)
// The CPU backend's lines of fx::info(): the CPU, threads, the BLAS kernel, the convolution library.
std::string cpu_description();
// The threads among which the CPU backend's kernels share their work (FLUXION_NUM_THREADS, else
// every core).
int cpu_threads();

}  // namespace fluxion::backend
