// attention.hpp — the attention op on the one projection of a self-attention, for MultiHeadAttention.
#pragma once
#include "fluxion/ops.hpp"

namespace fluxion::detail {

// scaled_dot_product_attention of the queries, keys and values packed in qkv {N, L, 3, heads, d}
// (one product projects all three): {N, heads, L, d}, laid out {N, L, heads, d} so that merging the
// heads copies nothing. Its gradient is one {N, L, 3, heads, d} tensor, so the projection's backward
// is one product too.
Tensor packed_attention(const Tensor& qkv, const AttentionOptions& options);

}  // namespace fluxion::detail
