// oneDNN's matmul for bf16. On a CPU with AVX-512 BF16 it multiplies pairs of bf16 values into f32
// sums with one instruction (vdpbf16ps), where the widened path converts every operand to f32 first
// and then runs OpenBLAS's f32 kernel on twice the bytes. A plan per product shape holds the
// primitive (made once: creating one takes far longer than running a small one), shared by every
// thread; oneDNN's scratchpad comes from the calling thread's Scratch.
#include "cpu/matmul_onednn.hpp"

#include "cpu/onednn.hpp"

#if FLUXION_HAVE_ONEDNN

#include <array>
#include <bit>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cpu/kernels.hpp"
#include "fluxion/error.hpp"

namespace fluxion::backend::cpu {
namespace {

using dnnl::memory;

struct Plan {
    dnnl::matmul primitive;
    memory::desc a, b, c, scratchpad;
};

// A `rows` × `cols` operand as the product reads it, `batch` of them `stride` apart, stored
// transposed (column after column) when `trans`. One matrix shared by every product is a batch of 1,
// which oneDNN broadcasts.
memory::desc matrix(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t ld, bool trans) {
    const int64_t count = stride == 0 ? 1 : batch;
    // The stride of a batch of one is never stepped: any that does not overlap the matrix describes it.
    const int64_t step = count == 1 ? ld * (trans ? cols : rows) : stride;
    return memory::desc({count, rows, cols}, memory::data_type::bf16,
                        trans ? memory::dims{step, 1, ld} : memory::dims{step, ld, 1});
}

using Key = std::array<int64_t, 14>;

std::unique_ptr<Plan> make_plan(const Key& key) {
    const auto [trans_a, trans_b, m, n, k, lda, stride_a, ldb, stride_b, ldc, stride_c, batch, alpha_bits, beta_bits] =
        key;
    const double alpha = std::bit_cast<double>(alpha_bits), beta = std::bit_cast<double>(beta_bits);
    auto plan = std::make_unique<Plan>();
    plan->a = matrix(batch, stride_a, m, k, lda, trans_a != 0);
    plan->b = matrix(batch, stride_b, k, n, ldb, trans_b != 0);
    plan->c = matrix(batch, batch == 1 ? 0 : stride_c, m, n, ldc, false);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (alpha != 1) attr.set_output_scales(0, {float(alpha)});
    if (beta != 0) {
        dnnl::post_ops ops;
        ops.append_sum(float(beta));  // C is read in bf16 and added in f32, before the one rounding
        attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(plan->a, plan->b, plan->c), attr, onednn_engine());
    plan->primitive = dnnl::matmul(pd);
    plan->scratchpad = pd.scratchpad_desc();
    return plan;
}

// The plan for a product, made on first use; null when oneDNN does not take it (remembered, so
// that it is asked once).
const Plan* plan_for(const Key& key) {
    static std::mutex mutex;
    static auto* plans = new std::map<Key, std::unique_ptr<Plan>>;  // process lifetime
    std::lock_guard lock(mutex);
    auto it = plans->find(key);
    if (it == plans->end()) {
        std::unique_ptr<Plan> plan;
        try {
            plan = make_plan(key);
        } catch (const dnnl::error&) {
            // Not a product oneDNN takes: the widened path computes it.
        }
        it = plans->emplace(key, std::move(plan)).first;
    }
    return it->second.get();
}

// The memories one thread runs a plan with, pointed at each call's buffers, so that a product
// allocates nothing on our side once its shape has been seen.
struct Bound {
    memory a, b, c, pad;
};

Bound& bound_for(const Plan& plan) {
    thread_local std::map<const Plan*, Bound> bound;
    auto it = bound.find(&plan);
    if (it != bound.end()) return it->second;
    const auto none = [](const memory::desc& d) { return memory(d, onednn_engine(), nullptr); };
    return bound.emplace(&plan, Bound{none(plan.a), none(plan.b), none(plan.c), none(plan.scratchpad)}).first->second;
}

}  // namespace

bool onednn_gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
                      int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b, double beta, void* c,
                      int64_t ldc, int64_t stride_c, int64_t batch) {
    if (!onednn_bf16_native() || m <= 0 || n <= 0 || k <= 0 || batch <= 0) return false;
    if (lda < (trans_a ? m : k) || ldb < (trans_b ? k : n) || ldc < n) return false;
    if (stride_a < 0 || stride_b < 0 || (batch > 1 && stride_c < (m - 1) * ldc + n)) return false;
    const int64_t alpha_bits = std::bit_cast<int64_t>(alpha), beta_bits = std::bit_cast<int64_t>(beta);
    const Key key{trans_a, trans_b, m, n, k, lda, stride_a, ldb, stride_b, ldc, stride_c, batch, alpha_bits, beta_bits};
    const Plan* plan = plan_for(key);
    if (!plan) return false;
    try {
        thread_local dnnl::stream stream(onednn_engine());
        const Scratch pad(plan->scratchpad.get_size());
        Bound& mem = bound_for(*plan);
        mem.a.set_data_handle(const_cast<void*>(a));
        mem.b.set_data_handle(const_cast<void*>(b));
        mem.c.set_data_handle(c);
        mem.pad.set_data_handle(pad.as<void>());
        onednn_execute(plan->primitive, stream,
                       {{DNNL_ARG_SRC, mem.a.get()},
                        {DNNL_ARG_WEIGHTS, mem.b.get()},
                        {DNNL_ARG_DST, mem.c.get()},
                        {DNNL_ARG_SCRATCHPAD, mem.pad.get()}});
        stream.wait();
    } catch (const dnnl::error& e) {
        throw Error(std::string("gemm: oneDNN's bf16 matmul failed: ") + e.what());
    }
    count_onednn_bf16_run();
    return true;
}

}  // namespace fluxion::backend::cpu

#else  // built without oneDNN: every bf16 product is widened to f32

namespace fluxion::backend::cpu {
bool onednn_gemm_bf16(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const void*, std::int64_t,
                      std::int64_t, const void*, std::int64_t, std::int64_t, double, void*, std::int64_t, std::int64_t,
                      std::int64_t) {
    return false;
}
}  // namespace fluxion::backend::cpu

#endif
