// oneDNN convolutions, in f32 and (where the CPU has bf16 instructions) in bf16: bf16 operands and
// result, f32 accumulation. A plan per shape, pass and type holds the primitive and the reorders
// between the tensors' NCHW / OIHW layouts and the blocked layouts oneDNN's AVX-512 and AVX2 kernels run on;
// plans are made once (creating a primitive takes far longer than running a small one) and shared
// by every thread. The reorders, and oneDNN's own scratchpad, use one Scratch per call.
//
// On the LeNet-5 and CIFAR-style shapes the blocked kernels with their reorders beat im2col +
// OpenBLAS on every pass, except the input gradient of convolutions with few input channels (an
// RGB or grey image), where oneDNN's blocked kernel lost to its plain-layout one: those keep the
// plain layouts. From 4 input channels on the blocked kernel wins (figures: BENCHMARKS.md, "Kernel
// choices").
#include "cpu/conv_onednn.hpp"

#if FLUXION_HAVE_ONEDNN

#include <omp.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cpu/kernels.hpp"
#include "cpu/onednn.hpp"
#include "fluxion/error.hpp"

namespace fluxion::backend::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// Input channels below this keep plain layouts for the input gradient (see the top of the file);
// the same threshold holds in bf16 (BENCHMARKS.md, "Kernel choices").
constexpr int64_t kBlockedMinChannels = 4;

// One argument of the primitive: the layout of the caller's buffer, the one the primitive wants,
// and the reorder between them where they differ (into `wanted` for inputs, out of it for outputs).
struct Operand {
    int arg = 0;
    memory::desc plain, wanted;
    std::optional<dnnl::reorder> reorder;
    std::size_t offset = 0;  // of the reordered copy in the workspace
    bool alone = false;      // reordered on the calling thread (kSharedReorderBytes)
};

// Reorders of fewer bytes than this (weights and their gradients: LeNet-5's, blocked, 0.6 to 26 KB)
// run on the calling thread. oneDNN's reorders otherwise open a parallel region over every thread
// for any size; for a few KB the region's start and end barrier cost more than the copy.
constexpr std::size_t kSharedReorderBytes = std::size_t(64) << 10;

// Limits the oneDNN calls made while it lives to the calling thread: oneDNN's reorders take their
// thread count from omp_get_max_threads, this thread's setting (which it restores), some when they
// are made and some when they run.
class CallingThreadOnly {
public:
    explicit CallingThreadOnly(bool on) : saved_(on ? omp_get_max_threads() : 0) {
        if (on) omp_set_num_threads(1);
    }
    ~CallingThreadOnly() {
        if (saved_ > 0) omp_set_num_threads(saved_);
    }
    CallingThreadOnly(const CallingThreadOnly&) = delete;
    CallingThreadOnly& operator=(const CallingThreadOnly&) = delete;

private:
    int saved_;
};

struct Plan {
    dnnl::primitive primitive;
    Operand a, b, out;
    memory::desc bias;  // zero when the forward pass adds none
    memory::desc x, y;  // the layouts of the input and output activations (or their gradients)
    memory::desc scratchpad;
    std::size_t scratchpad_offset = 0, workspace = 0;
};

std::size_t aligned(std::size_t bytes) { return (bytes + 63) / 64 * 64; }

Operand operand(int arg, const memory::desc& plain, const memory::desc& wanted, bool input, std::size_t& workspace) {
    Operand o{arg, plain, wanted, std::nullopt, 0, wanted.get_size() < kSharedReorderBytes};
    if (plain != wanted) {
        const CallingThreadOnly alone(o.alone);  // some reorders fix their thread count when made
        o.reorder = input
                        ? dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), plain, onednn_engine(), wanted))
                        : dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), wanted, onednn_engine(), plain));
        o.offset = workspace;
        workspace += aligned(wanted.get_size());
    }
    return o;
}

// Whether oneDNN chose one of its direct convolution kernels rather than im2col and its GEMM
// ("gemm:jit") or a reference loop.
bool direct(const std::string& implementation) {
    return implementation.find("gemm") == std::string::npos && implementation.find("ref") == std::string::npos;
}

// A forward plan may add a bias (`bias`); the backward passes take none.
// Every operand, the result included, has the element type `dt`; the bias is f32. The layouts of
// the input and output activations are oneDNN's choice, or `x_layout` and `y_layout` where these
// are not empty; a plan with such a layout is made only with a direct kernel (null otherwise).
std::unique_ptr<Plan> make_plan_in(ConvPass pass, const Conv2dShape& s, memory::data_type dt, bool bias,
                                   const memory::desc& x_layout, const memory::desc& y_layout) {
    const int64_t g = s.groups;
    const memory::dims x_dims{s.n, s.c, s.h, s.w}, y_dims{s.n, s.k, s.oh, s.ow};
    const memory::dims w_dims = g > 1 ? memory::dims{g, s.k / g, s.c / g, s.r, s.s} : memory::dims{s.k, s.c, s.r, s.s};
    const Tag w_tag = g > 1 ? Tag::goihw : Tag::oihw;
    const memory::dims strides{s.stride_h, s.stride_w}, dilates{s.dil_h - 1, s.dil_w - 1};
    const memory::dims pad_l{s.pad_h, s.pad_w};
    // The far-side padding that makes oneDNN's output size ours (negative: rows left unread).
    const memory::dims pad_r{(s.oh - 1) * s.stride_h + (s.r - 1) * s.dil_h + 1 - s.h - s.pad_h,
                             (s.ow - 1) * s.stride_w + (s.s - 1) * s.dil_w + 1 - s.w - s.pad_w};

    const auto f32 = memory::data_type::f32;
    const memory::desc x_plain(x_dims, dt, Tag::nchw), y_plain(y_dims, dt, Tag::nchw), w_plain(w_dims, dt, w_tag);
    const bool plain = pass == ConvPass::backward_input && s.c / g < kBlockedMinChannels;
    const auto want = [&](const memory::dims& d, const memory::desc& p) {
        return plain ? p : memory::desc(d, dt, Tag::any);
    };
    const memory::desc x_any = x_layout.is_zero() ? want(x_dims, x_plain) : x_layout;
    const memory::desc y_any = y_layout.is_zero() ? want(y_dims, y_plain) : y_layout;
    const memory::desc w_any = want(w_dims, w_plain);

    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto algo = dnnl::algorithm::convolution_direct;
    const memory::desc b_plain = bias ? memory::desc({s.k}, f32, Tag::x) : memory::desc();
    const auto forward_desc =
        bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, x_any, w_any, b_plain, y_any,
                                               strides, dilates, pad_l, pad_r)
             : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, x_any, w_any, y_any, strides,
                                               dilates, pad_l, pad_r);
    const dnnl::convolution_forward::primitive_desc forward(forward_desc, attr, onednn_engine());
    std::size_t ws = 0;
    auto plan = std::make_unique<Plan>();
    std::string implementation;  // oneDNN's name for the kernel it chose ("jit_bf16:avx512_core_bf16")
    switch (pass) {
        case ConvPass::forward: {
            plan->primitive = dnnl::convolution_forward(forward);
            plan->scratchpad = forward.scratchpad_desc();
            implementation = forward.impl_info_str();
            plan->a = operand(DNNL_ARG_SRC, x_plain, forward.src_desc(), true, ws);
            plan->b = operand(DNNL_ARG_WEIGHTS, w_plain, forward.weights_desc(), true, ws);
            plan->out = operand(DNNL_ARG_DST, y_plain, forward.dst_desc(), false, ws);
            plan->bias = b_plain;
            plan->x = forward.src_desc();
            plan->y = forward.dst_desc();
            break;
        }
        case ConvPass::backward_input: {
            const dnnl::convolution_backward_data::primitive_desc pd(
                dnnl::convolution_backward_data::desc(algo, x_any, w_any, y_any, strides, dilates, pad_l, pad_r), attr,
                onednn_engine(), forward);
            plan->primitive = dnnl::convolution_backward_data(pd);
            plan->scratchpad = pd.scratchpad_desc();
            implementation = pd.impl_info_str();
            plan->a = operand(DNNL_ARG_DIFF_DST, y_plain, pd.diff_dst_desc(), true, ws);
            plan->b = operand(DNNL_ARG_WEIGHTS, w_plain, pd.weights_desc(), true, ws);
            plan->out = operand(DNNL_ARG_DIFF_SRC, x_plain, pd.diff_src_desc(), false, ws);
            plan->x = pd.diff_src_desc();
            plan->y = pd.diff_dst_desc();
            break;
        }
        case ConvPass::backward_weight: {
            const dnnl::convolution_backward_weights::primitive_desc pd(
                dnnl::convolution_backward_weights::desc(algo, x_any, w_any, y_any, strides, dilates, pad_l, pad_r),
                attr, onednn_engine(), forward);
            plan->primitive = dnnl::convolution_backward_weights(pd);
            plan->scratchpad = pd.scratchpad_desc();
            implementation = pd.impl_info_str();
            plan->a = operand(DNNL_ARG_SRC, x_plain, pd.src_desc(), true, ws);
            plan->b = operand(DNNL_ARG_DIFF_DST, y_plain, pd.diff_dst_desc(), true, ws);
            plan->out = operand(DNNL_ARG_DIFF_WEIGHTS, w_plain, pd.diff_weights_desc(), false, ws);
            plan->x = pd.src_desc();
            plan->y = pd.diff_dst_desc();
            break;
        }
    }
    plan->scratchpad_offset = ws;
    plan->workspace = ws + aligned(plan->scratchpad.get_size());
    // Some bf16 shapes have no direct kernel in blocked layouts, and oneDNN's GEMM fallback lost to
    // widening to its direct f32 kernel (3.4× on LeNet-5's first weight gradient): those are
    // declined, and widened. The plain-layout input gradient is the exception: there the GEMM path
    // beat widening (BENCHMARKS.md, "Kernel choices").
    if (dt == memory::data_type::bf16 && !plain && !direct(implementation)) return nullptr;
    if ((!x_layout.is_zero() || !y_layout.is_zero()) && !direct(implementation)) return nullptr;
    return plan;
}

// Where oneDNN's choice holds 8 channels or fewer in blocks of 16 (LeNet-5's 6-channel
// activations), the plan with blocks of 8 instead, the AVX2 kernels' layout, where oneDNN has a
// direct kernel for it. The kernels take about as long, but every reorder of the activation moves
// half the bytes: the compiled LeNet-5 step took 3% less (BENCHMARKS.md, "Kernel choices").
// Backward passes only: the forward kernel for blocks of 8 with a fused bias rounds
// differently from the eager convolution and bias, so a compiled step traced again after a
// restart from a checkpoint (the trace step runs eagerly) drifted from an unbroken run in the last
// bits (tests/reliability/soak.cpp); oneDNN's kernels for blocks of 16 give the same bits both ways.
std::unique_ptr<Plan> make_plan(ConvPass pass, const Conv2dShape& s, memory::data_type dt, bool bias) {
    auto plan = make_plan_in(pass, s, dt, bias, {}, {});
    if (!plan || pass == ConvPass::forward || dt != memory::data_type::f32 || s.groups != 1) return plan;
    const memory::dims x_dims{s.n, s.c, s.h, s.w}, y_dims{s.n, s.k, s.oh, s.ow};
    const memory::desc x16(x_dims, dt, Tag::aBcd16b), y16(y_dims, dt, Tag::aBcd16b);
    const bool x_wide = plan->x == x16, y_wide = plan->y == y16;
    if (!((x_wide && s.c <= 8) || (y_wide && s.k <= 8))) return plan;
    try {
        auto narrow = make_plan_in(pass, s, dt, bias, x_wide ? memory::desc(x_dims, dt, Tag::aBcd8b) : plan->x,
                                   y_wide ? memory::desc(y_dims, dt, Tag::aBcd8b) : plan->y);
        if (narrow) return narrow;
    } catch (const dnnl::error&) {
        // No kernel for blocks of 8: the plan oneDNN chose stands.
    }
    return plan;
}

using Key = std::array<int64_t, 19>;

// The plan for a shape and pass, made on first use; null when oneDNN does not take the shape, or
// has only a slower kernel for it in bf16 (remembered, so that it is asked once).
const Plan* plan_for(ConvPass pass, const Conv2dShape& s, memory::data_type dt, bool bias) {
    static std::mutex mutex;
    static std::map<Key, std::unique_ptr<Plan>>* plans = new std::map<Key, std::unique_ptr<Plan>>;  // process lifetime
    const Key key{int64_t(pass), s.n,     s.c,      s.h,           s.w,           s.k,        s.r,
                  s.s,           s.oh,    s.ow,     s.stride_h,    s.stride_w,    s.pad_h,    s.pad_w,
                  s.dil_h,       s.dil_w, s.groups, int64_t(bias), int64_t(dt)};
    std::lock_guard lock(mutex);
    auto it = plans->find(key);
    if (it == plans->end()) {
        std::unique_ptr<Plan> plan;
        try {
            plan = make_plan(pass, s, dt, bias);
        } catch (const dnnl::error&) {
            // Not a shape oneDNN takes: im2col + GEMM computes it.
        }
        it = plans->emplace(key, std::move(plan)).first;
    }
    return it->second.get();
}

// The memories one thread runs a plan with: made on the thread's first call, pointed at the
// call's buffers every time after, so that a convolution allocates nothing on our side once its
// shape has been seen (compiled steps replay without allocating).
struct Bound {
    memory a, a_copy, b, b_copy, out, out_wanted, pad, bias;
};

Bound& bound_for(const Plan& plan) {
    thread_local std::map<const Plan*, Bound> bound;
    auto it = bound.find(&plan);
    if (it != bound.end()) return it->second;
    const auto none = [&](const memory::desc& d) { return memory(d, onednn_engine(), nullptr); };
    return bound
        .emplace(&plan, Bound{none(plan.a.plain), none(plan.a.wanted), none(plan.b.plain), none(plan.b.wanted),
                              none(plan.out.plain), none(plan.out.wanted), none(plan.scratchpad),
                              plan.bias.dims().empty() ? memory() : none(plan.bias)})
        .first->second;
}

// Shapes conv.cpp's check() rejects are left to it, so that they raise its error.
bool takes(const Conv2dShape& s) {
    const bool sizes = s.n > 0 && s.c > 0 && s.h > 0 && s.w > 0 && s.k > 0 && s.r > 0 && s.s > 0 && s.oh > 0 &&
                       s.ow > 0 && s.pad_h >= 0 && s.pad_w >= 0;
    const bool steps = s.stride_h >= 1 && s.stride_w >= 1 && s.dil_h >= 1 && s.dil_w >= 1;
    return sizes && steps && s.groups >= 1 && s.c % s.groups == 0 && s.k % s.groups == 0;
}

bool run(ConvPass pass, const Conv2dShape& s, memory::data_type dt, const void* a, const void* b, void* out,
         const float* bias) {
    if (!takes(s)) return false;
    if (pass != ConvPass::forward && bias) return false;
    const Plan* plan = plan_for(pass, s, dt, bias != nullptr);
    if (!plan) return false;
    try {
        thread_local dnnl::stream stream(onednn_engine());
        const Scratch work(plan->workspace);
        char* base = work.as<char>();
        Bound& m = bound_for(*plan);
        const auto input = [&](const Operand& o, memory& given, memory& copy, const void* data) -> memory& {
            given.set_data_handle(const_cast<void*>(data));
            if (!o.reorder) return given;
            copy.set_data_handle(base + o.offset);
            const CallingThreadOnly alone(o.alone);
            onednn_execute(*o.reorder, stream, {{DNNL_ARG_FROM, given.get()}, {DNNL_ARG_TO, copy.get()}});
            return copy;
        };
        memory& ma = input(plan->a, m.a, m.a_copy, a);
        memory& mb = input(plan->b, m.b, m.b_copy, b);
        m.out.set_data_handle(out);
        memory& mo = plan->out.reorder ? m.out_wanted : m.out;
        if (plan->out.reorder) mo.set_data_handle(base + plan->out.offset);
        m.pad.set_data_handle(base + plan->scratchpad_offset);
        if (bias) {
            m.bias.set_data_handle(const_cast<float*>(bias));
            onednn_execute(plan->primitive, stream,
                           {{plan->a.arg, ma.get()},
                            {plan->b.arg, mb.get()},
                            {DNNL_ARG_BIAS, m.bias.get()},
                            {plan->out.arg, mo.get()},
                            {DNNL_ARG_SCRATCHPAD, m.pad.get()}});
        } else {
            onednn_execute(plan->primitive, stream,
                           {{plan->a.arg, ma.get()},
                            {plan->b.arg, mb.get()},
                            {plan->out.arg, mo.get()},
                            {DNNL_ARG_SCRATCHPAD, m.pad.get()}});
        }
        if (plan->out.reorder) {
            const CallingThreadOnly alone(plan->out.alone);
            onednn_execute(*plan->out.reorder, stream, {{DNNL_ARG_FROM, mo.get()}, {DNNL_ARG_TO, m.out.get()}});
        }
        stream.wait();
    } catch (const dnnl::error& e) {
        throw Error(std::string("conv2d: oneDNN failed: ") + e.what());
    }
    return true;
}

}  // namespace

bool onednn_conv2d(ConvPass pass, const Conv2dShape& s, const float* a, const float* b, float* out, const float* bias) {
    return run(pass, s, memory::data_type::f32, a, b, out, bias);
}

bool onednn_conv2d_bf16(ConvPass pass, const Conv2dShape& s, const void* a, const void* b, void* out) {
    if (!onednn_bf16_native() || !run(pass, s, memory::data_type::bf16, a, b, out, nullptr)) return false;
    count_onednn_bf16_run();
    return true;
}

}  // namespace fluxion::backend::cpu

#else  // built without oneDNN: conv.cpp's im2col + GEMM does every convolution

namespace fluxion::backend::cpu {
bool onednn_conv2d(ConvPass, const Conv2dShape&, const float*, const float*, float*, const float*) {
    return false;
}
bool onednn_conv2d_bf16(ConvPass, const Conv2dShape&, const void*, const void*, void*) { return false; }
}  // namespace fluxion::backend::cpu

#endif
