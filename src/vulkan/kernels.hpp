// kernels.hpp — the Vulkan backend's implementations of the kernel table (src/core/backend.hpp),
// one declaration per entry with the table's signature; plugin.cpp assembles them into the table.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/backend.hpp"

namespace fluxion::vulkan {

using backend::Binary;
using backend::Conv2dShape;
using backend::Optimiser;
using backend::OptimiserStep;
using backend::Pool;
using backend::Pool2dShape;
using backend::Reduce;
using backend::Strided;
using backend::Unary;

// device.cpp
bool functional(char* why, std::size_t why_size);
int device_count();
void synchronize(int device);

// capture.cpp
void capture_begin(int device);
void* capture_end(int device);
void capture_run(int device, void* recording);
void capture_free(int device, void* recording);

// capabilities.cpp
void device_properties(int device, backend::DeviceProperties* out);
bool supports(int device, backend::Op op, DType t, char* why, std::size_t why_size);

// copy.cpp (alloc and free are the caching allocator's, allocator.hpp)
void copy_from_host(int device, void* dst, const void* src, std::size_t bytes);
void copy_to_host(int device, void* dst, const void* src, std::size_t bytes);
void copy_device(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes);

// layout.cpp
void fill(int device, DType t, std::int64_t n, void* dst, double value);
void copy_strided(int device, DType t, const Strided* src_view, const void* src, const std::int64_t* dst_strides,
                  void* dst);
void cast(int device, DType from, DType to, std::int64_t n, const void* src, void* dst);
void index_select(int device, DType t, std::int64_t outer, std::int64_t n_src, std::int64_t inner, const void* src,
                  const std::int64_t* idx, std::int64_t n_idx, void* dst);
void index_add(int device, DType t, std::int64_t outer, std::int64_t n_dst, std::int64_t inner, const void* src,
               const std::int64_t* idx, std::int64_t n_idx, void* dst);

// unary.cpp, binary.cpp
void unary(int device, Unary op, DType t, std::int64_t n, const void* x, void* y, double a, double b);
void unary_backward(int device, Unary op, DType t, std::int64_t n, const void* x, const void* y, const void* gy,
                    void* gx, double a, double b);
void binary(int device, Binary op, DType t, const Strided* a_view, const void* a, const Strided* b_view,
            const void* b, void* out);
void where(int device, DType t, const Strided* c_view, const void* c, const Strided* a_view, const void* a,
           const Strided* b_view, const void* b, void* out);

// reduce.cpp, softmax.cpp
void reduce(int device, Reduce op, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner, const void* src,
            void* dst);
void softmax(int device, bool log, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner, const void* x,
             void* y);
void softmax_backward(int device, bool log, DType t, std::int64_t outer, std::int64_t n, std::int64_t inner,
                      const void* y, const void* gy, void* gx);

// recurrent.cpp (f32 and f64)
void lstm_cell(int device, DType t, std::int64_t n, std::int64_t h, void* gates, std::int64_t ld_gates,
               const void* c_prev, void* c, void* h_out, std::int64_t ld_h);
void lstm_cell_backward(int device, DType t, std::int64_t n, std::int64_t h, const void* gates, std::int64_t ld_gates,
                        const void* c_prev, const void* c, const void* gh, std::int64_t ld_gh, const void* gh_next,
                        void* gc, void* dgates);

// batch_norm.cpp (f32 and f64)
void batch_norm(int device, DType t, std::int64_t outer, std::int64_t c, std::int64_t inner, const void* x,
                const void* weight, const void* bias, double epsilon, bool relu, void* y, void* mean, void* var,
                void* rstd);
void batch_norm_backward(int device, DType t, std::int64_t outer, std::int64_t c, std::int64_t inner, const void* x,
                         const void* y, const void* gy, const void* mean, const void* rstd, const void* weight,
                         void* gx, void* gweight, void* gbias);

// gemm.cpp
void gemm(int device, DType t, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
          double alpha, const void* a, std::int64_t lda, std::int64_t stride_a, const void* b, std::int64_t ldb,
          std::int64_t stride_b, double beta, void* c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch);

// conv.cpp, pool.cpp
void conv2d(int device, DType t, const Conv2dShape* s, const void* x, const void* w, void* y);
void conv2d_backward_input(int device, DType t, const Conv2dShape* s, const void* gy, const void* w, void* gx);
void conv2d_backward_weight(int device, DType t, const Conv2dShape* s, const void* x, const void* gy, void* gw);
void pool2d(int device, Pool op, DType t, const Pool2dShape* s, const void* x, void* y);
void pool2d_backward(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                     const void* gy, void* gx);
void pool2d_backward_activation(int device, Pool op, DType t, const Pool2dShape* s, const void* x, const void* y,
                                const void* gy, Unary act, void* gx);

// fused.cpp
void elementwise_chain(int device, DType t, std::int64_t n, const backend::ElementwiseStep* steps, std::size_t count,
                       void* const* ptrs);
void conv2d_epilogue(int device, DType t, const Conv2dShape* s, const void* x, const void* w, const void* bias,
                     const backend::ConvEpilogue* e, void* y);
void optimiser_steps(int device, Optimiser rule, DType t, std::size_t count, const std::int64_t* n,
                     const OptimiserStep* const* hp, void* const* ptrs);

// optimiser.cpp
void optimiser_step(int device, Optimiser rule, DType t, std::int64_t n, void* param, const void* grad,
                    void* state1, void* state2, void* state3, const OptimiserStep* hp);
void mixed_optimiser_steps(int device, Optimiser rule, DType t, std::size_t count, const std::int64_t* n,
                           const OptimiserStep* const* hp, double divisor, void* const* ptrs);
void nonfinite_check(int device, DType t, std::size_t count, const std::int64_t* n, const void* const* ptrs,
                     double divisor, void* flag);

}  // namespace fluxion::vulkan
