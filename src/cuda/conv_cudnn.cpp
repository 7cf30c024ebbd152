// conv_cudnn.cpp — convolutions through cuDNN's legacy API. For each shape, pass and dtype the
// descriptors are made and an algorithm is chosen once and cached: by cuDNN's heuristics (the first
// usable result) for f32 and f64, by timing the algorithms that round once (rounds_once, below) on
// the first call's data for f16 and bf16, where the heuristics' first choice was slow on an H100
// (590 us for the bf16 weight gradient of LeNet-5's first convolution). The workspace comes from the
// caching allocator for the duration of the call.
// f16 and bf16 tensors are convolved with f32 compute (cuDNN's pseudo-half configurations: f32
// accumulation, one rounding of the result, tensor cores allowed); a shape cuDNN refuses in them
// goes to im2col + GEMM, which accumulates in f32 as well.
#include <algorithm>
#include <array>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "cuda/allocator.hpp"
#include "cuda/capture.hpp"
#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "cuda/conv.hpp"
#include "cuda/cudnn_api.hpp"
#include "fluxion/error.hpp"

namespace fluxion::cuda {

namespace {

enum class Pass { forward, backward_data, backward_filter };

struct Plan {
    bool usable = false;  // false: cuDNN offers nothing for this shape, use im2col
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    int algorithm = 0;
    std::size_t workspace = 0;
};

using Key = std::array<std::int64_t, 20>;

Key key_of(int device, DType t, Pass pass, bool tf32, const Conv2dShape& s) {
    return {device,     static_cast<std::int64_t>(t), static_cast<std::int64_t>(pass), tf32, s.n, s.c, s.h,
            s.w,        s.k,        s.r,        s.s,        s.oh,       s.ow,       s.stride_h,
            s.stride_w, s.pad_h,    s.pad_w,    s.dil_h,    s.dil_w,    s.groups};
}

// Shapes cuDNN's descriptors take: int-sized, and no empty input axis (cuDNN rejects or mishandles
// those; im2col + GEMM gives the CPU's result, zeros, for them).
bool fits_int(const Conv2dShape& s) {
    for (std::int64_t v : {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.oh, s.ow, s.stride_h, s.stride_w, s.pad_h, s.pad_w,
                           s.dil_h, s.dil_w, s.groups})
        if (v < 0 || v > INT_MAX) return false;
    if (s.c == 0 || s.h == 0 || s.w == 0) return false;
    return s.n * s.c * s.h * s.w <= INT_MAX && s.n * s.k * s.oh * s.ow <= INT_MAX;
}

// One cuDNN handle per device, bound to the device's compute stream; kept for the process's life.
// A cuDNN that loads but cannot make a handle (a library too old for the driver, say) leaves that
// device's convolutions to im2col, said once on stderr, instead of failing every one of them.
cudnnHandle_t handle_for(const CudnnApi& api, const Context& ctx) {
    static std::mutex mutex;
    static std::map<int, cudnnHandle_t> handles;
    static std::map<int, bool> refused;
    std::lock_guard lock(mutex);
    cudnnHandle_t& handle = handles[ctx.device];
    if (!handle && !refused[ctx.device]) {
        cudnnStatus_t status = api.create(&handle);
        if (status == CUDNN_STATUS_SUCCESS) status = api.set_stream(handle, ctx.stream);
        if (status != CUDNN_STATUS_SUCCESS) {
            std::fprintf(stderr, "[ fluxion: cuDNN cannot be used on CUDA:%d (%s); convolutions use im2col + GEMM\n",
                         ctx.device, api.get_error_string(status));
            refused[ctx.device] = true;
            handle = nullptr;
        }
    }
    return handle;
}

// Workspaces larger than half the memory available now are passed over, so that a fast algorithm
// does not crowd out the tensors.
std::size_t workspace_limit(int device) {
    std::size_t free = 0, total = 0;
    FLUXION_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    const MemoryStats stats = memory_stats(device);
    return (free + stats.reserved - stats.allocated) / 2;
}

// Whether an algorithm rounds a half-type result once, from f32 sums: the matrix-product ones do.
// Those that add partial sums with atomics into the output (backward ALGO_0, ALGO_3) round every
// addition to the half type, and FFT and Winograd may carry their transforms in it. On the H100 the
// fastest timed algorithm gave f16/bf16 input gradients 8-40 units in the last place from the CPU's,
// where the heuristics' first choice had matched them within one.
bool rounds_once(cudnnConvolutionFwdAlgo_t a) {
    return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
           a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
}
bool rounds_once(cudnnConvolutionBwdDataAlgo_t a) { return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1; }
bool rounds_once(cudnnConvolutionBwdFilterAlgo_t a) { return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1; }

// The first result cuDNN ranks usable: it succeeded, fits the workspace limit, uses only FMA
// instructions (no TF32 tensor cores) when asked to, and for a half type rounds once.
// FLUXION_CUDNN_VERBOSE=1: each plan's candidates on stderr, as cuDNN ranked them (timed or not),
// and the one chosen; what a GPU run reads to see why a convolution is slow.
bool verbose() {
    static const bool on = [] {
        const char* v = std::getenv("FLUXION_CUDNN_VERBOSE");
        return v && std::strcmp(v, "0") != 0;
    }();
    return on;
}
const char* math_name(cudnnMathType_t m) {
    return m == CUDNN_FMA_MATH                            ? "fma"
           : m == CUDNN_TENSOR_OP_MATH                    ? "tensor ops"
           : m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? "tensor ops, converting"
                                                          : "default";
}
template <class Perf> void report(const char* pass, DType t, const Conv2dShape& s, bool timed, const Perf* results,
                                  int count, const Plan& plan) {
    char shape[128];
    std::snprintf(shape, sizeof shape, " n %lld c %lld %lldx%lld k %lld %lldx%lld groups %lld", (long long)s.n,
                  (long long)s.c, (long long)s.h, (long long)s.w, (long long)s.k, (long long)s.r, (long long)s.s,
                  (long long)s.groups);
    std::string line = std::string("[ fluxion cuDNN: ") + pass + " " + fluxion::name(t) + shape +
                       (timed ? ", timed:" : ", heuristics:");
    for (int i = 0; i < count; ++i) {
        char one[96];
        std::snprintf(one, sizeof one, " algo %d (%s, %s) %.3f ms%s", int(results[i].algo),
                      math_name(results[i].mathType), results[i].status == CUDNN_STATUS_SUCCESS ? "ok" : "failed",
                      double(results[i].time), i + 1 < count ? ";" : "");
        line += one;
    }
    line += plan.usable ? "; chose algo " + std::to_string(plan.algorithm) : std::string("; none: im2col + GEMM");
    std::fprintf(stderr, "%s\n", line.c_str());
}

template <class Perf> bool choose(const Perf* results, int count, bool fma_only, bool half, std::size_t limit,
                                  Plan& plan, cudnnMathType_t& math) {
    for (int i = 0; i < count; ++i) {
        const Perf& r = results[i];
        if (r.status != CUDNN_STATUS_SUCCESS || r.memory > limit) continue;
        if (fma_only && r.mathType != CUDNN_FMA_MATH) continue;
        if (half && !rounds_once(r.algo)) continue;
        plan.algorithm = static_cast<int>(r.algo);
        plan.workspace = r.memory;
        math = r.mathType;
        return true;
    }
    return false;
}

cudnnDataType_t data_type(DType t) {
    switch (t) {
        case DType::f64: return CUDNN_DATA_DOUBLE;
        case DType::f16: return CUDNN_DATA_HALF;
        case DType::bf16: return CUDNN_DATA_BFLOAT16;
        default: return CUDNN_DATA_FLOAT;
    }
}

// The call's data, for timing algorithms: two inputs and the output (which every call overwrites,
// beta being 0, so the trial runs leave nothing behind).
struct Operands {
    const void* a = nullptr;
    const void* b = nullptr;
    void* out = nullptr;
};

// Workspace for timing algorithms: no more than the limit, nor than 256 MiB.
constexpr std::size_t kMeasureWorkspace = std::size_t{256} << 20;

Plan make_plan(const CudnnApi& api, cudnnHandle_t handle, int device, Pass pass, DType t, bool fma_only,
               const Conv2dShape& s, std::size_t limit, const Operands* measure) {
    Plan plan;
    const cudnnDataType_t type = data_type(t);
    const cudnnDataType_t compute = t == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    const bool half = t == DType::f16 || t == DType::bf16;
    auto i = [](std::int64_t v) { return static_cast<int>(v); };
    FLUXION_CUDNN_CHECK(api.create_tensor_descriptor(&plan.x));
    FLUXION_CUDNN_CHECK(api.create_tensor_descriptor(&plan.y));
    FLUXION_CUDNN_CHECK(api.create_filter_descriptor(&plan.w));
    FLUXION_CUDNN_CHECK(api.create_convolution_descriptor(&plan.conv));
    FLUXION_CUDNN_CHECK(
        api.set_tensor_4d_descriptor(plan.x, CUDNN_TENSOR_NCHW, type, i(s.n), i(s.c), i(s.h), i(s.w)));
    FLUXION_CUDNN_CHECK(
        api.set_tensor_4d_descriptor(plan.y, CUDNN_TENSOR_NCHW, type, i(s.n), i(s.k), i(s.oh), i(s.ow)));
    FLUXION_CUDNN_CHECK(
        api.set_filter_4d_descriptor(plan.w, type, CUDNN_TENSOR_NCHW, i(s.k), i(s.c / s.groups), i(s.r), i(s.s)));
    FLUXION_CUDNN_CHECK(api.set_convolution_2d_descriptor(plan.conv, i(s.pad_h), i(s.pad_w), i(s.stride_h),
                                                          i(s.stride_w), i(s.dil_h), i(s.dil_w),
                                                          CUDNN_CROSS_CORRELATION, compute));
    FLUXION_CUDNN_CHECK(api.set_convolution_group_count(plan.conv, i(s.groups)));
    // Half types on tensor cores, as PyTorch sets them; f32 on them (TF32) only when allowed.
    FLUXION_CUDNN_CHECK(api.set_convolution_math_type(
        plan.conv, half ? CUDNN_TENSOR_OP_MATH : (fma_only ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH)));

    cudnnMathType_t math = CUDNN_FMA_MATH;
    int count = 0;
    // Timing (cudnnFind*Ex) waits for the stream, so it is never done while a graph is captured;
    // a trial that fails leaves the heuristics to choose.
    const std::size_t trial_bytes = std::min(limit, kMeasureWorkspace);
    auto timed = [&](bool available, auto find, auto* results, int capacity) {
        if (!measure || !available) return false;
        Scratch workspace(device, trial_bytes);
        const cudnnStatus_t status = find(results, capacity, workspace.get(), trial_bytes);
        return status == CUDNN_STATUS_SUCCESS && count > 0;
    };
    switch (pass) {
        case Pass::forward: {
            cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
            const bool found = timed(
                api.find_forward_algorithm != nullptr,
                [&](auto* r, int cap, void* ws, std::size_t bytes) {
                    return api.find_forward_algorithm(handle, plan.x, measure->a, plan.w, measure->b, plan.conv,
                                                      plan.y, measure->out, cap, &count, r, ws, bytes);
                },
                results, CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
            if (!found)
                FLUXION_CUDNN_CHECK(api.get_forward_algorithm(handle, plan.x, plan.w, plan.conv, plan.y,
                                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, results));
            plan.usable = choose(results, count, fma_only, half, found ? trial_bytes : limit, plan, math);
            if (verbose()) report("forward", t, s, found, results, count, plan);
            break;
        }
        case Pass::backward_data: {
            cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
            const bool found = timed(
                api.find_backward_data_algorithm != nullptr,
                [&](auto* r, int cap, void* ws, std::size_t bytes) {
                    return api.find_backward_data_algorithm(handle, plan.w, measure->a, plan.y, measure->b,
                                                            plan.conv, plan.x, measure->out, cap, &count, r, ws,
                                                            bytes);
                },
                results, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
            if (!found)
                FLUXION_CUDNN_CHECK(api.get_backward_data_algorithm(handle, plan.w, plan.y, plan.conv, plan.x,
                                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count,
                                                                    results));
            plan.usable = choose(results, count, fma_only, half, found ? trial_bytes : limit, plan, math);
            if (verbose()) report("backward data", t, s, found, results, count, plan);
            break;
        }
        case Pass::backward_filter: {
            cudnnConvolutionBwdFilterAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
            const bool found = timed(
                api.find_backward_filter_algorithm != nullptr,
                [&](auto* r, int cap, void* ws, std::size_t bytes) {
                    return api.find_backward_filter_algorithm(handle, plan.x, measure->a, plan.y, measure->b,
                                                              plan.conv, plan.w, measure->out, cap, &count, r, ws,
                                                              bytes);
                },
                results, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
            if (!found)
                FLUXION_CUDNN_CHECK(api.get_backward_filter_algorithm(handle, plan.x, plan.y, plan.conv, plan.w,
                                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count,
                                                                      results));
            plan.usable = choose(results, count, fma_only, half, found ? trial_bytes : limit, plan, math);
            if (verbose()) report("backward filter", t, s, found, results, count, plan);
            break;
        }
    }
    if (plan.usable) FLUXION_CUDNN_CHECK(api.set_convolution_math_type(plan.conv, math));
    return plan;
}

struct PlanCache {
    std::mutex mutex;
    std::map<Key, Plan> plans;
};
PlanCache& plan_cache() {
    static PlanCache* cache = new PlanCache;  // never destroyed: plans live as long as the process
    return *cache;
}

bool tf32_for(DType t) { return t == DType::f32 && tf32_allowed(); }

// Marks the plan of this call unusable: im2col + GEMM from now on.
void forget_plan(const Context& ctx, Pass pass, DType t, const Conv2dShape& s) {
    PlanCache& cache = plan_cache();
    std::lock_guard lock(cache.mutex);
    auto it = cache.plans.find(key_of(ctx.device, t, pass, tf32_for(t), s));
    if (it != cache.plans.end()) it->second.usable = false;
}

// The cached plan for this call. Plans (and their descriptors) live as long as the process.
Plan plan_for(const CudnnApi& api, cudnnHandle_t handle, const Context& ctx, Pass pass, DType t,
              const Conv2dShape& s, const Operands& operands) {
    // On Ampere and later cuDNN's default math lets f32 convolutions use TF32; FMA math does not.
    const bool tf32 = tf32_for(t);
    const bool fma_only = t == DType::f32 && !tf32;
    PlanCache& cache = plan_cache();
    const Key key = key_of(ctx.device, t, pass, tf32, s);
    std::lock_guard lock(cache.mutex);
    auto& plans = cache.plans;
    auto it = plans.find(key);
    if (it == plans.end()) {
        Plan plan;
        // A shape cuDNN's descriptors or algorithm queries refuse (NOT_SUPPORTED, BAD_PARAM) is
        // computed by im2col + GEMM, and remembered so that cuDNN is asked once.
        try {
            const bool half = t == DType::f16 || t == DType::bf16;
            const Operands* measure = half && !capturing(ctx.device) ? &operands : nullptr;
            if (fits_int(s))
                plan = make_plan(api, handle, ctx.device, pass, t, fma_only, s, workspace_limit(ctx.device), measure);
        } catch (const fluxion::Error&) {
            plan.usable = false;
        }
        it = plans.emplace(key, plan).first;
    }
    return it->second;
}

// A call cuDNN refuses when it runs (an algorithm the heuristics offered for a half type that then
// fails, say) is computed by im2col + GEMM instead, and so is every later call of that plan: said
// once on stderr. The plan cache holds the refusal.
bool ran(const CudnnApi& api, cudnnStatus_t status, const Context& ctx, Pass pass, DType t, const Conv2dShape& s) {
    if (status == CUDNN_STATUS_SUCCESS) return true;
    std::fprintf(stderr, "[ fluxion: cuDNN refused a convolution on CUDA:%d (%s); im2col + GEMM computes it\n",
                 ctx.device, api.get_error_string(status));
    forget_plan(ctx, pass, t, s);
    return false;
}

// cuDNN's scaling factors: double for f64 convolutions, float for the others.
struct Scale {
    float f32[2] = {1.0f, 0.0f};
    double f64[2] = {1.0, 0.0};
    const void* one(DType t) const { return t == DType::f64 ? static_cast<const void*>(&f64[0]) : &f32[0]; }
    const void* zero(DType t) const { return t == DType::f64 ? static_cast<const void*>(&f64[1]) : &f32[1]; }
};

}  // namespace

bool cudnn_conv2d(int device, DType t, const Conv2dShape& s, const void* x, const void* w, void* y) {
    const CudnnApi* api = cudnn_api();
    if (!api) return false;
    Context& ctx = activate(device);
    cudnnHandle_t handle = handle_for(*api, ctx);
    if (!handle) return false;
    const Plan plan = plan_for(*api, handle, ctx, Pass::forward, t, s, {x, w, y});
    if (!plan.usable) return false;
    Scratch workspace(device, plan.workspace);
    const Scale scale;
    return ran(*api,
               api->convolution_forward(handle, scale.one(t), plan.x, x, plan.w, w, plan.conv,
                                        static_cast<cudnnConvolutionFwdAlgo_t>(plan.algorithm), workspace.get(),
                                        plan.workspace, scale.zero(t), plan.y, y),
               ctx, Pass::forward, t, s);
}

bool cudnn_conv2d_backward_input(int device, DType t, const Conv2dShape& s, const void* gy, const void* w, void* gx) {
    const CudnnApi* api = cudnn_api();
    if (!api) return false;
    Context& ctx = activate(device);
    cudnnHandle_t handle = handle_for(*api, ctx);
    if (!handle) return false;
    const Plan plan = plan_for(*api, handle, ctx, Pass::backward_data, t, s, {w, gy, gx});
    if (!plan.usable) return false;
    Scratch workspace(device, plan.workspace);
    const Scale scale;
    return ran(*api,
               api->convolution_backward_data(handle, scale.one(t), plan.w, w, plan.y, gy, plan.conv,
                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algorithm),
                                              workspace.get(), plan.workspace, scale.zero(t), plan.x, gx),
               ctx, Pass::backward_data, t, s);
}

bool cudnn_conv2d_backward_weight(int device, DType t, const Conv2dShape& s, const void* x, const void* gy, void* gw) {
    const CudnnApi* api = cudnn_api();
    if (!api) return false;
    Context& ctx = activate(device);
    cudnnHandle_t handle = handle_for(*api, ctx);
    if (!handle) return false;
    const Plan plan = plan_for(*api, handle, ctx, Pass::backward_filter, t, s, {x, gy, gw});
    if (!plan.usable) return false;
    Scratch workspace(device, plan.workspace);
    const Scale scale;
    return ran(*api,
               api->convolution_backward_filter(handle, scale.one(t), plan.x, x, plan.y, gy, plan.conv,
                                                static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algorithm),
                                                workspace.get(), plan.workspace, scale.zero(t), plan.w, gw),
               ctx, Pass::backward_filter, t, s);
}

}  // namespace fluxion::cuda
